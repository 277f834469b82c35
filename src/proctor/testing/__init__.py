"""proctor.testing: ``proctor test``, a skill's tests replayed in isolated workspaces.

It sits above the runtime and drives runs only through the session's public surface
(``Session.run``, ``resume``, ``turn_call``), with the stand-ins the runtime offers seams
for: an egress route for HTTP, a model client transport for managed turns.

Modules, each importing only those above it in this list:

- :mod:`.oracle`: ``expect`` checked against what a run left behind (JSON-pointer diffs);
- :mod:`.keys`: the public test key, the fixed clock, fixed run ids (byte-identical receipts);
- :mod:`.http` with :mod:`.http_transport`: the HTTP stand-in (declared exchanges after the
  egress guard; no socket);
- :mod:`.model`: the model stand-in (a managed agent answered by scripted documents);
- :mod:`.workspace`: the test's own workspace under ``.proctor/test/<id>/``;
- :mod:`.host`: the host stand-in (answers, approvals, worked turns, close);
- :mod:`.trace`: a run tree's calls by digest, and the first place two traces part;
- :mod:`.runner`: finding tests and running each one;
- :mod:`.report`: ``proctor.test.v1`` JSON and JUnit XML, scrubbed of fixture secrets;
- :mod:`.record`: ``proctor test record``, a test file from a real run;
- :mod:`.retained`: a sealed run that retained its calls, read back as a test document;
- :mod:`.replay`: ``proctor test record --from`` and ``proctor replay``.

The test file's model is :mod:`proctor.contracts.testfile`, its strict parse
:mod:`proctor.parser.testfile`; the report's model :mod:`proctor.contracts.testreport`.
"""

"""proctor.runtime: the impure engine, in parts that import downwards only.

Each part is a sub-package whose ``__init__`` says what it owns, which of its modules the other
parts may use (its surface) and which parts it may import; import-linter enforces the order
(``pyproject.toml``) and ``tests/test_architecture.py`` refuses any import cycle. From the top:

- ``fleet``: ``proctor worker``: the shared work queue on PostgreSQL, heartbeats, the loop
  that drives submitted work;
- ``check``: ``proctor check``, the self-verification that uses every part;
- ``agents``: managed agents (provider dialects, the turn loop) and the sessions that drive
  directive runs with one;
- ``engine``: the session, the run driver, the step kinds, sealing, leases, credential delivery;
- ``notify``: telling people a request waits (``[notify]`` channels, the notification
  document, at-least-once delivery from the run store's outbox);
- ``admission``: the governor (the one path every call takes) and the floor's preview;
- ``connectors``: declared provider operations (``connectors/<name>/connector.yaml``) as tools;
- ``tools``: the native tools, each a schema, an effect class and a handler;
- ``directives``: the directive catalogue (``directives/*.md`` and the shipped ones);
- ``storage``: a skill package's own state behind the ``store.*`` tools (SQLite, PostgreSQL,
  Redis);
- ``records``: the run stores, the receipt store, the audit log, the signature pool;
- ``packages``: skill packages from outside the workspace: package files and signed manifests,
  installed registry packages, the core skills; ``resolve_skill`` reads any reference;
- ``home``: ``PROCTOR_HOME``: the signing key, ``config.json``, presets, credentials;
- ``boundary``: where a run meets the host: workspace containment and reach, the egress guard
  and transport, the sanitizer;
- ``skills``, ``limits``, ``testhooks``, ``listen``, ``telemetry``: reading skill packages,
  limits from the environment, crash-test hooks, the listening sockets of proctor's servers,
  OpenTelemetry export of the audit log's events (only when configured); used by every part
  above;
- ``real_paths``: a path's real path, asked of the kernel in one lookup (under them all).
"""

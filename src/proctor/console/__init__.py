"""The web console: people sign in, see exactly what runs wait on, approve or decline it bound
to the request digest, and browse runs with their steps, calls, refusals and verified receipts.

Owns: :mod:`.users` (per-person sign-in tokens, kept hashed in the home), :mod:`.sessions`
(signed-in sessions that expire, each with its CSRF token), :mod:`.app` (the starlette
application: server-rendered pages, no state change on GET, a CSRF token on every POST),
:mod:`.pages` (what each page shows, read from the run store), :mod:`.inert` (the pages'
rendering boundary: every value shown through one jinja hook, hostile characters escaped and
marked) and :mod:`.serve` (binding: loopback only unless a public https URL and TLS are given).

Beside ``proctor.mcp`` above the runtime: it imports the engine's surface (``Session``, the
approvals module), the records and the home; never ``proctor.cli`` or ``proctor.mcp``.
starlette, uvicorn and jinja2 (the ``console`` extra; markupsafe with jinja2) are imported only
by :mod:`.app`, :mod:`.inert` and :mod:`.serve`, so ``proctor --help`` never loads them.
"""

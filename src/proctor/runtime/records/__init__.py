"""The records: what stays after a run, and what proves it.

Owns: :mod:`.runs` (the run store interface: runs, events, requests, calls, the journal) with
:mod:`.sqlite` (the SQLite store; :mod:`.sqlite_schema` its schema, :mod:`.sqlite_counts` its
index by step and per-run counters, :mod:`.store_file` how its file is built and checked,
:mod:`.store_evidence` a missing one that records show existed refused, never re-created),
:mod:`.postgres` (the PostgreSQL store many workers share; :mod:`.postgres_pool` its connection
pools, :mod:`.postgres_schema` its migrations, :mod:`.postgres_writes` a write as one statement
with its fence, and which commits wait for the WAL flush), :mod:`.rows` (the row shapes both stores
share), :mod:`.outbox` (the notification outbox and timers, a table of its own in either
store), :mod:`.backend` (which of the two a workspace
uses: ``PROCTOR_DATABASE_URL``),
:mod:`.receipts` (the receipt store: one file per receipt), :mod:`.verify_folder` (a
receipt tree verified against trusted keys from a folder: ``verify_receipt``), :mod:`.audit`
(the hash-chained audit log) with :mod:`.chain` (its format, checked against anchors),
:mod:`.anchors` (where the anchors that receipts and the run store keep are found) and
:mod:`.audit_breaks` (a broken log stops runs until a person records the break),
:mod:`.signature_pool` (batched Ed25519 checks on every core's threads),
:mod:`.signature_processes` (the same in helper processes, :mod:`.signature_worker`, which
``proctor verify`` uses), :mod:`.folder_reader` (receipt files read fast for it), and
:mod:`.artifacts` (the content-addressed artifact store under ``.proctor/artifacts/``),
:mod:`.export` (a sealed run as a DSSE/in-toto statement), :mod:`.forward` (the audit log
shipped to syslog or HTTP from a durable cursor), :mod:`.witness` and :mod:`.witness_server`
(seals countersigned by witnesses outside the workspace).

Surface: every module. May import home (the signing key), boundary (the sanitizer, the
workspace's folders) and the shared runtime modules; never tools, admission or the engine.
"""

"""The records: what stays after a run, and what proves it.

Owns: :mod:`.runs` (the run store interface: runs, events, requests, calls, the journal) with
:mod:`.sqlite` (the SQLite store; :mod:`.sqlite_counts` holds its index by step and per-run
counters), :mod:`.receipts` (the receipt store: one file per receipt, and tree verification
against trusted keys), :mod:`.audit` (the hash-chained audit log) and
:mod:`.signature_pool` (batched Ed25519 checks on every core).

Surface: every module. May import home (the signing key), boundary (the sanitizer, the
workspace's folders) and the shared runtime modules; never tools, admission or the engine.
"""

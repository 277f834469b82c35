"""The SQLite run store's schema and its version (applied whole by :func:`build_schema`)."""

from __future__ import annotations

import sqlite3

from proctor.runtime.records.outbox import OUTBOX_SQLITE
from proctor.runtime.records.sqlite_counts import COUNTS_SCHEMA

__all__ = ["SCHEMA", "SCHEMA_VERSION", "build_schema"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    cursor INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    skill TEXT NOT NULL,
    method TEXT NOT NULL,
    status TEXT NOT NULL,
    outcome TEXT,
    receipt_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    data TEXT NOT NULL,
    identity TEXT
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS calls (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    step_id TEXT,
    tool TEXT NOT NULL,
    state TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    outcome TEXT,
    result TEXT,
    idempotency_key TEXT,
    epoch INTEGER,
    site TEXT,
    UNIQUE (run_id, call_id)
);
CREATE INDEX IF NOT EXISTS calls_idem ON calls (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS journal (
    bundle_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    state TEXT NOT NULL,
    entries TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (run_id, step_id)
);
CREATE TABLE IF NOT EXISTS requests (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    address TEXT NOT NULL,
    kind TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    decision TEXT,
    closed INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, address)
);
CREATE INDEX IF NOT EXISTS runs_reuse ON runs (json_extract(data, '$.reuse_key'), cursor)
    WHERE status = 'sealed' AND outcome = 'completed';
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL,
    epoch INTEGER NOT NULL DEFAULT 0,
    taken_from TEXT
);
CREATE TABLE IF NOT EXISTS audit_anchor (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    lines INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS events_append_only_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_append_only_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
"""


SCHEMA += COUNTS_SCHEMA  # the index by step and the run's counters (sqlite_counts)
SCHEMA += OUTBOX_SQLITE  # the notification outbox (outbox)

_AFTER_COLUMNS = """
DROP INDEX IF EXISTS requests_open;
CREATE INDEX IF NOT EXISTS requests_waiting ON requests (ord) WHERE state = 'open' AND closed = 0;
"""
"""Indexes over columns an older store gains (:data:`_ADDED_COLUMNS`), made after them.

``requests_waiting`` (version 8) holds the requests still open on runs not sealed: a seal
marks its run's unanswered requests ``closed`` in the same transaction, so the pending list
reads no entry a sealed run left behind (``requests_open``, which it replaces, held them all).
"""

_CLOSE_LEFTOVERS = (
    "UPDATE requests SET closed = 1 WHERE state = 'open' AND closed = 0"
    " AND run_id IN (SELECT run_id FROM runs WHERE status = 'sealed')"
)
"""Version 8's migration: requests that runs sealed before it left open are marked closed."""

SCHEMA_VERSION = 8
"""Bumped whenever ``SCHEMA`` changes; a store below it has the schema (re)applied."""


def _statements(script: str) -> list[str]:
    """The statements of a schema script (``sqlite3.complete_statement`` finds their ends)."""
    out: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            out.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        out.append(buffer.strip())
    return out


_ADDED_COLUMNS = (
    ("leases", "epoch", "INTEGER NOT NULL DEFAULT 0"),  # version 5: the lease's fencing epoch
    ("leases", "taken_from", "TEXT"),
    ("calls", "epoch", "INTEGER"),  # the epoch that claimed the call
    ("calls", "site", "TEXT"),  # where the claimed effect runs
    ("runs", "identity", "TEXT"),  # version 6: the run's package identity (null before it)
    # version 7: the notification outbox, a table of its own (created by SCHEMA)
    ("requests", "closed", "INTEGER NOT NULL DEFAULT 0"),  # version 8: left open by a seal
)


def build_schema(conn: sqlite3.Connection) -> None:
    """Create the schema (inside the caller's transaction), add the columns an older store
    lacks, and stamp its version."""
    for statement in _statements(SCHEMA):
        conn.execute(statement)
    for table, column, declared in _ADDED_COLUMNS:
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")
    for statement in _statements(_AFTER_COLUMNS):
        conn.execute(statement)
    conn.execute(_CLOSE_LEFTOVERS)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

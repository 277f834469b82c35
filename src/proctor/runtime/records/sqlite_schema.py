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
CREATE INDEX IF NOT EXISTS journal_open ON journal (bundle_id) WHERE state = 'open';
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
    WHERE status = 'sealed' AND outcome = 'completed'
    AND json_extract(data, '$.reuse_key') IS NOT NULL;
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL,
    epoch INTEGER NOT NULL DEFAULT 0,
    taken_from TEXT
) WITHOUT ROWID;
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

SCHEMA_VERSION = 9
"""Bumped whenever ``SCHEMA`` changes; a store below it has the schema (re)applied."""

_WITHOUT_ROWID = ("leases", "run_counts")
"""Version 9: the tables keyed by a run id alone are ``WITHOUT ROWID``, one b-tree each, where
a rowid table kept its rows in one and their key in a second (its ``sqlite_autoindex_*``): a
run's start wrote a page of each for both tables (two WAL frames fewer a run now). A store
from before is migrated by :func:`_rekey`: the rows copied whole, epochs included (a lease's
epoch must only grow, see :mod:`.fencing`).

Also version 9: ``runs_reuse`` holds only runs that have a reuse key (child runs): a sealed run
without one (every run a person or a host starts) writes no entry, one WAL frame fewer at its
seal. A store from before keeps the index it had, which holds an entry for every completed
run (the null keys too): as correct, only larger; making it again would read every run's
data while the store is locked (seconds for a million runs), so it is left as it is.

And ``journal_open`` (as PostgreSQL's): the bundles still open, which every run's start looks
for, read without a scan of every bundle ever journalled (a file-writing step's each).
"""


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
    for table in _WITHOUT_ROWID:
        _rekey(conn, table)
    conn.execute(_CLOSE_LEFTOVERS)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _rekey(conn: sqlite3.Connection, table: str) -> None:
    """Rebuild ``table`` as ``SCHEMA`` declares it (``WITHOUT ROWID``) when it is a rowid table
    (a store from before version 9), its rows copied (inside the caller's transaction).

    The triggers that name it (``run_counts``'s, on ``calls`` and ``steps``) are dropped first
    and made again after, as are the indexes of its own (none today): a rename checks every
    trigger, and theirs would name a table that is gone for a moment; a dropped table's own
    go with it."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    if row is None or "WITHOUT ROWID" in str(row[0]).upper():
        return
    create = f"CREATE TABLE IF NOT EXISTS {table} ("
    declared = next(s for s in _statements(SCHEMA) if s.startswith(create))
    kept = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND ((type = 'trigger'"
        " AND sql LIKE ?) OR (type = 'index' AND tbl_name = ?))",
        (f"%{table}%", table),
    ).fetchall()
    for kind, name, _ in kept:
        conn.execute(f"DROP {kind.upper()} {name}")
    conn.execute(declared.replace(create, f"CREATE TABLE {table}_v9 (", 1))
    columns = ", ".join(r[1] for r in conn.execute(f"PRAGMA table_info({table}_v9)"))
    # in key order (sorted, not read through the old key's index): the new b-tree is filled
    # from one end (both tables of a million runs: ~7 s, against ~40 s of inserts at random)
    conn.execute(
        f"INSERT INTO {table}_v9 ({columns})"
        f" SELECT {columns} FROM {table} NOT INDEXED ORDER BY run_id"
    )
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"ALTER TABLE {table}_v9 RENAME TO {table}")
    for _, _, sql in kept:
        conn.execute(sql)

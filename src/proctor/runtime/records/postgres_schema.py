"""The PostgreSQL run store's schema, as numbered migrations applied once under an advisory lock.

:data:`MIGRATIONS` lists every version in order; a database records the versions applied in
``proctor_schema``. :func:`migrate` takes a transaction-scoped advisory lock (so two workers
opening a new database at once apply each migration once), applies the missing versions in one
transaction and stamps them. A database whose newest version is above the newest this build
knows is refused ``store_schema_newer`` before anything is written: an older proctor must not
drive runs a newer one recorded.

The tables mirror the SQLite store's (``sqlite_schema``), with what many workers need besides:
``runs_status`` and ``requests_waiting`` keep the history and pending-requests listings flat at
100,000 runs; ``submissions`` is the queue of work any worker may take; ``workers`` holds each
live worker's heartbeat (what each holds is its rows in ``leases``).
"""

from __future__ import annotations

from typing import Any

from proctor.errors import StoreError

__all__ = ["LOCK_KEY", "MIGRATIONS", "SCHEMA_VERSION", "migrate"]

LOCK_KEY = 0x70726F63746F72  # "proctor": the advisory lock migrations are applied under

_V1 = """
CREATE TABLE runs (
    cursor BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    skill TEXT NOT NULL,
    method TEXT NOT NULL,
    status TEXT NOT NULL,
    outcome TEXT,
    receipt_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX runs_status ON runs (status, cursor);
CREATE INDEX runs_reuse ON runs (((data::jsonb) ->> 'reuse_key'), cursor)
    WHERE status = 'sealed' AND outcome = 'completed';
CREATE TABLE events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE FUNCTION proctor_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'events are append-only'; END; $$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION proctor_append_only();
CREATE TABLE calls (
    ord BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    step_id TEXT,
    tool TEXT NOT NULL,
    state TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    outcome TEXT,
    result TEXT,
    idempotency_key TEXT,
    UNIQUE (run_id, call_id)
);
CREATE INDEX calls_idem ON calls (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX calls_step ON calls (run_id, step_id, ord);
CREATE TABLE run_counts (
    run_id TEXT PRIMARY KEY,
    calls INTEGER NOT NULL DEFAULT 0,
    admitted INTEGER NOT NULL DEFAULT 0,
    steps INTEGER NOT NULL DEFAULT 0
);
CREATE FUNCTION proctor_count_call() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE run_counts SET calls = calls + 1,
            admitted = admitted + (NEW.outcome IS DISTINCT FROM 'refused')::int
            WHERE run_id = NEW.run_id;
    ELSE
        UPDATE run_counts SET admitted = admitted
            + (NEW.outcome IS DISTINCT FROM 'refused')::int
            - (OLD.outcome IS DISTINCT FROM 'refused')::int
            WHERE run_id = NEW.run_id;
    END IF;
    RETURN NULL;
END; $$;
CREATE TRIGGER calls_counted AFTER INSERT OR UPDATE OF outcome ON calls
    FOR EACH ROW EXECUTE FUNCTION proctor_count_call();
CREATE TABLE journal (
    bundle_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    state TEXT NOT NULL,
    entries TEXT NOT NULL
);
CREATE INDEX journal_open ON journal (bundle_id) WHERE state = 'open';
CREATE TABLE steps (
    ord BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (run_id, step_id)
);
CREATE FUNCTION proctor_count_step() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE run_counts SET steps = steps + 1 WHERE run_id = NEW.run_id;
    RETURN NULL;
END; $$;
CREATE TRIGGER steps_counted AFTER INSERT ON steps
    FOR EACH ROW EXECUTE FUNCTION proctor_count_step();
CREATE TABLE requests (
    ord BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    address TEXT NOT NULL,
    kind TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    decision TEXT,
    UNIQUE (run_id, address)
);
CREATE INDEX requests_open ON requests (ord) WHERE state = 'open';
CREATE TABLE leases (
    run_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX leases_holder ON leases (holder);
CREATE TABLE audit_anchor (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    lines INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE submissions (
    id BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    run_id TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued',
    due_at DOUBLE PRECISION NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    taken_by TEXT,
    note TEXT
);
CREATE INDEX submissions_queued ON submissions (due_at, id) WHERE state = 'queued';
CREATE TABLE workers (
    worker_id TEXT PRIMARY KEY,
    started_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL,
    concurrency INTEGER NOT NULL,
    state TEXT NOT NULL
);
"""

_V2 = """
ALTER TABLE leases ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN taken_from TEXT;
ALTER TABLE calls ADD COLUMN epoch BIGINT;
ALTER TABLE calls ADD COLUMN site TEXT;
"""
"""Version 2: the lease's fencing epoch, the holder it was taken from, and each claim's epoch
and site (see :mod:`.fencing`)."""

_V3 = """
ALTER TABLE runs ADD COLUMN identity TEXT;
"""
"""Version 3: each run's package identity (``core:``, ``registry:``, ``local:``); runs recorded
before it keep null."""

_V4 = """
CREATE TABLE notify_outbox (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    address TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    channel TEXT NOT NULL,
    stage TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    due_at DOUBLE PRECISION NOT NULL,
    created_at TEXT NOT NULL,
    note TEXT
);
CREATE INDEX notify_outbox_due ON notify_outbox (due_at) WHERE state = 'pending';
"""
"""Version 4: the notification outbox (see :mod:`.outbox`)."""

_V5 = """
ALTER TABLE requests ADD COLUMN IF NOT EXISTS closed BOOLEAN NOT NULL DEFAULT false;
UPDATE requests q SET closed = true FROM runs r
    WHERE r.run_id = q.run_id AND r.status = 'sealed' AND q.state = 'open';
DROP INDEX IF EXISTS requests_open;
CREATE INDEX IF NOT EXISTS requests_waiting ON requests (ord) WHERE state = 'open' AND NOT closed;
"""
"""Version 5: a seal marks the requests its run left unanswered ``closed`` (in the same
transaction), and the pending list reads ``requests_waiting``, the requests still open on runs
not sealed, so its cost does not grow with the sealed runs before the page; requests that runs
sealed before it left open are marked here."""

_V6 = """
CREATE INDEX IF NOT EXISTS submissions_held ON submissions (state, run_id)
    WHERE state IN ('queued', 'taken');
"""
"""Version 6: the submissions still queued or taken, by run. A take asks whether another
submission of the candidate's run is taken, a finish whether work of its run waits, and the
heartbeat whether a running run has work queued or taken: each read every submission ever
made (a scan per take, growing with the queue's history), now an index probe into the few
that are not done."""

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, _V1),
    (2, _V2),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, _V6),
)
"""Every schema version in order; a new one is appended, never edited once released."""

SCHEMA_VERSION = MIGRATIONS[-1][0]


def migrate(conn: Any, shown: str) -> None:
    """Apply the migrations ``conn``'s database lacks, in one transaction under the advisory lock.

    Raises:
        StoreError: ``store_schema_newer`` when the database was migrated by a newer proctor.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS proctor_schema"
            " (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM proctor_schema").fetchone()
        current = int(row[0])
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the run store {shown} has schema version {current}, newer than the newest this"
                f" proctor knows ({SCHEMA_VERSION}); nothing was written. Upgrade proctor to"
                " use it",
                code="store_schema_newer",
            )
        for version, script in MIGRATIONS:
            if version <= current:
                continue
            conn.execute(script)
            conn.execute("INSERT INTO proctor_schema (version) VALUES (%s)", (version,))

"""What only the PostgreSQL run store has: migrations, its URL, its indexes, its clock.

- many processes opening a new database at once apply each migration exactly once (the
  advisory lock), and a database a newer proctor migrated is refused ``store_schema_newer``
  with nothing written;
- whatever ``PROCTOR_DATABASE_URL`` holds, opening is a :class:`StoreError` naming the store
  as ``$PROCTOR_DATABASE_URL`` (never the URL, which may carry a password), never a traceback
  (fuzzed; every URL the fuzzer makes points at loopback);
- the history and pending-requests pages read an index, not the table.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.errors import StoreError
from proctor.runtime.records.postgres_schema import MIGRATIONS, SCHEMA_VERSION
from tests.pg import fresh_schema

_OPEN = """
import sys
from proctor.runtime.records.postgres import PostgresRunStore
PostgresRunStore(sys.argv[1]).list_runs()
"""


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as made:
        yield made


def test_processes_opening_a_new_database_at_once_migrate_it_once(url: str) -> None:
    import psycopg

    procs = [subprocess.Popen([sys.executable, "-c", _OPEN, url]) for _ in range(4)]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    with psycopg.connect(url, autocommit=True) as conn:
        versions = conn.execute("SELECT version FROM proctor_schema").fetchall()
    assert sorted(versions) == [(version,) for version, _ in MIGRATIONS]  # each once


def test_a_newer_schema_is_refused_and_nothing_is_written(url: str) -> None:
    import psycopg

    from proctor.runtime.records.postgres import PostgresRunStore, close_pools

    PostgresRunStore(url)
    close_pools()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO proctor_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
        before = conn.execute("SELECT COUNT(*) FROM proctor_schema").fetchone()
    with pytest.raises(StoreError) as refused:
        PostgresRunStore(url)
    assert refused.value.code == "store_schema_newer"
    assert "$PROCTOR_DATABASE_URL" in refused.value.message
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM proctor_schema").fetchone() == before


def test_the_listing_pages_read_an_index(url: str) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    store = PostgresRunStore(url)
    with store.connection() as conn:
        conn.execute("SET enable_seqscan = off")
        try:
            for sql in (
                "SELECT * FROM runs WHERE cursor < 10 ORDER BY cursor DESC LIMIT 20",
                "SELECT * FROM requests WHERE state = 'open' AND NOT closed AND ord > 5"
                " ORDER BY ord LIMIT 50",
            ):
                plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + sql).fetchall())
                assert "Index" in plan and "Seq Scan" not in plan, plan
                if "requests" in sql:
                    assert "requests_waiting" in plan, plan
        finally:
            conn.execute("RESET enable_seqscan")


_SAFE = st.text(st.characters(codec="utf-8", exclude_characters="?&=#/@:%\x00"), max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scheme=st.sampled_from(["postgresql://", "postgres://", "mysql://", "", "postgresql:"]),
    user=_SAFE,
    # never empty: that is the default port, where this machine's real server accepts anyone
    port=st.sampled_from(["1", "9", "65535", "0", "99999", "x"]),
    database=_SAFE,
    extra=st.sampled_from(["", "?sslmode=nonsense", "?bogus", "?connect_timeout=x"]),
)
def test_any_database_url_is_a_store_error_never_a_traceback(
    scheme: str, user: str, port: str, database: str, extra: str
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    password = "Sekr3tPassw0rd"
    url = f"{scheme}{user}:{password}@127.0.0.1:{port}/{database}{extra}"
    with pytest.raises(StoreError) as refused:
        PostgresRunStore(url)
    assert refused.value.code == "store_unreachable"
    assert password not in refused.value.message
    assert "127.0.0.1" not in refused.value.message or "$PROCTOR_DATABASE_URL" in (
        refused.value.message
    )


def test_a_bundle_a_live_driver_on_another_machine_applies_is_not_pending(url: str) -> None:
    import socket

    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.runs import JournalRecord

    store = PostgresRunStore(url)
    for run_id in ("elsewhere", "here", "expired"):
        store.journal_open(JournalRecord(f"b-{run_id}", run_id, "open", []))
    assert store.acquire_lease("elsewhere", "other-machine|1|0.00|aa", 60) is None
    assert store.acquire_lease("here", f"{socket.gethostname()}|1|0.00|bb", 60) is None
    assert store.acquire_lease("expired", "other-machine|2|0.00|cc", -1) is None
    pending = sorted(r.bundle_id for r in store.journal_pending())
    assert pending == ["b-expired", "b-here"]  # this machine's owners are checked by pid


def test_a_database_migrated_before_package_identities_gains_the_column(url: str) -> None:
    import psycopg

    from proctor.runtime.records.postgres import PostgresRunStore, close_pools
    from proctor.runtime.records.runs import RunRecord

    store = PostgresRunStore(url)
    store.create_run(RunRecord(run_id="old", skill="s", method="m"))
    close_pools()
    with psycopg.connect(url, autocommit=True) as conn:  # as migration 2 left it
        conn.execute("ALTER TABLE runs DROP COLUMN identity")
        conn.execute("DROP TABLE notify_outbox")  # migration 4, after it
        conn.execute("DELETE FROM proctor_schema WHERE version >= 3")
    again = PostgresRunStore(url)
    again.create_run(RunRecord(run_id="new", skill="s", method="m", identity="registry:acme/s"))
    assert {r.run_id: r.identity for r in again.list_runs(limit=5)} == {
        "old": None,
        "new": "registry:acme/s",
    }
    assert again.get_run("new").identity == "registry:acme/s"  # type: ignore[union-attr]
    close_pools()


def test_a_database_at_migration_4_marks_what_sealed_runs_left_open(url: str) -> None:
    import psycopg

    from proctor.runtime.records.postgres import PostgresRunStore, close_pools
    from proctor.runtime.records.runs import RequestRecord, RunRecord

    store = PostgresRunStore(url)
    for run_id, status in (("sealed", "sealed"), ("paused", "needs_approval")):
        store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
        body = {"kind": "approval", "address": "put"}
        store.put_request(RequestRecord(run_id, "put", "approval", f"sha256:{run_id}", body))
        store.update_run(run_id, status=status)
    close_pools()
    with psycopg.connect(url, autocommit=True) as conn:  # as migration 4 left it
        conn.execute("DROP INDEX requests_waiting")
        conn.execute("ALTER TABLE requests DROP COLUMN closed")
        conn.execute("CREATE INDEX requests_open ON requests (ord) WHERE state = 'open'")
        conn.execute("DELETE FROM proctor_schema WHERE version >= 5")
    again = PostgresRunStore(url)
    assert [(p.run.run_id, p.request.address) for p in again.pending_requests()] == [
        ("paused", "put")
    ]
    again.update_run("paused", status="sealed")
    assert again.pending_requests() == []
    assert [r.state for r in again.requests("paused")] == ["open"]  # the record is unchanged
    close_pools()
    with psycopg.connect(url, autocommit=True) as conn:
        marked = conn.execute("SELECT run_id FROM requests WHERE closed ORDER BY run_id")
        assert marked.fetchall() == [("paused",), ("sealed",)]
        gone = conn.execute("SELECT to_regclass('requests_open')").fetchone()
        assert gone == (None,)


def test_a_release_skips_the_flush_only_for_itself(url: str) -> None:
    """A lease release alone commits without waiting for the WAL flush; the setting never
    outlives its statement, and inside a caller's transaction the release leaves the
    transaction's flush alone (its other writes may be claims or decisions)."""
    from proctor.runtime.records.postgres import PostgresRunStore

    store = PostgresRunStore(url)
    assert store.acquire_lease("r1", "me|1|0.00|aa", 60) is None
    store.release_lease("r1", "me|1|0.00|aa")
    assert store.lease("r1").holder == ""  # type: ignore[union-attr]
    assert store.acquire_lease("r1", "you|2|0.00|bb", 60) is None  # free at once
    with store.connection() as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
    assert store.acquire_lease("r2", "me|1|0.00|aa", 60) is None
    with store.transaction():
        store.release_lease("r2", "me|1|0.00|aa")
        assert store._rows("SHOW synchronous_commit") == [("on",)]
    assert store.lease("r2").holder == ""  # type: ignore[union-attr]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements psycopg sends from here on (the driver's own entry point counted)."""
    import psycopg

    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(self: psycopg.Cursor, query: str, *args: object, **kwargs: object) -> object:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    return sent


def test_a_start_creates_the_run_and_makes_its_lease_in_two_statements(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run created and its lease taken in one transaction (a start): the run with its counts
    row is one statement, the lease row made at once another (the run is new, so is its lease:
    no read of a row first); a lease row left from before is still read and taken over."""
    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.runs import RunRecord

    store = PostgresRunStore(url)
    sent = _counting(monkeypatch)
    with store.transaction():
        store.create_run(RunRecord(run_id="r1", skill="k", method="main"))
        assert store.acquire_lease("r1", "A", 60) is None
    assert len(sent) == 2
    assert (lease := store.lease("r1")) is not None and (lease.holder, lease.epoch) == ("A", 1)
    assert store.run_counts("r1").calls == 0
    with pytest.raises(StoreError, match="already exists"):
        store.create_run(RunRecord(run_id="r1", skill="k", method="main"))
    # a lease row of the run id left from before: read and taken, its epoch moved on
    store._rows("INSERT INTO leases (run_id, holder, expires_at, epoch) VALUES ('r2', '', 0, 4)")
    with store.transaction():
        store.create_run(RunRecord(run_id="r2", skill="k", method="main"))
        assert store.acquire_lease("r2", "A", 60) is None
    assert (lease := store.lease("r2")) is not None and (lease.holder, lease.epoch) == ("A", 5)


def test_a_fenced_write_is_one_statement_text_whatever_its_epoch_and_is_prepared(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fence's epoch is a parameter: a run's writes under epoch 1 and under epoch 2 send
    the same text, which the connection has prepared by its second use (a worker's backends
    plan it once, not at every write)."""
    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.runs import RunRecord

    store = PostgresRunStore(url)
    store.create_run(RunRecord(run_id="r", skill="k", method="main"))
    assert store.acquire_lease("r", "A", 60) is None
    sent = _counting(monkeypatch)
    store.append_event("r", "one", {})
    store.release_lease("r", "A")
    assert store.acquire_lease("r", "A", 60) is None  # epoch 2 now
    store.append_event("r", "two", {})
    events = [s for s in sent if "INSERT INTO events" in s]
    assert len(events) == 2 and events[0] == events[1]
    with store.connection() as conn:  # the pool's one connection (min_size 1, one thread)
        prepared = conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s"
            " AND statement LIKE %s",
            ("%INSERT INTO events%", "%FROM fence WHERE mine%"),
        ).fetchone()
    assert prepared == (1,)


def test_a_database_at_migration_5_gains_the_index_of_submissions_not_done(url: str) -> None:
    """Migration 6 indexes the submissions queued or taken by run: a take's question whether
    another submission of its run is taken, a finish's whether work of its run waits, and the
    heartbeat's whether a running run has work reads it, not every submission ever made. A
    database at migration 5, with work queued, gains it and its queue goes on as it was."""
    import psycopg

    from proctor.runtime.fleet.queue import Finished, WorkQueue
    from proctor.runtime.records.postgres import PostgresRunStore, close_pools

    body = {"ref": "appender", "cwd": ".", "cli_inputs": ["line=x"]}
    queue = WorkQueue(PostgresRunStore(url))
    first = queue.submit("start", "a" * 32, body)
    queue.submit("resume", "a" * 32, {"document": {}})  # held back behind the first
    close_pools()
    with psycopg.connect(url, autocommit=True) as conn:  # as migration 5 left it
        conn.execute("DROP INDEX submissions_held")
        conn.execute("DELETE FROM proctor_schema WHERE version >= 6")
    store = PostgresRunStore(url)
    queue = WorkQueue(store)
    work, _ = queue.take_next("w")
    assert work is not None and work.id == first
    assert queue.take_next("w") == (None, None)  # the resume waits behind the taken start
    work, _ = queue.take_next("w", finished=Finished(first, "done"))
    assert work is not None and work.kind == "resume"
    with store.connection() as conn:
        conn.execute("SET enable_seqscan = off")
        try:
            for sql in (
                "SELECT 1 FROM submissions WHERE run_id = 'x' AND state = 'taken'",
                "SELECT 1 FROM submissions WHERE run_id = 'x' AND state IN ('queued', 'taken')",
            ):
                plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + sql).fetchall())
                assert "submissions_held" in plan, plan
        finally:
            conn.execute("RESET enable_seqscan")
        versions = conn.execute("SELECT max(version) FROM proctor_schema").fetchone()
    assert versions == (SCHEMA_VERSION,) == (6,)


_PLAN = """
import sys
from proctor.runtime.records.postgres import PostgresRunStore
from proctor.runtime.records.postgres_pool import plan_once
if sys.argv[2] == "worker":
    plan_once()
print(PostgresRunStore(sys.argv[1])._rows("SHOW plan_cache_mode")[0][0])
"""


def test_a_workers_connections_plan_each_statement_once_and_no_other_process_does(
    url: str,
) -> None:
    """A worker (``plan_once`` before its store opens) plans a prepared statement once per
    connection, whatever its values; any other process's connections keep PostgreSQL's
    choice, so a listing page is still planned for its limit and cursor."""
    modes = {
        role: subprocess.run(
            [sys.executable, "-c", _PLAN, url, role],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
        for role in ("worker", "command")
    }
    assert modes == {"worker": "force_generic_plan", "command": "auto"}


def test_a_take_of_a_lease_row_is_one_statement_whatever_it_finds(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume's take reads the lease row, decides and writes in one statement (its own
    flushed commit): taken after a release (the next epoch), renewed by its holder (the same
    epoch), or answered held by another (nothing written)."""
    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.runs import RunRecord

    store, other = PostgresRunStore(url), PostgresRunStore(url)
    with store.transaction():
        store.create_run(RunRecord(run_id="r", skill="k", method="main"))
        assert store.acquire_lease("r", "A", 60) is None
    store.release_lease("r", "A")
    sent = _counting(monkeypatch)
    assert store.acquire_lease("r", "A", 60) is None  # released: taken, the next epoch
    assert len(sent) == 1
    assert (lease := store.lease("r")) is not None and (lease.holder, lease.epoch) == ("A", 2)
    assert store.taken_lease("r") == lease
    sent.clear()
    assert store.acquire_lease("r", "A", 60) is None  # its holder's: renewed, same epoch
    assert other.acquire_lease("r", "B", 60) == "A"  # held: nothing written
    assert len(sent) == 2
    assert (lease := store.lease("r")) is not None and (lease.holder, lease.epoch) == ("A", 2)
    assert other.acquire_lease("r", "B", 60, steal_from="A") is None  # stolen: next epoch
    assert (lease := other.lease("r")) is not None
    assert (lease.holder, lease.epoch, lease.taken_from) == ("B", 3, "A")


def test_a_run_update_onto_data_the_store_saw_is_one_statement_and_loses_no_other_write(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver's update of its run's data (a pause's, a seal's) merges onto the data its
    store last read or wrote, in one statement written only while the row still holds that
    data: a write another store made meanwhile is read and merged onto, never lost; a seal
    still closes what the run left unanswered; a stale epoch still writes nothing."""
    from proctor.errors import LeaseLost
    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.runs import RequestRecord, RunRecord

    store, other = PostgresRunStore(url), PostgresRunStore(url)
    with store.transaction():
        store.create_run(RunRecord(run_id="r", skill="k", method="main", data={"a": 1}))
        assert store.acquire_lease("r", "A", 60) is None
    store.put_request(RequestRecord("r", "steps.ok", "approval", "sha256:x", {}))
    sent = _counting(monkeypatch)
    store.update_run("r", status="needs_approval", data={"b": 2})  # onto what it created
    assert len(sent) == 1
    other.update_run("r", data={"c": 3})  # another writer, meanwhile
    sent.clear()
    store.update_run("r", status="sealed", outcome="completed", data={"d": 4})
    # its data was not the row's: written nothing, then read (locked) and merged again
    assert len(sent) == 3
    run = other.get_run("r")
    assert run is not None and run.data == {"a": 1, "b": 2, "c": 3, "d": 4}
    assert (run.status, run.outcome) == ("sealed", "completed")
    assert other._rows("SELECT closed FROM requests WHERE run_id = 'r'") == [(True,)]
    assert other.acquire_lease("r", "B", 60, steal_from="A") is None  # taken over
    with pytest.raises(LeaseLost):
        store.update_run("r", data={"e": 5})
    run = other.get_run("r")
    assert run is not None and "e" not in run.data


def test_a_transactions_begin_goes_with_its_first_statement_and_a_lost_one_begins_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction sends ``BEGIN`` with its first statement (one round trip for both) and
    ``COMMIT`` as it ends; a transaction whose pooled connection the server ended while it
    sat idle begins again on a new connection at its first statement, and commits."""
    import psycopg

    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.runs import RunRecord

    store = PostgresRunStore(url)
    store.create_run(RunRecord(run_id="r", skill="k", method="main"))
    alone: list[bytes] = []  # commands sent outside a pipeline: a round trip each
    syncs: list[int] = []
    command, sync = psycopg.Connection._exec_command, psycopg.Pipeline.sync

    def counted(self: psycopg.Connection, cmd: bytes, *args: object) -> object:
        if self._pipeline is None:
            alone.append(cmd)
        return command(self, cmd, *args)  # type: ignore[arg-type]

    def synced(self: psycopg.Pipeline) -> None:
        syncs.append(1)
        sync(self)

    monkeypatch.setattr(psycopg.Connection, "_exec_command", counted)
    monkeypatch.setattr(psycopg.Pipeline, "sync", synced)
    with store.transaction():
        store.append_event("r", "one", {})
        store.append_event("r", "two", {})
    assert alone == [] and len(syncs) == 2  # BEGIN with the first, COMMIT as it ended
    with store.connection() as conn:  # the pool's one connection, idle: the server ends it
        pid = conn.info.backend_pid
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        while other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            pass
    with store.transaction():
        store.append_event("r", "three", {})
    assert [e["kind"] for e in store.events("r")] == ["one", "two", "three"]


def test_a_request_asked_afresh_or_again_as_recorded_is_one_statement(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request asked for the first time is its row and its fence in one statement; asked
    again with the same content, the same statement answers the row as recorded (its
    decision kept); asked again with other content, the row is read and asked anew."""
    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.runs import RequestRecord, RunRecord

    store = PostgresRunStore(url)
    with store.transaction():
        store.create_run(RunRecord(run_id="r", skill="k", method="main"))
        assert store.acquire_lease("r", "A", 60) is None
    sent = _counting(monkeypatch)
    made = store.put_request(RequestRecord("r", "steps.ok", "approval", "sha256:x", {"n": 1}))
    assert len(sent) == 1 and made.cursor > 0 and made.state == "open"
    store.record_decisions("r", {"steps.ok": {"approved": True}})
    sent.clear()
    again = store.put_request(RequestRecord("r", "steps.ok", "approval", "sha256:x", {"n": 1}))
    assert len(sent) == 1
    assert (again.cursor, again.state, again.decision) == (
        made.cursor,
        "decided",
        {"approved": True},
    )
    other = store.put_request(RequestRecord("r", "steps.ok", "approval", "sha256:y", {"n": 2}))
    assert (other.cursor, other.state, other.decision) == (made.cursor, "open", None)
    row = store.request("r", "steps.ok")
    assert row is not None and (row.request_digest, row.body, row.decision) == (
        "sha256:y",
        {"n": 2},
        None,
    )

"""Which PostgreSQL commits wait for the WAL flush (``runtime.records.postgres_writes``).

A trigger on every table a driver writes notes, for each row written, the transaction's
``synchronous_commit`` as PostgreSQL sees it when the row is written: ``on`` (the commit waits
until the log is on disk) or ``off``. A driver's writes through a run's life show it: a claim,
decisions, a step that settled an effect or used a decision, a journal entry, a lease taken, a
new run, a pause and a seal wait for the flush; a call's process tree, settling a claim, a call
with no effect, a step that changed nothing, an event, a run set running, a new request and a
lease renewed or released do not, and only when alone (inside a transaction, never). The
setting never outlives its statement on the pooled connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from proctor.runtime.records.runs import CallRecord, JournalRecord, RequestRecord, RunRecord
from tests.pg import fresh_schema

if TYPE_CHECKING:
    from proctor.runtime.records.postgres import PostgresRunStore

HOLDER = "me|1|0.00|aa"
_TABLES = ("runs", "calls", "steps", "events", "requests", "leases", "journal", "submissions")


@pytest.fixture(name="s")
def store() -> Iterator[PostgresRunStore]:
    from proctor.runtime.records.postgres import PostgresRunStore

    with fresh_schema() as url:
        made = PostgresRunStore(url)
        made._rows(
            "CREATE TABLE flushes (n serial, tbl text, op text, mode text);"
            " CREATE FUNCTION note_flush() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO flushes (tbl, op, mode) VALUES"
            " (TG_TABLE_NAME, TG_OP, current_setting('synchronous_commit')); RETURN NULL; END $$"
        )
        for table in _TABLES:
            made._rows(
                f"CREATE TRIGGER note_{table} AFTER INSERT OR UPDATE ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION note_flush()"
            )
        yield made


def _noted(store: PostgresRunStore) -> list[tuple[str, str, str]]:
    rows = store._rows("DELETE FROM flushes RETURNING n, tbl, op, mode")
    return [(t, o, m) for _, t, o, m in sorted(rows)]


def _call(call_id: str, state: str = "claimed") -> CallRecord:
    return CallRecord("r", call_id, "s", "command.execute", state, "sha256:0")


def test_a_runs_writes_wait_for_the_flush_where_the_crash_rules_need_it(
    s: PostgresRunStore,
) -> None:
    s.create_run(RunRecord(run_id="r", skill="k", method="m"))
    assert s.acquire_lease("r", HOLDER, 60) is None
    assert {m for _, _, m in _noted(s)} == {"on"}  # a new run and its lease: flushed
    s.append_event("r", "started", {})
    request = RequestRecord("r", "steps.ask", "approval", "sha256:1", {"kind": "approval"})
    s.put_request(request)
    assert _noted(s) == [("events", "INSERT", "off"), ("requests", "INSERT", "off")]
    with s.transaction():  # a pause: the run's record and its event, one flushed commit
        s.update_run("r", status="needs_approval", data={"envelope": {}})
        s.append_event("r", "paused", {})
    assert _noted(s) == [("runs", "UPDATE", "on"), ("events", "INSERT", "on")]
    s.record_decisions("r", {"steps.ask": {"approved": True}})
    assert _noted(s) == [("requests", "UPDATE", "on")]  # a decision: before the run goes on
    s.update_run("r", status="running")
    assert _noted(s) == [("runs", "UPDATE", "off")]
    s.settle_step("r", "ask", {"status": "completed"}, used=["steps.ask"])
    assert _noted(s) == [("steps", "INSERT", "on"), ("requests", "UPDATE", "on")]
    s.journal_open(JournalRecord("b1", "r", "open", []))
    s.claim_call(_call("s/1"))
    s.note_call_site("r", "s/1", {"pid": 1.0})
    assert _noted(s) == [
        ("journal", "INSERT", "on"),  # before a file is touched
        ("calls", "INSERT", "on"),  # a claim: before its effect
        ("calls", "UPDATE", "off"),  # the tree a taker ends (else every descendant)
    ]
    s.settle_call("r", "s/1", "completed", {"ok": True})
    s.settle_step("r", "s", {"status": "completed"})  # it settled an effect's claim
    assert _noted(s) == [("calls", "UPDATE", "off"), ("steps", "INSERT", "on")]
    s.record_call(CallRecord("r", "t/1", "t", "echo", "settled", "sha256:2", "completed", 1))
    s.settle_step("r", "t", {"status": "completed"})  # it changed nothing
    assert s.renew_lease("r", HOLDER, 60)
    assert _noted(s) == [
        ("calls", "INSERT", "off"),
        ("steps", "INSERT", "off"),
        ("leases", "UPDATE", "off"),
    ]
    with s.transaction():  # inside a transaction a quick write is flushed with it
        s.append_event("r", "sealing", {})
        s.update_run("r", status="sealed", outcome="completed", data={"envelope": {}})
    assert {m for _, _, m in _noted(s)} == {"on"}
    s.release_lease("r", HOLDER)
    assert _noted(s) == [("leases", "UPDATE", "off")]
    with s.connection() as conn:  # the setting went with its statement
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"


def test_a_reconciled_claim_and_a_taken_lease_wait_for_the_flush(s: PostgresRunStore) -> None:
    s.create_run(RunRecord(run_id="r", skill="k", method="m"))
    assert s.acquire_lease("r", HOLDER, 60) is None
    s.claim_call(_call("s/1"))
    s.release_lease("r", HOLDER)
    _noted(s)
    assert s.acquire_lease("r", "you|2|0.00|bb", 60) is None  # a new epoch: must only grow
    s.settle_call("r", "s/1", "failed", None, reconciled=True)
    s.update_run("r", status="stopped")
    assert _noted(s) == [
        ("leases", "UPDATE", "on"),
        ("calls", "UPDATE", "on"),
        ("runs", "UPDATE", "on"),
    ]


def test_the_queues_finish_and_next_take_are_one_flushed_commit(s: PostgresRunStore) -> None:
    from proctor.runtime.fleet.queue import Finished, WorkQueue

    queue = WorkQueue(s)
    queue.submit("start", "r1", {"ref": "echo", "cwd": "."})
    queue.submit("start", "r2", {"ref": "echo", "cwd": "."})
    first = queue.take("w")
    assert first is not None
    _noted(s)
    work, _ = queue.take_next("w", finished=Finished(first.id, "done"))
    assert work is not None
    assert _noted(s) == [("submissions", "UPDATE", "on")] * 2

"""Fencing, on both run stores: once another holder took a run's lease, every write of the
driver that held it before is refused ``lease_lost`` and leaves nothing behind.

Two store objects on one database are two drivers' views of it (each store remembers the epoch
its own process took): ``a`` takes the lease for a moment (it lapses at once), ``b`` takes it
over, and then each write ``a`` could make is tried and checked against what the store holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import LeaseLost, StoreError
from proctor.runtime.records.runs import (
    CallRecord,
    JournalRecord,
    RequestRecord,
    RunRecord,
    RunStore,
)
from tests.pg import fresh_schema

RUN = "r" * 32


@pytest.fixture(params=["sqlite", "postgres"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunStore, RunStore]]:
    if request.param == "sqlite":
        from proctor.runtime.records.sqlite import SQLiteRunStore

        a, b = SQLiteRunStore(tmp_path / "runs.sqlite"), SQLiteRunStore(tmp_path / "runs.sqlite")
        yield a, b
        a.close()
        b.close()
        return
    from proctor.runtime.records.postgres import PostgresRunStore

    with fresh_schema() as url:
        yield PostgresRunStore(url), PostgresRunStore(url)


def _claim(call_id: str) -> CallRecord:
    return CallRecord(
        run_id=RUN,
        call_id=call_id,
        step_id="s",
        tool="command.execute",
        state="claimed",
        args_digest="sha256:" + "0" * 64,
    )


def _held_then_taken(a: RunStore, b: RunStore) -> None:
    a.create_run(RunRecord(run_id=RUN, skill="k", method="main"))
    assert a.acquire_lease(RUN, "A", -1) is None  # held, and lapsed at once
    a.claim_call(_claim("c1"))
    assert b.acquire_lease(RUN, "B", 60) is None  # the lapsed lease is taken over
    lease = b.lease(RUN)
    assert lease is not None and lease.holder == "B" and lease.epoch == 2
    assert lease.taken_from == "A"


def test_every_write_of_a_driver_that_lost_its_lease_is_refused(
    pair: tuple[RunStore, RunStore],
) -> None:
    a, b = pair
    _held_then_taken(a, b)
    request = RequestRecord(RUN, "s/retry", "retry", "sha256:" + "1" * 64, {"kind": "retry"})
    writes: list[Callable[[], Any]] = [
        lambda: a.claim_call(_claim("c2")),
        lambda: a.settle_call(RUN, "c1", "completed", {"status": "completed"}),
        lambda: a.settle_step(RUN, "s", {"outcome": "completed"}),
        lambda: a.update_run(RUN, status="sealed", outcome="completed", receipt_id="x"),
        lambda: a.append_event(RUN, "sealed", {}),
        lambda: a.put_request(request),
        lambda: a.record_decisions(RUN, {"s/retry": {"retry": True}}),
        lambda: a.journal_open(JournalRecord("bundle", RUN, "open", [])),
        lambda: a.note_call_site(RUN, "c1", {"pid": 1}),
    ]
    for write in writes:
        with pytest.raises(LeaseLost) as refused:
            write()
        assert refused.value.code == "lease_lost"
        assert "another driver took the run over" in refused.value.message
    assert not a.renew_lease(RUN, "A", 60)
    # a call that changed nothing, recorded by the stale driver, never reaches the store
    read = CallRecord(RUN, "c3", "s", "echo", "settled", "sha256:" + "2" * 64, outcome="completed")
    try:
        a.record_call(read)  # SQLite keeps it for the next commit; PostgreSQL writes it now
        getattr(a, "flush", lambda: None)()
    except LeaseLost:
        pass
    run = b.get_run(RUN)
    assert run is not None and run.status == "running" and run.receipt_id is None
    assert [c.call_id for c in b.calls(RUN)] == ["c1"]
    claim = b.get_call(RUN, "c1")
    assert claim is not None and claim.state == "claimed" and claim.site is not None
    assert b.step_records(RUN) == {} and b.requests(RUN) == [] and b.events(RUN) == []
    assert b.journal_pending() == []
    # the lease's holder writes on, and settles the earlier holder's claim only as reconciled
    with pytest.raises(StoreError) as mine:
        b.settle_call(RUN, "c1", "completed", {"status": "completed"})
    assert mine.value.code == "call_not_claimed"
    b.settle_call(RUN, "c1", "unknown", {"status": "unknown"}, reconciled=True)
    with pytest.raises(StoreError):  # settled once: never again
        b.settle_call(RUN, "c1", "completed", {"status": "completed"}, reconciled=True)
    b.append_event(RUN, "goes_on", {})
    assert b.renew_lease(RUN, "B", 60)


def test_the_epoch_only_grows_and_a_renewal_keeps_it(pair: tuple[RunStore, RunStore]) -> None:
    a, b = pair
    a.create_run(RunRecord(run_id=RUN, skill="k", method="main"))
    assert a.acquire_lease(RUN, "A", 60) is None
    assert a.renew_lease(RUN, "A", 60) and a.acquire_lease(RUN, "A", 60) is None
    assert (lease := a.lease(RUN)) is not None and lease.epoch == 1
    a.release_lease(RUN, "A")
    assert (lease := a.lease(RUN)) is not None and lease.holder == "" and lease.epoch == 1
    assert b.acquire_lease(RUN, "B", 60) is None  # after a release: the next epoch
    assert (lease := b.lease(RUN)) is not None and lease.epoch == 2 and lease.taken_from is None
    # a holder that was taken over stays fenced off, and the lease moves on from its epoch
    assert b.acquire_lease(RUN, "B", -1) is None  # renewed, lapsing at once
    assert a.acquire_lease(RUN, "A", 60) is None
    assert (lease := a.lease(RUN)) is not None and lease.epoch == 3 and lease.taken_from == "B"
    with pytest.raises(LeaseLost):
        b.append_event(RUN, "stale", {})


def test_the_lease_a_take_left_is_the_row_without_reading_it(
    pair: tuple[RunStore, RunStore],
) -> None:
    """A driver learns whom it took a run over from by ``taken_lease`` (PostgreSQL answers from
    what its take wrote, sparing a round trip): after every kind of take it is the row's."""
    a, b = pair

    def same(store: RunStore, holder: str, epoch: int, taken_from: str | None) -> None:
        taken, row = store.taken_lease(RUN), store.lease(RUN)
        assert taken is not None and row is not None
        assert (taken.holder, taken.epoch, taken.taken_from) == (holder, epoch, taken_from)
        assert (row.holder, row.epoch, row.taken_from) == (holder, epoch, taken_from)

    a.create_run(RunRecord(run_id=RUN, skill="k", method="main"))
    assert a.acquire_lease(RUN, "A", -1) is None  # the first take: nobody's before
    same(a, "A", 1, None)
    assert b.acquire_lease(RUN, "B", 60) is None  # a lapsed lease taken over
    same(b, "B", 2, "A")
    assert b.acquire_lease(RUN, "B", -1) is None  # taken again by its holder: kept as it was
    same(b, "B", 2, "A")
    b.release_lease(RUN, "B")
    assert a.acquire_lease(RUN, "A", 60) is None  # after a release: nobody's before
    same(a, "A", 3, None)
    # what a take remembers goes with the release, alone or inside a transaction: a worker
    # that drives a million runs keeps no lease of any
    a.release_lease(RUN, "A")
    for n in range(20):
        run = f"{n:032x}"
        a.create_run(RunRecord(run_id=run, skill="k", method="main"))
        assert a.acquire_lease(run, "A", 60) is None
        if n % 2:
            a.release_lease(run, "A")
        else:
            with a.transaction():
                a.release_lease(run, "A")
    assert not getattr(a, "_taken", {}) and not getattr(a, "_fences", {})


def test_sqlite_answers_the_lease_a_take_left_without_a_statement(tmp_path: Path) -> None:
    """SQLite, as PostgreSQL: ``taken_lease`` is what the take wrote (every turn call of an MCP
    session asks it right after its take), no read of the row."""
    from proctor.runtime.records.sqlite import SQLiteRunStore

    a = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        a.create_run(RunRecord(run_id=RUN, skill="k", method="main"))
        assert a.acquire_lease(RUN, "A", 60) is None
        a.release_lease(RUN, "A")
        assert a.acquire_lease(RUN, "A", 60) is None
        statements: list[str] = []
        a._conn.set_trace_callback(statements.append)
        taken = a.taken_lease(RUN)
        a._conn.set_trace_callback(None)
        assert statements == []
        assert taken is not None and (taken.holder, taken.epoch, taken.taken_from) == ("A", 2, None)
    finally:
        a.close()


def test_a_transaction_reads_the_lease_once_and_the_next_one_again(tmp_path: Path) -> None:
    """SQLite: the writes of one transaction share one read of the lease row (its lock holds
    the row until the commit); a lease taken over between two transactions refuses the next."""
    from proctor.runtime.records.sqlite import SQLiteRunStore

    a, b = SQLiteRunStore(tmp_path / "runs.sqlite"), SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        a.create_run(RunRecord(run_id=RUN, skill="k", method="main"))
        assert a.acquire_lease(RUN, "A", -1) is None  # held, and lapsed at once
        read: list[str] = []
        a._conn.set_trace_callback(read.append)  # type: ignore[attr-defined]
        with a.transaction():
            a.update_run(RUN, data={"x": 1})
            assert a.append_event(RUN, "one", {}) == 1
            assert a.append_event(RUN, "two", {}) == 2
        # (the update reads it within its own read of the run)
        assert len([q for q in read if "SELECT epoch FROM leases" in q]) == 1
        assert b.acquire_lease(RUN, "B", 60) is None  # taken over between two transactions
        with pytest.raises(LeaseLost):
            a.append_event(RUN, "three", {})
        with pytest.raises(LeaseLost), a.transaction():
            a.update_run(RUN, data={"y": 2})
        assert [e["kind"] for e in b.events(RUN)] == ["one", "two"]
        assert "y" not in b.get_run(RUN).data  # type: ignore[union-attr]
    finally:
        a.close()
        b.close()


def test_a_transaction_numbers_the_events_of_a_run_it_created_without_reading_them(
    tmp_path: Path,
) -> None:
    """SQLite: a run created in a transaction has no event, and the lease it takes there is
    the one it wrote: its events are numbered on, and fenced, without a read; the next
    transaction reads both again (another store appended meanwhile, then took the lease)."""
    from proctor.runtime.records.sqlite import SQLiteRunStore

    a, b = SQLiteRunStore(tmp_path / "runs.sqlite"), SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        read: list[str] = []
        a._conn.set_trace_callback(read.append)  # type: ignore[attr-defined]
        with a.transaction():
            a.create_run(RunRecord(run_id=RUN, skill="k", method="main"))
            assert a.acquire_lease(RUN, "A", 60) is None
            assert a.append_event(RUN, "one", {}) == 1
            assert a.append_event(RUN, "two", {}) == 2
        assert not [q for q in read if q.startswith(("SELECT epoch", "SELECT MAX(seq)"))]
        assert b.append_event(RUN, "other", {}) == 3  # no lease of its own: not fenced
        assert a.append_event(RUN, "three", {}) == 4
        assert b.acquire_lease(RUN, "B", 60, steal_from="A") is None
        with pytest.raises(LeaseLost):
            a.append_event(RUN, "four", {})
        assert [e["seq"] for e in b.events(RUN)] == [1, 2, 3, 4]
    finally:
        a.close()
        b.close()

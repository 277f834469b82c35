"""Fencing on PostgreSQL when the takeover and the write meet: a driver's write is one statement
that reads the lease row ``FOR SHARE`` first, so a write that starts while a takeover holds the
lease row waits for it; when the takeover commits, the write is refused ``lease_lost`` and
leaves nothing behind; when it rolls back, the write goes through under the old epoch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from proctor.errors import LeaseLost
from proctor.runtime.records.runs import RequestRecord, RunRecord
from tests.pg import fresh_schema
from tests.runtime.fleet.support import wait_for

RUN = "w" * 32


def _event(store: Any) -> None:
    store.append_event(RUN, "step", {"n": 1})


def _step(store: Any) -> None:
    store.settle_step(RUN, "s", {"outcome": "completed"}, used=["s/ok"])


def _seal(store: Any) -> None:
    store.update_run(RUN, status="sealed", outcome="completed", receipt_id="x")


def _written(store: Any) -> dict[str, Any]:
    run = store.get_run(RUN)
    return {
        "events": len(store.events(RUN)),
        "steps": sorted(store.step_records(RUN)),
        "used": [r.state for r in store.requests(RUN)],
        "status": run.status,
    }


@pytest.mark.parametrize("write", [_event, _step, _seal], ids=["event", "step", "seal"])
@pytest.mark.parametrize("takeover", ["commits", "rolls back"])
def test_a_write_waiting_on_a_takeover_follows_what_the_takeover_did(
    write: Callable[[Any], None], takeover: str
) -> None:
    import psycopg

    from proctor.runtime.records.postgres import PostgresRunStore

    with fresh_schema() as url:
        store = PostgresRunStore(url)
        store.create_run(RunRecord(run_id=RUN, skill="k", method="main", status="running"))
        assert store.acquire_lease(RUN, "A", 600) is None
        store.put_request(RequestRecord(RUN, "s/ok", "approval", "sha256:" + "1" * 64, {}))
        store.record_decisions(RUN, {"s/ok": {"approved": True}})
        before = _written(store)
        outcome: list[BaseException | None] = []

        def drive() -> None:
            try:
                write(store)
                outcome.append(None)
            except BaseException as exc:  # the thread's outcome is what the test checks
                outcome.append(exc)

        with psycopg.connect(url) as other, psycopg.connect(url, autocommit=True) as watch:
            other.execute(
                "UPDATE leases SET holder = 'B', epoch = epoch + 1 WHERE run_id = %s", (RUN,)
            )
            thread = threading.Thread(target=drive)
            thread.start()
            wait_for(
                lambda: watch.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database() AND query LIKE %s",
                    ("%leases%FOR SHARE%",),
                ).fetchone(),
                30,
                "the write to wait on the lease row",
            )
            assert not outcome  # it waits: nothing decided yet
            if takeover == "commits":
                other.commit()
            else:
                other.rollback()
            thread.join(30)
        assert len(outcome) == 1
        if takeover == "commits":
            assert isinstance(outcome[0], LeaseLost)
            assert outcome[0].code == "lease_lost"
            assert _written(store) == before
        else:
            assert outcome[0] is None
            assert _written(store) != before


def test_a_take_reads_the_row_first_and_counts_a_row_being_taken_as_held() -> None:
    """A lease take reads the lease row first (a resumed run has one), and makes it only when
    there is none; a row another driver holds locked (taking it, or writing under its fence)
    is held, without waiting, whether the take would read or make it."""
    from proctor.runtime.records.postgres import PostgresRunStore

    with fresh_schema() as url:
        a, b = PostgresRunStore(url), PostgresRunStore(url)
        assert a.acquire_lease(RUN, "A", 60) is None  # no row: made, the first epoch
        assert (lease := a.lease(RUN)) is not None and (lease.holder, lease.epoch) == ("A", 1)
        a.release_lease(RUN, "A")
        with b.transaction(), b.connection() as conn:  # b takes the row, uncommitted
            conn.execute("SELECT 1 FROM leases WHERE run_id = %s FOR UPDATE", (RUN,))
            assert a.acquire_lease(RUN, "A", 60) == "(another driver, taking it now)"
        assert a.acquire_lease(RUN, "A", 60) is None  # the row read and taken: the next epoch
        assert (lease := a.lease(RUN)) is not None and (lease.holder, lease.epoch) == ("A", 2)
        assert a.taken_lease(RUN) == lease

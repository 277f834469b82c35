"""The run store's contract, run against both backends: SQLite and PostgreSQL.

Every rule of :mod:`proctor.runtime.records.runs` is checked the same way on each store: runs
and their cursor pages, append-only events, claims and settlements, per-step reads and the
counters, idempotency keys, steps settled once with their decisions used in the same commit,
requests and decisions, leases, the journal, the audit anchor, the pending-requests page, and
a transaction that fails leaving nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.runtime.records.runs import (
    JournalRecord,
    RequestRecord,
    RunCounts,
    RunRecord,
    RunStore,
)
from tests.pg import fresh_schema
from tests.runtime.records.records_support import settled_call


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    if request.param == "sqlite":
        from proctor.runtime.records.sqlite import SQLiteRunStore

        lite = SQLiteRunStore(tmp_path / "runs.sqlite")
        yield lite
        lite.close()
        return
    from proctor.runtime.records.postgres import PostgresRunStore

    with fresh_schema() as url:
        pg = PostgresRunStore(url)
        yield pg
        pg.close()


def test_runs_are_created_once_updated_by_merge_and_paged_by_cursor(store: RunStore) -> None:
    made = [store.create_run(RunRecord(run_id=f"r{n}", skill="s", method="m")) for n in range(5)]
    assert [r.cursor for r in made] == sorted(r.cursor for r in made)
    assert made[0].created_at
    with pytest.raises(StoreError, match="already exists"):
        store.create_run(RunRecord(run_id="r0", skill="s", method="m"))
    store.update_run("r1", status="sealed", outcome="completed", data={"a": 1})
    store.update_run("r1", data={"b": 2}, receipt_id="rc")
    got = store.get_run("r1")
    assert got is not None
    assert (got.status, got.outcome, got.receipt_id, got.data) == (
        "sealed",
        "completed",
        "rc",
        {"a": 1, "b": 2},
    )
    assert store.get_run("missing") is None
    with pytest.raises(StoreError, match="no run"):
        store.update_run("missing", status="x")
    first = store.list_runs(limit=2)
    assert [r.run_id for r in first] == ["r4", "r3"]
    second = store.list_runs(after=first[-1].cursor, limit=2)
    assert [r.run_id for r in second] == ["r2", "r1"]
    assert [r.run_id for r in store.list_runs(after=second[-1].cursor, limit=9)] == ["r0"]
    heads = store.list_runs(limit=2, data=False)  # a list that decodes no run's state
    assert [(r.run_id, r.cursor, r.status, r.data) for r in heads] == [
        (r.run_id, r.cursor, r.status, {}) for r in first
    ]


def test_events_are_numbered_in_order_and_append_only(store: RunStore) -> None:
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    assert [store.append_event("r", "k", {"n": n}) for n in range(3)] == [1, 2, 3]
    assert store.append_event("other", "k", {}) == 1
    events = store.events("r")
    assert [(e["seq"], e["kind"], e["body"]) for e in events] == [
        (1, "k", {"n": 0}),
        (2, "k", {"n": 1}),
        (3, "k", {"n": 2}),
    ]
    with pytest.raises(StoreError), store.transaction():
        _raw(store, "UPDATE events SET kind = 'forged' WHERE run_id = 'r'")
    with pytest.raises(StoreError), store.transaction():
        _raw(store, "DELETE FROM events WHERE run_id = 'r'")
    assert store.events("r") == events


def test_events_are_read_a_page_after_a_cursor(store: RunStore) -> None:
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    for n in range(7):
        store.append_event("r", "k", {"n": n})
    store.append_event("other", "k", {"n": 99})
    assert [e["seq"] for e in store.events("r", after=2, limit=3)] == [3, 4, 5]
    assert [e["body"]["n"] for e in store.events("r", after=5)] == [5, 6]
    assert [e["seq"] for e in store.events("r", limit=2)] == [1, 2]
    assert store.events("r", after=7) == [] and store.events("r", after=2**53 - 1) == []
    assert store.events("r", after=0) == store.events("r")
    assert store.events("none", after=0, limit=5) == []


def _raw(store: RunStore, sql: str) -> None:
    """A write behind the store's methods (what an attacker with the store's login could try)."""
    from proctor.runtime.records.postgres import PostgresRunStore
    from proctor.runtime.records.sqlite import SQLiteRunStore

    if isinstance(store, PostgresRunStore):
        store._rows(sql)
    else:
        assert isinstance(store, SQLiteRunStore)
        store._exec(sql)


def test_claims_settle_and_counters_stay_equal_to_a_recount(store: RunStore) -> None:
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    claimed = settled_call("r", "c1", "a", None, idempotency_key="k1")
    store.claim_call(claimed)
    got = store.get_call("r", "c1")
    assert got is not None and got.state == "claimed" and got.outcome is None
    assert store.find_idempotent("k1") is None  # claimed, not settled
    store.settle_call("r", "c1", "completed", {"ok": True})
    got = store.get_call("r", "c1")
    assert got is not None and (got.state, got.outcome, got.result) == (
        "settled",
        "completed",
        {"ok": True},
    )
    found = store.find_idempotent("k1")
    assert found is not None and found.call_id == "c1"
    store.record_call(settled_call("r", "c2", "b", "refused"))
    store.record_call(settled_call("r", "c3", None, "completed"))
    store.claim_call(settled_call("r", "c4", "a", None))
    store.settle_call("r", "c4", "refused", {})
    assert [c.call_id for c in store.calls("r")] == ["c1", "c2", "c3", "c4"]
    assert [c.call_id for c in store.step_calls("r", "a")] == ["c1", "c4"]
    assert [c.call_id for c in store.step_calls("r", None)] == ["c3"]
    store.settle_step("r", "a", {"outcome": "completed"})
    assert store.run_counts("r") == RunCounts(calls=4, admitted=2, steps=1)
    assert store.get_call("r", "nope") is None


def test_counts_of_a_run_never_created_are_counted_once(store: RunStore) -> None:
    store.record_call(settled_call("loose", "c1", "a", "completed"))
    store.record_call(settled_call("loose", "c2", "a", "refused"))
    assert store.run_counts("loose") == RunCounts(calls=2, admitted=1, steps=0)
    store.record_call(settled_call("loose", "c3", "a", "completed"))
    assert store.run_counts("loose") == RunCounts(calls=3, admitted=2, steps=0)


def test_a_step_settles_once_and_uses_its_decisions_in_the_same_commit(store: RunStore) -> None:
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    asked = store.put_request(
        RequestRecord(run_id="r", address="steps.ok", kind="approval", request_digest="d1", body={})
    )
    assert asked.state == "open" and asked.cursor > 0
    store.record_decisions("r", {"steps.ok": {"approved": True}})
    again = store.put_request(
        RequestRecord(run_id="r", address="steps.ok", kind="approval", request_digest="d1", body={})
    )
    assert again.state == "decided" and again.decision == {"approved": True}
    store.settle_step("r", "ok", {"outcome": "completed"}, used=["steps.ok"])
    with pytest.raises(StoreError, match="already settled"):
        store.settle_step("r", "ok", {"outcome": "failed"}, used=[])
    assert store.step_records("r") == {"ok": {"outcome": "completed"}}
    (req,) = store.requests("r")
    assert req.state == "used"
    store.record_decisions("r", {"steps.ok": {"approved": False}})  # a used one stays used
    assert store.requests("r")[0].decision == {"approved": True}


def test_a_changed_request_drops_a_decision_not_used(store: RunStore) -> None:
    store.put_request(
        RequestRecord(run_id="r", address="a", kind="approval", request_digest="d1", body={"x": 1})
    )
    store.record_decisions("r", {"a": {"approved": True}})
    changed = store.put_request(
        RequestRecord(run_id="r", address="a", kind="approval", request_digest="d2", body={"x": 2})
    )
    assert changed.state == "open" and changed.decision is None
    (req,) = store.requests("r")
    assert (req.state, req.decision, req.body) == ("open", None, {"x": 2})


def test_a_request_is_read_by_its_run_and_address_as_the_listing_has_it(store: RunStore) -> None:
    for run_id in ("r", "other"):
        store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
    for n in range(3):
        store.put_request(RequestRecord("r", f"a{n}", "approval", f"d{n}", {"n": n}))
    store.put_request(RequestRecord("other", "a1", "agent_turn", "dx", {"n": 9}))
    store.record_decisions("r", {"a1": {"approved": True}})
    listed = {r.address: r for r in store.requests("r")}
    for address, expected in listed.items():
        found = store.request("r", address)
        assert found is not None
        assert (found.run_id, found.kind, found.body, found.state, found.decision) == (
            expected.run_id, expected.kind, expected.body, expected.state, expected.decision
        )  # fmt: skip
        assert found.cursor == expected.cursor
    other = store.request("other", "a1")
    assert other is not None and (other.kind, other.body) == ("agent_turn", {"n": 9})
    assert store.request("r", "missing") is None and store.request("nobody", "a0") is None


def test_a_request_asked_again_as_recorded_keeps_its_decision(store: RunStore) -> None:
    first = store.put_request(
        RequestRecord(run_id="r", address="a", kind="approval", request_digest="d1", body={"x": 1})
    )
    store.record_decisions("r", {"a": {"approved": True}})
    again = store.put_request(
        RequestRecord(run_id="r", address="a", kind="approval", request_digest="d1", body={"x": 1})
    )
    assert (again.state, again.decision, again.cursor) == (
        "decided",
        {"approved": True},
        first.cursor,
    )
    with store.transaction():  # the same inside a caller's transaction
        inside = store.put_request(RequestRecord("r", "a", "approval", "d1", {"x": 1}))
    assert inside == again and store.requests("r") == [again]


def test_pending_requests_page_across_runs_by_cursor(store: RunStore) -> None:
    for n in range(7):
        store.create_run(RunRecord(run_id=f"r{n}", skill="s", method="m"))
        store.put_request(
            RequestRecord(
                run_id=f"r{n}", address="steps.ok", kind="approval", request_digest="d", body={}
            )
        )
    store.record_decisions("r2", {"steps.ok": {"approved": True}})
    page = store.pending_requests(limit=3)
    assert [p.run.run_id for p in page] == ["r0", "r1", "r3"]
    rest = store.pending_requests(after=page[-1].cursor, limit=10)
    assert [p.request.run_id for p in rest] == ["r4", "r5", "r6"]
    store.update_run("r5", status="sealed")  # a sealed run's leftover request is never listed
    assert [p.run.run_id for p in store.pending_requests(after=page[-1].cursor)] == ["r4", "r6"]
    assert store.pending_requests(after=rest[-1].cursor) == []


def test_leases_hold_one_driver_expire_and_are_taken_from_the_dead(store: RunStore) -> None:
    assert store.acquire_lease("r", "A", 60) is None
    assert store.acquire_lease("r", "A", 60) is None  # renewal
    assert store.acquire_lease("r", "B", 60) == "A"
    assert store.acquire_lease("r", "B", 60, steal_from="A") is None
    assert store.acquire_lease("r", "A", 60) == "B"
    store.release_lease("r", "A")  # not A's: kept
    assert store.acquire_lease("r", "C", 60) == "B"
    store.release_lease("r", "B")
    assert store.acquire_lease("r", "C", -1) is None  # already expired
    assert store.acquire_lease("r", "D", 60) is None


def test_a_release_inside_a_transaction_takes_effect_with_its_commit(store: RunStore) -> None:
    # a seal gives its lease back in its own transaction: rolled back, the holder keeps the
    # lease and the epoch its writes are fenced by; committed, the lease is free
    assert store.acquire_lease("r", "A", 60) is None
    with pytest.raises(RuntimeError), store.transaction():
        store.release_lease("r", "A")
        raise RuntimeError("the commit never comes")
    assert (lease := store.lease("r")) is not None and lease.holder == "A"
    assert store.renew_lease("r", "A", 60)  # still A's, under the epoch it took
    with store.transaction():
        store.release_lease("r", "A")
    assert (lease := store.lease("r")) is not None and lease.holder == ""
    assert not store.renew_lease("r", "A", 60)
    assert store.acquire_lease("r", "B", 60) is None


def test_leases_under_contention_have_exactly_one_winner(store: RunStore) -> None:
    winners: list[str] = []
    barrier = threading.Barrier(6)

    def take(holder: str) -> None:
        barrier.wait()
        if store.acquire_lease("contended", holder, 60) is None:
            winners.append(holder)

    threads = [threading.Thread(target=take, args=(f"h{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1, winners


def test_journal_keeps_open_bundles_until_closed(store: RunStore) -> None:
    store.journal_open(JournalRecord("b1", "r", "open", [{"path": "a.txt", "before": None}]))
    store.journal_open(JournalRecord("b2", "r", "open", []))
    store.journal_close("b2", "applied")
    (pending,) = store.journal_pending()
    assert (pending.bundle_id, pending.entries) == ("b1", [{"path": "a.txt", "before": None}])


def test_an_older_audit_anchor_never_replaces_a_newer_one(store: RunStore) -> None:
    assert store.audit_anchor() is None
    store.record_audit_anchor({"lines": 5, "last_digest": "d5", "run_id": "a"})
    store.record_audit_anchor({"lines": 3, "last_digest": "d3", "run_id": "b"})
    assert store.audit_anchor() == {"lines": 5, "last_digest": "d5", "run_id": "a"}
    store.record_audit_anchor({"lines": 9, "last_digest": "d9", "run_id": "c"})
    anchor = store.audit_anchor()
    assert anchor is not None and anchor["lines"] == 9


def test_a_failed_transaction_leaves_nothing_behind(store: RunStore) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.create_run(RunRecord(run_id="gone", skill="s", method="m"))
        with store.transaction():  # nested: joins the outer commit
            store.append_event("gone", "k", {})
        raise RuntimeError("boom")
    assert store.get_run("gone") is None
    assert store.events("gone") == []


def test_find_reusable_returns_the_newest_completed_run_with_the_key(store: RunStore) -> None:
    for run_id, outcome, key in (
        ("old", "completed", "k"),
        ("new", "completed", "k"),
        ("failed", "failed", "k"),
        ("other", "completed", "j"),
    ):
        store.create_run(RunRecord(run_id=run_id, skill="s", method="m", data={"reuse_key": key}))
        store.update_run(run_id, status="sealed", outcome=outcome)
    store.create_run(RunRecord(run_id="open", skill="s", method="m", data={"reuse_key": "k"}))
    found = store.find_reusable("k", since="1970-01-01T00:00:00Z")
    assert found is not None and found.run_id == "new"
    assert store.find_reusable("k", since="9999-01-01T00:00:00Z") is None
    assert store.find_reusable("absent", since="1970-01-01T00:00:00Z") is None


def test_calls_and_steps_are_read_a_page_at_a_time_in_claim_order(store: RunStore) -> None:
    for run_id in ("r", "other"):
        store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
    for n in range(23):  # two runs' calls interleaved, three steps of one run interleaved
        run_id = "other" if n % 4 == 3 else "r"
        store.record_call(settled_call(run_id, f"c{n}", ("a", "b", None)[n % 3], "completed"))
    store.settle_step("r", "b", {"outcome": "completed"})
    store.settle_step("r", "a", {"outcome": "completed"})
    mine = [c.call_id for c in store.calls("r")]
    assert len(mine) == 18
    for batch in (1, 4, 17, 18, 19, 1000):
        paged = list(store.iter_calls("r", batch=batch))
        assert [c.call_id for c in paged] == mine
        assert [c.seq for c in paged] == sorted({c.seq for c in paged})
        newest = store.iter_calls("r", batch=batch, newest_first=True)
        assert [c.call_id for c in newest] == mine[::-1]
        for step in ("a", "b", None):
            assert [c.call_id for c in store.iter_step_calls("r", step, batch=batch)] == [
                c.call_id for c in store.step_calls("r", step)
            ]
        pairs = list(store.iter_step_records("r", batch=batch))
        assert pairs == list(store.step_records("r").items())
    assert [c.call_id for c in store.iter_calls("r")] == mine
    assert list(store.iter_calls("never")) == []
    assert list(store.iter_step_records("never")) == []
    assert store.unsettled_call_steps("r") == [None]
    assert store.unsettled_call_steps("other") == ["a", "b", None]
    with pytest.raises(ValueError, match="at least one row"):
        list(store.iter_calls("r", batch=0))


def test_calls_are_read_between_places_and_a_step_by_its_key(store: RunStore) -> None:
    for run_id in ("r", "other"):
        store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
    for n in range(20):  # two runs' calls interleaved
        store.record_call(settled_call("other" if n % 3 == 2 else "r", f"c{n}", "a", "completed"))
    mine = list(store.iter_calls("r"))
    seqs = [c.seq for c in mine]
    for batch in (1, 3, 1000):
        for after, through in ((None, seqs[4]), (seqs[2], None), (seqs[2], seqs[9])):
            want = [
                c.call_id
                for c in mine
                if (after is None or c.seq > after) and (through is None or c.seq <= through)
            ]
            got = store.iter_calls("r", batch=batch, after=after, through=through)
            assert [c.call_id for c in got] == want
            newest = store.iter_calls(
                "r", batch=batch, after=after, through=through, newest_first=True
            )
            assert [c.call_id for c in newest] == want[::-1]
        # both places given: no lookup of the run's ends; past its last call, nothing more
        assert [c.call_id for c in store.iter_calls("r", after=seqs[-2], through=2**62)] == [
            mine[-1].call_id
        ]
        assert list(store.iter_calls("r", after=seqs[5], through=seqs[4])) == []
    store.settle_step("r", "a", {"outcome": "completed", "output": {"n": 1}})
    assert store.step_record("r", "a") == {"outcome": "completed", "output": {"n": 1}}
    assert store.step_record("r", "b") is None
    assert store.step_record("other", "a") is None

"""The run store's per-step reads and counters: what keeps a long run's steps flat.

``step_calls`` reads one step's calls in claim order; ``run_counts`` gives a run's call,
admitted-call and step counts, kept by triggers, equal at every point to counting the rows.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from proctor.runtime.records.runs import RunCounts, RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore
from tests.runtime.records.records_support import settled_call


def _recount(store: SQLiteRunStore, run_id: str) -> RunCounts:
    calls = store.calls(run_id)
    return RunCounts(
        calls=len(calls),
        admitted=sum(1 for c in calls if c.outcome != "refused"),
        steps=len(store.step_records(run_id)),
    )


def test_step_calls_reads_one_steps_calls_in_claim_order(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    for run_id in ("r", "other"):
        store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
    for n, step in enumerate(["a", "b", "a", None, "a"]):
        store.record_call(settled_call("r", f"c{n}", step, "completed"))
    store.record_call(settled_call("other", "c9", "a", "completed"))
    assert [c.call_id for c in store.step_calls("r", "a")] == ["c0", "c2", "c4"]
    assert [c.call_id for c in store.step_calls("r", "b")] == ["c1"]
    assert [c.call_id for c in store.step_calls("r", None)] == ["c3"]
    assert store.step_calls("r", "missing") == []
    plan = store._conn.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM calls WHERE run_id = ? AND step_id = ? ORDER BY ord",
        ("r", "a"),
    ).fetchall()
    assert any("calls_step" in str(row) for row in plan), plan  # an index range, not a scan
    store.close()


def test_counters_equal_a_recount_through_claims_settlements_and_steps(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    assert store.run_counts("r") == RunCounts(0, 0, 0)
    store.record_call(settled_call("r", "a/1", "a", "completed"))
    store.record_call(settled_call("r", "a/2", "a", "refused"))
    claimed = settled_call("r", "b/1", "b", None)
    store.claim_call(claimed)
    assert store.run_counts("r") == RunCounts(calls=3, admitted=2, steps=0)
    store.settle_call("r", "b/1", "refused", {"status": "refused"})  # a refused effect
    assert store.run_counts("r") == RunCounts(calls=3, admitted=1, steps=0)
    store.claim_call(settled_call("r", "b/2", "b", None))
    store.settle_call("r", "b/2", "unknown", {"status": "unknown"})  # abandoned: still admitted
    store.settle_step("r", "a", {"outcome": "completed"})
    assert store.run_counts("r") == _recount(store, "r") == RunCounts(4, 2, 1)
    # another connection (another process) sees the same counts
    other = SQLiteRunStore(tmp_path / "runs.sqlite")
    assert other.run_counts("r") == RunCounts(4, 2, 1)
    other.record_call(settled_call("r", "c/1", "c", "completed"))
    assert store.run_counts("r") == RunCounts(4, 2, 1)  # a read waits for its process's commit
    other.flush()
    assert store.run_counts("r") == _recount(store, "r") == RunCounts(5, 3, 1)
    other.close()
    store.close()


def test_a_store_written_before_the_counters_is_counted_right(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    store.record_call(settled_call("r", "a/1", "a", "completed"))
    store.settle_step("r", "a", {"outcome": "completed"})
    store.close()
    # the same store as the schema before the counters left it
    conn = sqlite3.connect(str(path))
    for name in ("calls_counted", "calls_recounted", "steps_counted"):
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("DROP TABLE run_counts")
    conn.execute("DROP INDEX calls_step")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.execute(
        "INSERT INTO calls (run_id, call_id, step_id, tool, state, args_digest, outcome)"
        " VALUES ('r', 'b/1', 'b', 'echo', 'settled', 'x', 'refused')"
    )
    conn.commit()
    conn.close()
    again = SQLiteRunStore(path)
    assert again.run_counts("r") == RunCounts(calls=2, admitted=1, steps=1)
    again.record_call(settled_call("r", "b/2", "b", "completed"))
    assert again.run_counts("r") == _recount(again, "r") == RunCounts(3, 2, 1)
    assert [c.call_id for c in again.step_calls("r", "b")] == ["b/1", "b/2"]
    again.close()


def test_a_store_written_before_package_identities_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    store.create_run(RunRecord(run_id="old", skill="s", method="m"))
    store.close()
    # the runs table as version 5 left it: no identity column
    conn = sqlite3.connect(str(path))
    conn.execute("ALTER TABLE runs DROP COLUMN identity")
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    again = SQLiteRunStore(path)
    again.create_run(RunRecord(run_id="new", skill="s", method="m", identity="local:skills/s"))
    assert {r.run_id: r.identity for r in again.list_runs(limit=5)} == {
        "old": None,
        "new": "local:skills/s",
    }
    again.close()


def test_a_new_run_has_its_counters_from_its_creation(tmp_path: Path) -> None:
    # created in the run's own transaction: the driver's first read writes nothing
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    row = store._conn.execute("SELECT calls, admitted, steps FROM run_counts WHERE run_id = 'r'")
    assert row.fetchone() == (0, 0, 0)
    writes: list[str] = []
    store._conn.set_trace_callback(writes.append)
    assert store.run_counts("r") == RunCounts(0, 0, 0)
    assert not [q for q in writes if q.startswith(("BEGIN", "INSERT"))], writes
    store._conn.set_trace_callback(None)
    store.record_call(settled_call("r", "a/1", "a", "completed"))
    store.settle_step("r", "a", {"outcome": "completed"})
    assert store.run_counts("r") == _recount(store, "r") == RunCounts(1, 1, 1)
    store.close()

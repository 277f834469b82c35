"""What the SQLite run store remembers between its own transactions instead of reading it
again, and that another writer's change to it is always seen.

- a run's newest event seq: the next append tries the seq after it, and the events' key
  refuses that seq when another connection (another process) appended since; a rollback
  forgets what it appended;
- a run its own transaction created takes its lease without reading the lease row first;
- (not a memory, but a read spared) a run's rows that fit in a page are read by one statement,
  its first and last place found in it; a longer run's pages follow from there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.runtime.records.runs import CallRecord, RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore


def _seqs(store: SQLiteRunStore, run_id: str) -> list[tuple[int, str]]:
    return [(e["seq"], e["kind"]) for e in store.events(run_id)]


def test_an_append_after_another_writers_takes_the_seq_after_theirs(tmp_path: Path) -> None:
    one = SQLiteRunStore(tmp_path / "runs.sqlite")
    other = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        with one.transaction():
            one.create_run(RunRecord(run_id="r", skill="s", method="m"))
            assert one.append_event("r", "started", {}) == 1
        assert other.append_event("r", "theirs", {}) == 2
        assert other.append_event("r", "theirs", {}) == 3
        assert one.append_event("r", "mine", {}) == 4  # not 2: the key refused it
        assert one.append_event("r", "mine", {}) == 5
        assert other.append_event("r", "theirs", {}) == 6
        expected = [(1, "started"), (2, "theirs"), (3, "theirs"), (4, "mine"), (5, "mine")]
        assert _seqs(other, "r") == [*expected, (6, "theirs")]
    finally:
        one.close()
        other.close()


def test_a_rolled_back_append_leaves_no_gap(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        store.create_run(RunRecord(run_id="r", skill="s", method="m"))
        assert store.append_event("r", "a", {}) == 1
        with pytest.raises(RuntimeError), store.transaction():
            assert store.append_event("r", "gone", {}) == 2
            assert store.append_event("r", "gone", {}) == 3
            raise RuntimeError("boom")
        assert store.append_event("r", "b", {}) == 2
        with pytest.raises(RuntimeError), store.transaction():  # the run itself rolled back
            store.create_run(RunRecord(run_id="q", skill="s", method="m"))
            store.append_event("q", "gone", {})
            raise RuntimeError("boom")
        assert store.get_run("q") is None
        assert store.append_event("q", "c", {}) == 1
        assert _seqs(store, "r") == [(1, "a"), (2, "b")]
    finally:
        store.close()


def test_a_call_record_refused_with_an_event_is_still_refused(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        store.create_run(RunRecord(run_id="r", skill="s", method="m"))
        assert store.append_event("r", "a", {}) == 1
        call = CallRecord("r", "c1", "s", "echo", "settled", "sha256:0", "completed", {})
        store.record_call(call)
        store.flush()
        store.record_call(CallRecord("r", "c1", "s", "echo", "settled", "sha256:0", "completed"))
        with pytest.raises(StoreError, match="calls"):  # not taken for the events' key
            store.append_event("r", "b", {})
        assert store.append_event("r", "b", {}) == 2
    finally:
        store.close()


def test_a_fresh_runs_lease_is_taken_without_a_read_and_an_old_row_is_still_seen(
    tmp_path: Path,
) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    other = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        with store.transaction():
            store.create_run(RunRecord(run_id="r", skill="s", method="m"))
            assert store.acquire_lease("r", "me", 60) is None
        store._conn.set_trace_callback(None)
        assert not [s for s in statements if s.startswith("SELECT holder")]
        lease = other.lease("r")
        assert lease is not None and (lease.holder, lease.epoch) == ("me", 1)
        # a lease row left by a run of that id (its run record gone): its epoch only grows
        store.release_lease("r", "me")
        other._conn.execute("DELETE FROM runs WHERE run_id = 'r'")
        assert other.acquire_lease("r", "them", 60) is None
        other.release_lease("r", "them")
        with store.transaction():
            store.create_run(RunRecord(run_id="r", skill="s", method="m"))
            assert store.acquire_lease("r", "me", 60) is None
        lease = other.lease("r")
        assert lease is not None and (lease.holder, lease.epoch) == ("me", 3)
        store.append_event("r", "k", {})  # written under the epoch taken
    finally:
        store.close()
        other.close()


def test_a_run_within_a_page_is_read_by_one_statement(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        for run_id in ("r", "other"):
            store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
        for n in range(7):  # interleaved with another run's steps
            store.settle_step("other" if n % 2 else "r", f"s{n}", {"n": n})
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        assert [s for s, _ in store.iter_step_records("r")] == ["s0", "s2", "s4", "s6"]
        assert len(statements) == 1
        statements.clear()
        assert [s for s, _ in store.iter_step_records("r", batch=2)] == ["s0", "s2", "s4", "s6"]
        assert len(statements) == 4  # the first page, the places again, two more pages
        store._conn.set_trace_callback(None)
        newest = [c for c in store.iter_step_records("other", batch=2)]
        assert [s for s, _ in newest] == ["s1", "s3", "s5"]
        assert list(store.iter_step_records("never")) == []
    finally:
        store.close()

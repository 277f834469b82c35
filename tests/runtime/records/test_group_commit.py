"""A call that changed nothing commits with its step (SQLite): one commit, not two.

Seen from a second connection (another process reading the store), the read's record appears
together with the step that used it; any statement of the store itself sees it at once; an
effect's claim that follows writes it first, so records keep their order; a transaction that
rolls back puts it back in the queue.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.runtime.records.runs import CallRecord, RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore


def _read(call_id: str) -> CallRecord:
    return CallRecord("r", call_id, "s", "echo", "settled", "sha256:0", "completed", {"x": 1})


def _seen(path: Path) -> list[str]:
    other = sqlite3.connect(path)
    try:
        return [row[0] for row in other.execute("SELECT call_id FROM calls ORDER BY ord")]
    finally:
        other.close()


@pytest.fixture
def store(tmp_path: Path) -> SQLiteRunStore:
    lite = SQLiteRunStore(tmp_path / "runs.sqlite")
    lite.create_run(RunRecord(run_id="r", skill="k", method="m"))
    return lite


def test_a_read_commits_with_its_step(store: SQLiteRunStore, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store.record_call(_read("s/1"))
    assert _seen(path) == []  # not yet committed: it waits for its step
    assert [c.call_id for c in store.calls("r")] == ["s/1"]  # the store itself sees it
    store.record_call(_read("s/2"))
    store.settle_step("r", "s", {"status": "completed"})
    assert _seen(path) == ["s/1", "s/2"]
    store.close()


def test_an_effect_claim_writes_the_waiting_reads_first(
    store: SQLiteRunStore, tmp_path: Path
) -> None:
    store.record_call(_read("s/1"))
    store.claim_call(CallRecord("r", "s/2", "s", "fs.write", "claimed", "sha256:1"))
    assert _seen(tmp_path / "runs.sqlite") == ["s/1", "s/2"]
    store.close()


def test_a_rolled_back_transaction_keeps_the_read_waiting(
    store: SQLiteRunStore, tmp_path: Path
) -> None:
    store.record_call(_read("s/1"))
    with pytest.raises(RuntimeError), store.transaction():
        store.append_event("r", "x", {})
        raise RuntimeError("the step failed")
    assert _seen(tmp_path / "runs.sqlite") == []
    store.close()  # closing commits what waits
    assert _seen(tmp_path / "runs.sqlite") == ["s/1"]


def test_a_duplicate_call_id_is_still_refused(store: SQLiteRunStore) -> None:
    store.record_call(_read("s/1"))
    store.record_call(_read("s/1"))
    with pytest.raises(StoreError):
        store.calls("r")
    # The batch that failed is dropped, not kept to fail every later statement.
    assert [c.call_id for c in store.calls("r")] == []
    store.record_call(_read("s/2"))
    store.record_call(_read("s/2"))
    with pytest.raises(StoreError):
        store.flush()  # inside a transaction of its own, which is rolled back whole
    store.settle_step("r", "s", {"status": "completed"})  # the store still takes transactions
    assert [c.call_id for c in store.calls("r")] == []
    store.close()


def test_the_in_memory_store_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # proctor test's throwaway store (PROCTOR_DATABASE_PATH=":memory:") once left a file
    # named ":memory:" in the folder it ran from.
    monkeypatch.chdir(tmp_path)
    lite = SQLiteRunStore(Path(":memory:"))
    lite.create_run(RunRecord(run_id="r", skill="k", method="m"))
    lite.record_call(_read("s/1"))
    assert [c.call_id for c in lite.calls("r")] == ["s/1"]
    lite.close()
    assert list(tmp_path.iterdir()) == []

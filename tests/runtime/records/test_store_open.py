"""Opening the SQLite run store beside other openers: no "database is locked" at start."""

from __future__ import annotations

import threading
from pathlib import Path

from proctor.runtime.records.runs import RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore


def test_many_sessions_open_a_new_store_at_once(tmp_path: Path) -> None:
    path = tmp_path / ".proctor" / "runs.sqlite"
    start = threading.Barrier(12)
    errors: list[BaseException] = []

    def open_and_write(n: int) -> None:
        start.wait()
        try:
            store = SQLiteRunStore(path)
            store.create_run(RunRecord(run_id=f"r{n}", skill="s", method="m"))
            store.append_event(f"r{n}", "started", {})
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_write, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = SQLiteRunStore(path)
    assert len(store.list_runs(limit=100)) == 12
    store.close()


def test_reopening_keeps_runs_and_events_append_only(tmp_path: Path) -> None:
    import sqlite3

    import pytest

    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    store.append_event("r", "started", {"a": 1})
    store.close()
    again = SQLiteRunStore(path)
    assert [e["kind"] for e in again.events("r")] == ["started"]
    again.close()
    raw = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute("UPDATE events SET kind = 'x'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        raw.execute("DELETE FROM events")
    raw.close()

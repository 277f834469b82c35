"""Version 9 of the SQLite run store: ``leases`` and ``run_counts`` are ``WITHOUT ROWID`` tables
(one b-tree each, not a rowid table and its key's index), and a store written before is
migrated when opened, its rows copied whole; a new run's counters start at zero without
counting its (absent) rows; ``runs_reuse`` holds no run without a reuse key; the open journal
bundles are read through an index of their own.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from proctor.errors import LeaseLost
from proctor.runtime.records.runs import JournalRecord, RunCounts, RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.records.sqlite_schema import SCHEMA_VERSION
from tests.runtime.records.records_support import settled_call

# the two tables as version 8 declared them (rowid tables, their key in a second b-tree)
_V8 = {
    "leases": "CREATE TABLE leases (run_id TEXT PRIMARY KEY, holder TEXT NOT NULL,"
    " expires_at REAL NOT NULL, epoch INTEGER NOT NULL DEFAULT 0, taken_from TEXT)",
    "run_counts": "CREATE TABLE run_counts (run_id TEXT PRIMARY KEY, calls INTEGER NOT NULL,"
    " admitted INTEGER NOT NULL, steps INTEGER NOT NULL)",
}
_COUNTERS = ("calls_counted", "calls_recounted", "steps_counted")
_REUSE_V8 = (
    "CREATE INDEX runs_reuse ON runs (json_extract(data, '$.reuse_key'), cursor)"
    " WHERE status = 'sealed' AND outcome = 'completed'"
)
# what only an index holding the runs without a reuse key can answer
_NULL_KEYS = (
    "SELECT cursor FROM runs INDEXED BY runs_reuse WHERE status = 'sealed'"
    " AND outcome = 'completed' AND json_extract(data, '$.reuse_key') IS NULL"
)


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _keyed(path: Path) -> dict[str, bool]:
    """Whether each of the two tables is ``WITHOUT ROWID``."""
    got = _rows(path, "SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    return {n: "WITHOUT ROWID" in s.upper() for n, s in got if n in _V8}


def _as_version_8(path: Path) -> None:
    """Rebuild the store's two tables as version 8 left them, rows, epochs and triggers kept."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        triggers = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND sql LIKE '%run_counts%'"
        ).fetchall()
        for name in _COUNTERS:
            conn.execute(f"DROP TRIGGER {name}")
        for table, declared in _V8.items():
            conn.execute(f"ALTER TABLE {table} RENAME TO {table}_new")
            conn.execute(declared)
            conn.execute(f"INSERT INTO {table} SELECT * FROM {table}_new")
            conn.execute(f"DROP TABLE {table}_new")
        for (sql,) in triggers:
            conn.execute(sql)
        conn.execute("DROP INDEX runs_reuse")
        conn.execute(_REUSE_V8)
        conn.execute("DROP INDEX journal_open")
        # an index and a trigger of the table's own (none in the schema): kept by the rebuild
        conn.execute("CREATE INDEX leases_holder ON leases (holder)")
        conn.execute("CREATE TRIGGER leases_kept AFTER DELETE ON leases BEGIN SELECT 1; END")
        conn.execute("PRAGMA user_version = 8")
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_new_store_keeps_leases_and_counters_in_one_b_tree_each(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    SQLiteRunStore(path).close()
    assert _keyed(path) == {"leases": True, "run_counts": True}
    names = {r[0] for r in _rows(path, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert not {"sqlite_autoindex_leases_1", "sqlite_autoindex_run_counts_1"} & names


def test_a_sealed_run_without_a_reuse_key_is_not_in_the_reuse_index(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    try:
        for run_id, data in (("top", {}), ("child", {"reuse_key": "k"})):
            store.create_run(RunRecord(run_id=run_id, skill="s", method="m", data=data))
            store.update_run(run_id, status="sealed", outcome="completed")
        found = store.find_reusable("k", since="1970-01-01T00:00:00Z")
        assert found is not None and found.run_id == "child"
        plan = _rows(
            path,
            "EXPLAIN QUERY PLAN SELECT cursor FROM runs WHERE status = 'sealed'"
            " AND outcome = 'completed' AND updated_at >= '' AND"
            " json_extract(data, '$.reuse_key') = 'k' ORDER BY cursor DESC LIMIT 1",
        )
        assert "runs_reuse" in str(plan), plan
        with pytest.raises(sqlite3.OperationalError, match="no query solution"):
            _rows(path, _NULL_KEYS)  # the index holds no run without a key
    finally:
        store.close()


def test_a_version_8_store_is_migrated_with_its_leases_and_counters(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    a, b = SQLiteRunStore(path), SQLiteRunStore(path)
    a.create_run(RunRecord(run_id="taken", skill="s", method="m"))
    assert a.acquire_lease("taken", "A", -1) is None  # lapsed at once
    a.record_call(settled_call("taken", "a/1", "a", "completed"))
    a.record_call(settled_call("taken", "a/2", "a", "refused"))
    a.settle_step("taken", "a", {"outcome": "completed"})
    assert b.acquire_lease("taken", "B", 600) is None  # taken over: epoch 2, from A
    b.create_run(RunRecord(run_id="done", skill="s", method="m"))
    assert b.acquire_lease("done", "B", 600) is None
    b.release_lease("done", "B")
    b.create_run(RunRecord(run_id="lazy", skill="s", method="m"))
    b.close()
    a.close()
    leases = _rows(path, "SELECT * FROM leases ORDER BY run_id")
    counts = _rows(path, "SELECT * FROM run_counts ORDER BY run_id")
    assert [r[0] for r in leases] == ["done", "taken"]
    assert ("taken", "B", leases[1][2], 2, "A") == leases[1]
    # a run whose counters no one wrote yet (a store from before they existed): counted later
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM run_counts WHERE run_id = 'lazy'")
    conn.commit()
    conn.close()
    _as_version_8(path)
    assert _keyed(path) == {"leases": False, "run_counts": False}

    again = SQLiteRunStore(path)
    try:
        assert _rows(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)] == [(9,)]
        assert _keyed(path) == {"leases": True, "run_counts": True}
        assert _rows(path, "SELECT * FROM leases ORDER BY run_id") == leases
        assert _rows(path, "SELECT * FROM run_counts ORDER BY run_id") == [
            c for c in counts if c[0] != "lazy"
        ]
        # the reuse index is kept as it was (every completed run), and still answers
        assert _rows(path, _NULL_KEYS) == []
        again.update_run("done", status="sealed", outcome="completed", data={"reuse_key": "k"})
        assert again.find_reusable("k", since="1970-01-01T00:00:00Z").run_id == "done"  # type: ignore[union-attr]
        triggers = _rows(path, "SELECT name FROM sqlite_master WHERE type = 'trigger'")
        assert {*_COUNTERS, "leases_kept"} <= {t[0] for t in triggers}
        indexes = _rows(path, "SELECT name FROM sqlite_master WHERE type = 'index'")
        assert ("journal_open",) in indexes
        assert _rows(path, "SELECT tbl_name FROM sqlite_master WHERE name = 'leases_holder'") == [
            ("leases",)
        ]
        assert _rows(path, "PRAGMA integrity_check") == [("ok",)]
        # the counters go on from the copied rows, and are counted where none was copied
        assert again.run_counts("taken") == RunCounts(calls=2, admitted=1, steps=1)
        again.record_call(settled_call("taken", "b/1", "b", "completed"))
        again.flush()
        assert again.run_counts("taken") == RunCounts(calls=3, admitted=2, steps=1)
        assert again.run_counts("lazy") == RunCounts(0, 0, 0)
        # the copied epochs fence as before: a takeover counts on from epoch 2, and the
        # driver it took the run from is refused
        assert again.acquire_lease("taken", "C", 600, steal_from="B") is None
        lease = again.lease("taken")
        assert lease is not None and (lease.holder, lease.epoch, lease.taken_from) == (
            "C",
            3,
            "B",
        )
        assert again.acquire_lease("done", "D", 600) is None
        assert again.lease("done").epoch == 2  # type: ignore[union-attr]
        # a run started after the migration runs as on a new store
        again.create_run(RunRecord(run_id="new", skill="s", method="m"))
        assert again.acquire_lease("new", "N", 600) is None
        again.record_call(settled_call("new", "a/1", "a", "completed"))
        again.settle_step("new", "a", {"outcome": "completed"})
        again.update_run("new", status="sealed", outcome="completed")
        again.release_lease("new", "N")
        assert again.run_counts("new") == RunCounts(1, 1, 1)
    finally:
        again.close()
    stale = SQLiteRunStore(path)  # a driver of "taken" under epoch 2 (B's), lost since
    try:
        stale._fences["taken"] = 2
        with pytest.raises(LeaseLost):
            stale.append_event("taken", "note", {})
    finally:
        stale.close()


def test_a_version_8_store_opened_by_two_at_once_is_migrated_once(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    store.create_run(RunRecord(run_id="r", skill="s", method="m"))
    assert store.acquire_lease("r", "A", 600) is None
    store.close()
    _as_version_8(path)
    ready = threading.Barrier(2)
    opened: list[SQLiteRunStore] = []

    def open_it() -> None:
        ready.wait()
        opened.append(SQLiteRunStore(path))

    threads = [threading.Thread(target=open_it) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert len(opened) == 2
        assert _keyed(path) == {"leases": True, "run_counts": True}
        assert _rows(path, "SELECT run_id, holder, epoch FROM leases") == [("r", "A", 1)]
        assert [s.run_counts("r") for s in opened] == [RunCounts(0, 0, 0)] * 2
    finally:
        for each in opened:
            each.close()


def test_a_new_runs_counters_start_at_zero_without_counting_rows(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        sent: list[str] = []
        store._conn.set_trace_callback(sent.append)
        store.create_run(RunRecord(run_id="r", skill="s", method="m"))
        store._conn.set_trace_callback(None)
        assert not [q for q in sent if "COUNT(" in q.upper()], sent
        assert store.run_counts("r") == RunCounts(0, 0, 0)
        # rows another process writes for the run after its creation are counted by the
        # triggers, in the statement that writes them
        other = SQLiteRunStore(tmp_path / "runs.sqlite")
        other.record_call(settled_call("r", "a/1", "a", "completed"))
        other.settle_step("r", "a", {"outcome": "completed"})
        other.close()
        assert store.run_counts("r") == RunCounts(1, 1, 1)
        # a row a read of the counters made before the run existed is kept, not zeroed
        assert store.run_counts("early") == RunCounts(0, 0, 0)
        store.record_call(settled_call("early", "a/1", "a", "completed"))
        store.create_run(RunRecord(run_id="early", skill="s", method="m"))
        assert store.run_counts("early") == RunCounts(1, 1, 0)
    finally:
        store.close()


def test_the_open_journal_bundles_are_read_without_a_scan_of_the_closed(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    try:
        for n in range(20):
            store.journal_open(JournalRecord(f"b{n}", "r", "open", [{"path": f"{n}.txt"}]))
            if n != 7:
                store.journal_close(f"b{n}", "applied")
        assert [j.bundle_id for j in store.journal_pending()] == ["b7"]
        sent: list[str] = []
        store._conn.set_trace_callback(sent.append)
        store.journal_pending()
        store._conn.set_trace_callback(None)
        (query,) = sent
        plan = str(_rows(path, f"EXPLAIN QUERY PLAN {query}"))
        assert "USING INDEX journal_open" in plan, plan  # the partial index: open bundles only
        store.journal_close("b7", "rolled_back")
        assert store.journal_pending() == []
    finally:
        store.close()

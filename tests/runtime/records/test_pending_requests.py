"""RunStore.pending_requests on SQLite: open requests of runs not sealed, in the order first
asked, through the index of requests still waiting (a seal marks its run's leftover requests
closed, so they leave that index; a store written before version 8 gains the mark when opened)."""

from __future__ import annotations

from pathlib import Path

from proctor.runtime.records.runs import RequestRecord, RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.records.sqlite_schema import SCHEMA_VERSION


def _run(store: SQLiteRunStore, run_id: str, *addresses: str, status: str) -> None:
    store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
    for n, address in enumerate(addresses):
        body = {"kind": "approval", "address": address}
        digest = f"sha256:{hash((run_id, n)) & (2**64 - 1):064x}"
        store.put_request(RequestRecord(run_id, address, "approval", digest, body))
    store.update_run(run_id, status=status)


def test_only_open_requests_of_unsealed_runs_oldest_first(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        _run(store, "a", "put", "post", status="needs_approval")
        _run(store, "b", "put", status="sealed")
        _run(store, "c", "ask", status="needs_approval")
        store.record_decisions("a", {"post": {"approved": True}})
        got = [(p.run.run_id, p.request.address) for p in store.pending_requests()]
        assert got == [("a", "put"), ("c", "ask")]
        assert [p.request.address for p in store.pending_requests(limit=1)] == ["put"]
        store.update_run("c", status="sealed")
        assert [p.run.run_id for p in store.pending_requests()] == ["a"]
    finally:
        store.close()


def test_the_query_reads_the_index_of_open_requests(tmp_path: Path) -> None:
    import sqlite3

    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    store.close()
    conn = sqlite3.connect(tmp_path / "runs.sqlite")
    try:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT r.cursor FROM requests q INDEXED BY requests_waiting"
            " JOIN runs r ON r.run_id = q.run_id WHERE q.state = 'open' AND q.closed = 0"
            " AND q.ord > 0 AND r.status != 'sealed' ORDER BY q.ord LIMIT 50"
        ).fetchall()
    finally:
        conn.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert "requests_waiting" in text
    assert "SCAN r" not in text and "SCAN runs" not in text
    assert "TEMP B-TREE" not in text  # the index gives the order: no sort of all open requests


def _waiting(path: Path) -> list[tuple[str, str]]:
    """What the index of waiting requests holds (run, address), read from the file."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return conn.execute(
            "SELECT run_id, address FROM requests INDEXED BY requests_waiting"
            " WHERE state = 'open' AND closed = 0 ORDER BY ord"
        ).fetchall()
    finally:
        conn.close()


def test_a_seal_takes_its_unanswered_requests_out_of_the_index(tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    try:
        _run(store, "a", "put", "post", status="needs_approval")
        _run(store, "b", "put", status="needs_approval")
        store.record_decisions("a", {"post": {"approved": True}})
        store.update_run("a", status="sealed", outcome="declined")
        assert [p.run.run_id for p in store.pending_requests()] == ["b"]
        states = {(r.address, r.state) for r in store.requests("a")}
        assert states == {("put", "open"), ("post", "decided")}  # the record is unchanged
    finally:
        store.close()
    assert _waiting(tmp_path / "runs.sqlite") == [("b", "put")]


def test_a_version_7_store_migrates_and_lists_what_waits(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    _run(store, "sealed", "put", status="sealed")
    _run(store, "paused", "put", "ask", status="needs_approval")
    store.close()
    # the file as version 7 left it: no closed column, the index of every open request
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX requests_waiting")
    conn.execute("ALTER TABLE requests DROP COLUMN closed")
    conn.execute("CREATE INDEX requests_open ON requests (ord) WHERE state = 'open'")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    again = SQLiteRunStore(path)
    try:
        got = [(p.run.run_id, p.request.address) for p in again.pending_requests()]
        assert got == [("paused", "put"), ("paused", "ask")]
        _run(again, "later", "put", status="needs_approval")
        again.update_run("paused", status="sealed")
        assert [p.run.run_id for p in again.pending_requests()] == ["later"]
    finally:
        again.close()
    assert _waiting(path) == [("later", "put")]
    conn = sqlite3.connect(path)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "requests_open" not in names
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    finally:
        conn.close()


def test_a_page_of_events_reads_the_primary_key_from_its_cursor(tmp_path: Path) -> None:
    import sqlite3

    SQLiteRunStore(tmp_path / "runs.sqlite").close()
    conn = sqlite3.connect(tmp_path / "runs.sqlite")
    try:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT seq, at, kind, body FROM events WHERE run_id = ?"
            " AND seq > ? ORDER BY seq LIMIT ?",
            ("r", 10, 5),
        ).fetchall()
    finally:
        conn.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert "run_id=? AND seq>?" in text, text  # a search from the cursor, not a scan
    assert "TEMP B-TREE" not in text

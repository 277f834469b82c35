"""RunStore.pending_requests on SQLite: open requests of runs not sealed, in the order first
asked, through the index of open requests (a sealed run's leftover request is never listed)."""

from __future__ import annotations

from pathlib import Path

from proctor.runtime.records.runs import RequestRecord, RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore


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
            "EXPLAIN QUERY PLAN SELECT r.cursor FROM requests q INDEXED BY requests_open"
            " JOIN runs r ON r.run_id = q.run_id WHERE q.state = 'open' AND q.ord > 0"
            " AND r.status != 'sealed' ORDER BY q.ord LIMIT 50"
        ).fetchall()
    finally:
        conn.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert "requests_open" in text
    assert "SCAN r" not in text and "SCAN runs" not in text
    assert "TEMP B-TREE" not in text  # the index gives the order: no sort of all open requests

"""RunStore.pending_requests on SQLite: open requests of runs not sealed, oldest run first,
through the index of unsealed runs (a sealed run's leftover request is never listed)."""

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


def test_the_query_reads_the_index_of_unsealed_runs(tmp_path: Path) -> None:
    import sqlite3

    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    store.close()
    conn = sqlite3.connect(tmp_path / "runs.sqlite")
    try:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT r.cursor FROM runs r INDEXED BY runs_unsealed"
            " CROSS JOIN requests q ON q.run_id = r.run_id WHERE r.status != 'sealed'"
            " AND q.state = 'open' ORDER BY r.cursor, q.ord"
        ).fetchall()
    finally:
        conn.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert "runs_unsealed" in text
    assert "SCAN q" not in text and "SCAN requests" not in text

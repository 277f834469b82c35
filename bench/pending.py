"""``proctor pending``'s store query: the time to list open requests does not grow with the
number of sealed runs (and their requests) already in the store; and a page of a run's events
(``run.read``, ``history RUN --after``) does not grow with the events before it.

    .venv/bin/python bench/pending.py [--rounds N] [--database-url postgresql://...]

Builds SQLite stores (or, with ``--database-url``, two fresh PostgreSQL schemas, dropped after)
with 1,000 and 20,000 sealed runs (each with a request it never answered) beside the same 5
paused runs (on PostgreSQL then ``VACUUM ANALYZE``d, as autovacuum leaves a table: each
seal's update leaves a dead entry in the index until a vacuum), and times
``pending_requests()`` on each; then times the last 50 events of a
run holding 1,000 and of one holding 20,000 (``events(after=, limit=)``). Prints median/p95 and
each ratio (flat is 1.0; the yardstick is the small store, timed in the same run).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from _timing import measure
from proctor.runtime.records.runs import RequestRecord, RunRecord, RunStore
from proctor.runtime.records.sqlite import SQLiteRunStore


def _schema(url: str, name: str) -> Any:
    """A PostgreSQL run store in a fresh schema ``name`` (dropped by :func:`_drop`)."""
    from urllib.parse import quote

    import psycopg

    from proctor.runtime.records.postgres import PostgresRunStore

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in url else "?"
    return PostgresRunStore(f"{url}{sep}options={quote(f'-csearch_path={name}')}")


def _drop(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def build(store: RunStore, sealed: int) -> RunStore:
    with store.transaction():
        for n in range(sealed + 5):
            run_id = f"run{n:08d}"
            store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))
            body = {"kind": "approval", "address": "put", "n": n}
            store.put_request(RequestRecord(run_id, "put", "approval", f"sha256:{n:064x}", body))
            if n < sealed:  # sealed with its request left open: the worst case for the query
                store.update_run(run_id, status="sealed", outcome="declined")
            else:
                store.update_run(run_id, status="needs_approval")
        for n in range(sealed):  # a run with as many events as the store has sealed runs
            store.append_event("long", "step_settled", {"n": n})
    return store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--database-url", default="", help="PostgreSQL instead of SQLite")
    args = parser.parse_args()
    url = args.database_url
    names = (f"bench_pending_{os.getpid()}_small", f"bench_pending_{os.getpid()}_large")
    with tempfile.TemporaryDirectory() as tmp:
        if url:
            print("store: PostgreSQL (fresh schemas)")
            small, large = _schema(url, names[0]), _schema(url, names[1])
        else:
            print("store: SQLite")
            small = SQLiteRunStore(Path(tmp) / "small.sqlite")
            large = SQLiteRunStore(Path(tmp) / "large.sqlite")
        try:
            build(small, 1_000)
            build(large, 20_000)
            if url:  # what autovacuum leaves: a seal's update leaves a dead index entry
                for store in (small, large):
                    with store.connection() as conn:  # type: ignore[attr-defined]
                        conn.execute("VACUUM ANALYZE")
            assert len(small.pending_requests()) == len(large.pending_requests()) == 5
            a = measure("pending_requests, 1,000 sealed runs", small.pending_requests, args.rounds)
            b = measure("pending_requests, 20,000 sealed runs", large.pending_requests, args.rounds)
            print(f"ratio 20,000 / 1,000 runs: {b / a:.2f} (flat is 1.0)")
            c = measure(
                "last 50 events of 1,000",
                lambda: small.events("long", after=950, limit=50),
                args.rounds,
            )
            d = measure(
                "last 50 events of 20,000",
                lambda: large.events("long", after=19_950, limit=50),
                args.rounds,
            )
            print(f"ratio 20,000 / 1,000 events: {d / c:.2f} (flat is 1.0)")
        finally:
            small.close()
            large.close()
            if url:
                for name in names:
                    _drop(url, name)


if __name__ == "__main__":
    main()

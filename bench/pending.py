"""``proctor pending``'s store query: the time to list open requests does not grow with the
number of sealed runs (and their requests) already in the store.

    .venv/bin/python bench/pending.py [--rounds N]

Builds SQLite stores with 1,000 and 20,000 sealed runs (each with a request it never
answered) beside the same 5 paused runs, and times ``pending_requests()`` on each; prints
median/p95 and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _timing import measure
from proctor.runtime.records.runs import RequestRecord, RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore


def build(folder: Path, sealed: int) -> SQLiteRunStore:
    store = SQLiteRunStore(folder / f"runs-{sealed}.sqlite")
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
    return store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small, large = build(Path(tmp), 1_000), build(Path(tmp), 20_000)
        try:
            assert len(small.pending_requests()) == len(large.pending_requests()) == 5
            a = measure("pending_requests, 1,000 sealed runs", small.pending_requests, args.rounds)
            b = measure("pending_requests, 20,000 sealed runs", large.pending_requests, args.rounds)
            print(f"ratio 20,000 / 1,000 runs: {b / a:.2f} (flat is 1.0)")
        finally:
            small.close()
            large.close()


if __name__ == "__main__":
    main()

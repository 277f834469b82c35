#!/usr/bin/env python3
"""What checking the run store costs a command. ``PRAGMA quick_check`` scans the whole file;
it runs on a process's first open unless the file is still as the mark of its last passing
check (or proctor's own last checkpoint after one) records it (``store_file``).

For stores of several sizes (runs with one started event and ~2 KiB of recorded data each,
about what a short run leaves), it prints, timed inside a fresh subprocess of the
virtualenv's Python (``SQLiteRunStore(path)``):

  marked       the first open of a store proctor closed last: what a command pays
  changed      the first open after something else wrote the file (its mark removed, as a
               foreign write leaves it unmatched): the scan runs
  again        a second open of the same file in that process: the peer
  check        ``PRAGMA quick_check`` alone on a raw connection

Median and p95 over ``--repeat`` subprocesses, in milliseconds, and the file size.

    .venv/bin/python bench/store_open.py [--runs 1000,10000,50000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sqlite3, sys, time
from pathlib import Path
from proctor.runtime.records.sqlite import SQLiteRunStore
path = Path(sys.argv[1])
t0 = time.perf_counter_ns(); first = SQLiteRunStore(path); t1 = time.perf_counter_ns()
again = SQLiteRunStore(path); t2 = time.perf_counter_ns()
conn = sqlite3.connect(path); t3 = time.perf_counter_ns()
conn.execute("PRAGMA quick_check").fetchall(); t4 = time.perf_counter_ns()
conn.close()
for c in (again, first):
    c.close()
print(json.dumps({"first": t1 - t0, "again": t2 - t1, "check": t4 - t3}))
"""


def build(path: Path, runs: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from proctor.runtime.records.runs import RunRecord
    from proctor.runtime.records.sqlite import SQLiteRunStore

    store = SQLiteRunStore(path)
    pad = "x" * 2048
    with store.transaction():
        for n in range(runs):
            run_id = f"run-{n:07d}"
            store.create_run(RunRecord(run_id=run_id, skill="s", method="m", data={"pad": pad}))
            store.append_event(run_id, "started", {"n": n})
    store.close()


def stats(samples: list[int]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "median_ms": round(statistics.median(s) / 1e6, 2),
        "p95_ms": round(s[max(0, int(len(s) * 0.95) - 1)] / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="1000,10000,50000")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    print("measured under load unless the machine was quiet")
    with tempfile.TemporaryDirectory(prefix="proctor-bench-store-") as tmp:
        for runs in (int(n) for n in args.runs.split(",")):
            path = Path(tmp) / f"runs-{runs}.sqlite"
            build(path, runs)
            mark = path.with_name(path.name + "-checked")
            samples: dict[str, list[int]] = {"marked": [], "changed": [], "again": [], "check": []}
            for n in range(2 * args.repeat):
                changed = n % 2 == 1  # taking turns, so both see the same load
                if changed:
                    mark.unlink(missing_ok=True)
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(path)],
                    env=env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                got = json.loads(out.stdout)
                samples["changed" if changed else "marked"].append(got["first"])
                samples["again"].append(got["again"])
                samples["check"].append(got["check"])
            size = path.stat().st_size / 2**20
            row = {key: stats(values) for key, values in samples.items()}
            print(
                f"{runs:>7} runs ({size:6.1f} MiB): "
                + ", ".join(
                    f"{key} {row[key]['median_ms']} ms (p95 {row[key]['p95_ms']})"
                    for key in ("marked", "changed", "again", "check")
                )
            )


if __name__ == "__main__":
    main()

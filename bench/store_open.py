#!/usr/bin/env python3
"""What checking the run store costs: opening it the first time in a process runs
``PRAGMA quick_check`` (a scan of the whole file), later opens in that process do not.

For stores of several sizes (runs with one started event and ~2 KiB of recorded data each,
about what a short run leaves), it prints:

  first open   a fresh subprocess of the virtualenv's Python opening the store once
               (``SQLiteRunStore(path)``, quick_check included), timed inside that process
  again        a second open of the same file in that process (no quick_check): the peer
  check        ``PRAGMA quick_check`` alone on a raw connection (what the first open adds)

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
for c in (first, again):
    c.close()
conn.close()
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
            samples: dict[str, list[int]] = {"first": [], "again": [], "check": []}
            for _ in range(args.repeat):
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(path)],
                    env=env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                for key, value in json.loads(out.stdout).items():
                    samples[key].append(value)
            size = path.stat().st_size / 2**20
            row = {key: stats(values) for key, values in samples.items()}
            print(
                f"{runs:>7} runs ({size:6.1f} MiB): first open {row['first']['median_ms']} ms"
                f" (p95 {row['first']['p95_ms']}), again {row['again']['median_ms']} ms"
                f" (p95 {row['again']['p95_ms']}), quick_check alone"
                f" {row['check']['median_ms']} ms (p95 {row['check']['p95_ms']})"
            )


if __name__ == "__main__":
    main()

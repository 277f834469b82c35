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

Then (``--big N``, 1,000,000 by default; 0 skips it) the judged case: a store of N runs built
with direct inserts into the real schema (a run row with ~2.6 KiB of state, a step, a call with
its result and an event: ~4.6 KiB a run, what runs keep), and a store of 1,000 runs built the
same way. Each sample writes one byte of the file back as it was (an outside write: the mark
no longer matches) and times a command's first open and one read of the newest run, in a
fresh process; a store over ``store_check.INLINE_MAX`` is checked in bounded time there and
whole in a process of its own, which the bench waits for (the mark it writes) before the next
sample. Prints median/p95 and the ratio of the big store's open to the small one's.

    .venv/bin/python bench/store_open.py [--runs 1000,10000,50000] [--repeat 9] [--big N]
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


COMMAND = """
import json, sys, time
from pathlib import Path
from proctor.runtime.records.sqlite import SQLiteRunStore
t0 = time.perf_counter_ns()
store = SQLiteRunStore(Path(sys.argv[1]))
[newest] = store.list_runs(limit=1)
store.get_run(newest.run_id)
t1 = time.perf_counter_ns()
store.close()
print(json.dumps({"command": t1 - t0}))
"""


def build_direct(path: Path, runs: int) -> None:
    """``runs`` runs inserted straight into the real schema (made by ``SQLiteRunStore``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import sqlite3

    from proctor.runtime.records.sqlite import SQLiteRunStore

    SQLiteRunStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    state = json.dumps({"envelope": {"outputs": {"text": "x" * 1700}, "status": "sealed"}})
    step = json.dumps({"outcome": "completed", "outputs": {"n": 1, "text": "y" * 700}})
    result = json.dumps({"status": "completed", "output": {"content": "z" * 600}})
    stamp = "2026-01-01T00:00:00.000000+00:00"
    batch = 20_000
    for start in range(0, runs, batch):
        ids = [f"run-{n:08d}" for n in range(start, min(runs, start + batch))]
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO runs (run_id, skill, method, status, outcome, receipt_id, created_at,"
            " updated_at, data) VALUES (?, 's', 'm', 'sealed', 'completed', ?, ?, ?, ?)",
            ((r, "sha256:" + "a" * 64, stamp, stamp, state) for r in ids),
        )
        conn.executemany(
            "INSERT INTO steps (run_id, step_id, body) VALUES (?, 'read', ?)",
            ((r, step) for r in ids),
        )
        conn.executemany(
            "INSERT INTO calls (run_id, call_id, step_id, tool, state, args_digest, outcome,"
            " result) VALUES (?, 'read/1', 'read', 'fs.read', 'settled', ?, 'completed', ?)",
            ((r, "sha256:" + "b" * 64, result) for r in ids),
        )
        conn.executemany(
            "INSERT INTO events (run_id, seq, at, kind, body) VALUES (?, 1, ?, 'started', ?)",
            ((r, stamp, '{"n":1}') for r in ids),
        )
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def outside_write(path: Path) -> None:
    """One byte written back as it was: the file is the same, its times are not."""
    with open(path, "r+b") as handle:
        handle.seek(100)
        byte = handle.read(1)
        handle.seek(100)
        handle.write(byte)


def wait_for_full_check(path: Path) -> None:
    """Until a background full check of ``path`` (if one started) has marked it."""
    import fcntl
    import time

    mark = path.with_name(path.name + "-checked")
    lock = path.with_name(path.name + "-checking")
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if path.with_name(path.name + "-damaged").exists():
            raise SystemExit("the full check found damage in the bench's store")
        if mark.exists() and lock.exists():
            fd = os.open(lock, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # the checker holds it until it is done
            finally:
                os.close(fd)
            return
        time.sleep(0.2)
    raise SystemExit("the background full check did not finish in 15 minutes")


def big_store(runs: int, repeat: int, env: dict[str, str], tmp: Path) -> None:
    from proctor.runtime.records.store_check import INLINE_MAX

    paths = {}
    for count in (1_000, runs):
        paths[count] = tmp / f"direct-{count}.sqlite"
        build_direct(paths[count], count)
        subprocess.run(
            [sys.executable, "-c", COMMAND, str(paths[count])], env=env, check=True,
            capture_output=True,
        )  # fmt: skip
        wait_for_full_check(paths[count]) if paths[count].stat().st_size > INLINE_MAX else None
    samples: dict[int, list[int]] = {count: [] for count in paths}
    for _ in range(repeat):
        for count, path in paths.items():  # in turn: both see the same load
            outside_write(path)
            out = subprocess.run(
                [sys.executable, "-c", COMMAND, str(path)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            samples[count].append(json.loads(out.stdout)["command"])
            if path.stat().st_size > INLINE_MAX:
                wait_for_full_check(path)
    for count, path in paths.items():
        row = stats(samples[count])
        size = path.stat().st_size / 2**20
        print(
            f"{count:>9,} runs ({size:8.1f} MiB), first open after an outside write + one read:"
            f" median {row['median_ms']} ms (p95 {row['p95_ms']})"
        )
    ratio = statistics.median(samples[runs]) / statistics.median(samples[1_000])
    print(f"{runs:,} runs / 1,000 runs: {ratio:.2f}x (target <= 2x)")


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
    parser.add_argument("--big", type=int, default=1_000_000)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    print("measured under load unless the machine was quiet")
    with tempfile.TemporaryDirectory(prefix="proctor-bench-store-") as tmp:
        if args.big:
            big_store(args.big, args.repeat, env, Path(tmp))
        for runs in (int(n) for n in args.runs.split(",") if n):
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

#!/usr/bin/env python3
"""Peak memory of sealing a run, by the run's size: the seal alone, in a process of its own.

For each size a run is recorded straight into a fresh workspace's SQLite run store (no tool
runs: one step of C calls, or S steps of one call each), then another process opens the
workspace and seals it (``seal_run``, what a run's end and ``proctor resume`` do) and reports
its peak RSS (``wait4``) beside the first case's (the yardstick; target: within 1.5x), with
the seal's wall and CPU time and the envelope's trace length.

    .venv/bin/python bench/seal_memory.py [--calls 1000,200000,1000000] [--steps 100000]

A benchmark, not a test: it asserts nothing but that every seal completed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _launch import Launcher

T0 = datetime(2026, 1, 2, tzinfo=UTC)


def _session(root: Path) -> object:
    from proctor.receipts.signing import signer_from_seed
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    env = {"PROCTOR_HOME": str(root / ".home")}
    return Session(Workspace(root), environ=env, signer=signer_from_seed(bytes(range(32))),
                   clock=lambda: T0 + timedelta(days=1))  # fmt: skip


def record(root: Path, steps: int, calls: int) -> None:
    """Record a run of ``steps`` steps of ``calls`` calls each (settled, completed)."""
    from proctor.receipts.canonical import digest
    from proctor.runtime.records.runs import CallRecord, RunRecord

    (root / ".proctor").mkdir(parents=True)
    s: object = _session(root)
    store = s.store  # type: ignore[attr-defined]
    at = T0.isoformat()
    data = {"started_at": at, "inputs_digest": digest({}), "authority": {"effects": "allow"}}
    store.create_run(RunRecord(run_id="r", skill="long", method="main", data=data))
    n = 0
    for i in range(steps):
        for _ in range(calls):
            result = {"status": "completed", "started_at": at, "ended_at": at, "result": n}
            store.record_call(CallRecord("r", f"c{n}", f"s{i}", "echo", "settled",
                                         digest(n), result=result))  # fmt: skip
            n += 1
        store.settle_step("r", f"s{i}", {"outcome": "completed", "started_at": at, "ended_at": at})
    s.close()  # type: ignore[attr-defined]


def seal(root: Path) -> None:
    from proctor.runtime.engine.sealing import seal_run

    s: object = _session(root)
    rec = s.store.get_run("r")  # type: ignore[attr-defined]
    env = seal_run(s, rec, outcome="completed", seal_reason=None, result=None,  # type: ignore[arg-type]
                   refusal=None)  # fmt: skip
    print(env.status, len(env.trace), getattr(env, "trace_omitted", None))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", default="1000,200000,1000000")
    ap.add_argument("--steps", default="100000")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        what, steps, calls, root = args.one
        if what == "record":
            record(Path(root), int(steps), int(calls))
        else:
            seal(Path(root))
        return
    cases = [(1, int(c)) for c in args.calls.split(",") if c.strip()]
    cases += [(int(n), 1) for n in args.steps.split(",") if n.strip()]
    print(f"loadavg before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    base = None
    launcher = Launcher()
    for steps, calls in cases:
        root = Path(tempfile.mkdtemp(prefix="proctor-sealmem-"))
        try:
            me = [sys.executable, __file__, "--one"]
            subprocess.run([*me, "record", str(steps), str(calls), str(root)], check=True)
            # from the launcher, so the peak is the seal's own (see _launch)
            status, cpu, rss, wall, out = launcher.run([*me, "seal", "0", "0", str(root)])
            out = out.strip()
            if status != 0:
                raise SystemExit(f"the seal failed ({status})")
            base = rss if base is None else base
            label = f"{steps:,} step(s) x {calls:,} call(s)"
            print(f"{label:<30} seal: wall {wall:7.1f} s cpu {cpu:7.1f}"
                  f" s peak RSS {rss:7.1f} MiB = {rss / base:5.2f}x the first case's"
                  f" (yardstick) | {out}")  # fmt: skip
        finally:
            shutil.rmtree(root, ignore_errors=True)
    launcher.close()
    print(f"loadavg after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

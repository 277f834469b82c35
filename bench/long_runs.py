#!/usr/bin/env python3
"""Runs past the old 30,002-receipt ceiling, and the peak memory of verifying their trees.

Each case runs in its own process (peak RSS of the run, from ``wait4``), in a fresh temporary
workspace through the real ``proctor.Session`` (SQLite run store, audit log, durable receipt
packs, a signing key under a temporary PROCTOR_HOME), then its tree is verified in another
process (``verify_receipt``, as ``proctor verify`` does: signatures checked on every core) and
that process's peak RSS is printed beside the 1,000-step run's, with the ratio (target: every
tree within 1.5x of the 1,000-step run's):

  steps N   a skill of N tool steps (``echo`` and ``data.digest`` in turn), run to its seal
  calls C   one agent step whose managed turn (a scripted ``AgentDriver``) makes C ``echo``
            calls, sealed (one step committing C calls through segments)

``--synthetic`` builds the same trees with ``ReceiptWriter`` alone (what the seal writes, without
running anything), for a machine that cannot spend an hour on the runs.

    .venv/bin/python bench/long_runs.py [--steps 1000,100000] [--calls 1000000] [--synthetic]

A benchmark, not a test: it asserts nothing but that runs completed and trees verified.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from _launch import Launcher

HERE = Path(__file__).resolve().parent


def child(kind: str, n: int, root: Path, synthetic: bool) -> None:
    """In a child process: make the run (or its tree) and print its receipt id."""
    sys.path.insert(0, str(HERE))
    if synthetic:
        from datetime import UTC, datetime

        from proctor.receipts.canonical import digest
        from proctor.receipts.model import Subject
        from proctor.receipts.signing import signer_from_seed
        from proctor.receipts.writer import ChildList, ReceiptWriter
        from proctor.runtime.records.receipts import ReceiptStore

        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        signer = signer_from_seed(bytes(range(32)))
        (root / "key.hex").write_text(signer.public_key.raw.hex())
        w = ReceiptWriter(ReceiptStore(root / "receipts"), signer, clock=lambda: t0, batch=4096)
        steps, calls = (n, 1) if kind == "steps" else (1, n)
        run = ChildList(w, Subject("long", None, "main"), started_at=t0, ended_at=t0)
        for i in range(steps):
            sub = Subject("long", None, "main", f"s{i}")
            made = ChildList(w, sub, started_at=t0, ended_at=t0)
            for j in range(calls):
                made.add(
                    w.call(
                        Subject("long", None, "main", f"s{i}", "echo"),
                        outcome="completed",
                        started_at=t0,
                        inputs_digest=digest([i, j]),
                        outputs_digest=digest([i, j]),
                    )
                )
            run.add(w.step(sub, outcome="completed", started_at=t0, children=made.refs()))
        ref = w.run(Subject("long", None, "main"), outcome="completed", started_at=t0,
                    children=run.refs())  # fmt: skip
        print(ref.receipt_id)
        return
    import long_run
    from proctor.runtime.home.keys import trusted_local_keys

    if kind == "steps":
        ws = long_run.workspace("long", long_run.steps_yaml(n))
        s = long_run.session(ws)
        env = s.run("long", cwd=ws)
    else:
        ws = long_run.workspace("echoes", long_run.AGENT_YAML)
        agent = _Echoes(n)
        s = long_run.session(ws, agent_driver=agent)
        env = s.run("echoes", cwd=ws)
    assert env.status == "sealed" and env.outcome == "completed", env.refusal
    (key,) = trusted_local_keys({"PROCTOR_HOME": str(ws / ".home")})
    (root / "key.hex").write_text(key.raw.hex())
    s.close()
    shutil.move(str(ws / ".proctor" / "receipts"), str(root / "receipts"))
    shutil.rmtree(ws, ignore_errors=True)
    print(env.receipt_id)


class _Echoes:
    """A managed agent that makes ``count`` echo calls and keeps nothing per call (so the run's
    peak is proctor's, not the benchmark's)."""

    def __init__(self, count: int) -> None:
        self.count = count

    def drive_turn(self, turn: object, call: object) -> dict[str, int]:
        from proctor.runtime.admission.governor import CallSpec

        for i in range(self.count):
            outcome = call(CallSpec("echo", {"text": f"call {i}"}, frozenset(), reason="bench"))  # type: ignore[operator]
            if not outcome.ok:
                raise SystemExit(f"call {i} failed: {outcome.error}")
        return {"calls": self.count}


VERIFY = """
import sys
from proctor.receipts.signing import PublicKey
from proctor.runtime.records.verify_folder import verify_receipt
key = PublicKey.from_raw(bytes.fromhex(open(sys.argv[3]).read()))
r = verify_receipt(sys.argv[1], receipts_dir=sys.argv[2], public_key=key)
print(r.status, r.reason, r.receipts)
"""


def measured(launcher: Launcher, argv: list[str]) -> tuple[str, float, float, float]:
    """Run ``argv`` from ``launcher`` (so its peak is its own, see ``_launch``); its stdout,
    peak RSS (MiB), CPU and wall seconds."""
    code, cpu, rss, wall, out = launcher.run(argv)
    if code != 0:
        raise SystemExit(f"{argv[:4]} failed ({code})")
    return out.strip(), rss, cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default="1000,100000")
    ap.add_argument("--calls", default="1000000", help="calls of the managed turn (0: none)")
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        child(args.one[0], int(args.one[1]), Path(args.one[2]), args.synthetic)
        return
    cases = [("steps", int(n)) for n in args.steps.split(",") if n.strip()]
    cases += [("calls", int(n)) for n in args.calls.split(",") if n.strip() and int(n)]
    print(f"loadavg before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus;"
          f" {'synthetic trees' if args.synthetic else 'real runs'}")  # fmt: skip
    with Launcher() as launcher:  # while this process is small
        _cases(launcher, cases, args.synthetic)
    print(f"loadavg after: {os.getloadavg()[0]:.2f}")


def _cases(launcher: Launcher, cases: list[tuple[str, int]], synthetic: bool) -> None:
    base: float | None = None
    for kind, n in cases:
        root = Path(tempfile.mkdtemp(prefix="proctor-longs-"))
        try:
            flag = ["--synthetic"] if synthetic else []
            made = [sys.executable, __file__, *flag, "--one", kind, str(n), str(root)]
            rid, run_rss, run_cpu, run_wall = measured(launcher, made)
            rid = rid.splitlines()[-1]
            check = [sys.executable, "-c", VERIFY, rid, str(root / "receipts"),
                     str(root / "key.hex")]  # fmt: skip
            result, rss, cpu, wall = measured(launcher, check)
            base = rss if base is None else base
            label = f"{n:,} {'steps' if kind == 'steps' else 'calls in one turn'}"
            print(
                f"{label:<28} run: wall {run_wall:8.1f} s cpu {run_cpu:8.1f} s peak {run_rss:7.1f}"
                f" MiB | verify: {result}; wall {wall:6.1f} s cpu {cpu:6.1f} s"
                f" peak RSS {rss:6.1f} MiB = {rss / base:4.2f}x the first case's (yardstick)"
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

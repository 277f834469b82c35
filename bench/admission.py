#!/usr/bin/env python3
"""Per-call overhead of proctor's full admission path, beside three peers measured in the same run.

What one timed call is: ``Governor.call`` as ``proctor run`` uses it, with the shipped policies
loaded, the audit line appended and flushed, and the call recorded in the SQLite run store
(one commit per call; reads commit with their step record). Paths:

  echo            the in-memory echo tool, governed
  fs.read 4KiB    fs.read of a 4 KiB prose file (containment, sensitive-content check, digest,
                  sanitizer over the whole content), governed
  fs.read 4KiB code  the same for a 4 KiB Python source file (the sanitizer's slow case)
  fs.read 4KiB deep  the prose file four folders down (containment walks each component
                  through a folder descriptor: the per-component cost)
  parts           the same echo call broken into its parts (policy only, canonical digest,
                  audit line, store commit), to say which part dominates

Also cold start of ``proctor --help`` and of the hello-world run (median of 10, subprocesses of
the virtualenv's own ``proctor`` script, never a version-manager shim).

Peers (each in its own virtualenv under .peers/, see ../shared/peers/README.md) are run as
subprocesses when present; their medians are printed beside ours with the ratios.

    .venv/bin/python bench/admission.py [--iters 5000] [--skip-peers]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT.parent / "shared" / "peers"


def stats(samples_ns: list[int]) -> dict[str, float]:
    s = sorted(samples_ns)
    return {
        "median_us": round(statistics.median(s) / 1000, 1),
        "p95_us": round(s[int(len(s) * 0.95) - 1] / 1000, 1),
    }


def governed(iters: int, warmup: int) -> dict[str, dict[str, float]]:
    from proctor.core.authority import Authority
    from proctor.policy import evaluate
    from proctor.policy.guards import GuardContext
    from proctor.receipts.canonical import digest
    from proctor.receipts.signing import signer_from_seed
    from proctor.runtime.admission.governor import CallSpec, Governor
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.runs import CallRecord, RunRecord

    tmp = Path(tempfile.mkdtemp(prefix="proctor-bench-"))
    (tmp / ".proctor").mkdir()
    prose = ("The quick brown fox jumps over the lazy dog. " * 100)[:4096]
    (tmp / "notes.txt").write_text(prose)
    (tmp / "a" / "b" / "c" / "d").mkdir(parents=True)
    (tmp / "a" / "b" / "c" / "d" / "notes.txt").write_text(prose)
    code_text = (ROOT / "src/proctor/runtime/admission/governor.py").read_text()[:4096]
    (tmp / "mod.py").write_text(code_text)
    env = dict(os.environ)
    env.pop("PROCTOR_AUDIT_LOG", None)
    session = Session(Workspace(tmp), environ=env, signer=signer_from_seed(b"\x01" * 32))
    run_id = "bench-run"
    session.store.create_run(RunRecord(run_id=run_id, skill="bench", method="m"))
    # The governor a run builds (see RunDriver.governor): shipped policies, the run store,
    # the audit log and the sanitizer; no receipt or write budget, as the bench makes more
    # calls than one run may.
    policies, guards, _ = session.policy()
    from proctor.runtime.boundary.sanitize import Sanitizer

    governor = Governor(
        run_id=run_id,
        workspace=session.workspace,
        store=session.store,
        tools=session.tools,
        policies=policies,
        guards=guards,
        audit=session.audit,
        sanitizer=Sanitizer(),
        authority=Authority(),
        directive_id="bench",
        clock=session.clock,
    )
    out: dict[str, dict[str, float]] = {}

    def bench(label: str, tool: str, args: dict[str, object]) -> None:
        allowance = frozenset({tool})
        samples = []
        for i in range(warmup + iters):
            spec = CallSpec(tool=tool, args=args, allowance=allowance, step_id="s", step_index=0)
            t0 = time.perf_counter_ns()
            outcome = governor.call(spec)
            t1 = time.perf_counter_ns()
            if not outcome.ok:
                raise SystemExit(f"{label}: call failed: {outcome.error}")
            if i >= warmup:
                samples.append(t1 - t0)
            governor.history.clear()
        out[label] = stats(samples)

    bench("echo", "echo", {"text": "hello"})
    bench("fs.read 4KiB prose", "fs.read", {"path": "notes.txt"})
    bench("fs.read 4KiB code", "fs.read", {"path": "mod.py"})
    bench("fs.read 4KiB deep", "fs.read", {"path": "a/b/c/d/notes.txt"})

    # parts of the echo path
    ctx = GuardContext("echo", {"text": "hello"}, {"text": "hello"}, "", "hello-world", ())
    parts: dict[str, list[int]] = {"policy": [], "digest": [], "audit": [], "store": []}
    for i in range(warmup + iters):
        t0 = time.perf_counter_ns()
        evaluate(policies, ctx, guards)
        t1 = time.perf_counter_ns()
        digest({"text": "hello"})
        t2 = time.perf_counter_ns()
        session.audit.emit("tool_call", run_id=run_id, step_index=0, tool="echo")
        t3 = time.perf_counter_ns()
        session.store.record_call(
            CallRecord(
                run_id,
                f"p/{i}",
                "p",
                "echo",
                "settled",
                "sha256:0",
                "completed",
                {"text": "hello"},
            )
        )
        t4 = time.perf_counter_ns()
        if i >= warmup:
            parts["policy"].append(t1 - t0)
            parts["digest"].append(t2 - t1)
            parts["audit"].append(t3 - t2)
            parts["store"].append(t4 - t3)
    for name, samples in parts.items():
        out[f"part: {name}"] = stats(samples)
    session.close()
    return out


def cold_start(runs: int) -> dict[str, dict[str, float]]:
    proctor = ROOT / ".venv" / "bin" / "proctor"
    tmp = Path(tempfile.mkdtemp(prefix="proctor-cold-"))
    (tmp / ".proctor").mkdir()
    env = dict(os.environ, PROCTOR_HOME=str(tmp / "home"))
    # an installed copy has its bytecode compiled; let the warm-up run write it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = {}
    for label, argv in (
        ("proctor --help", [str(proctor), "--help"]),
        (
            "hello-world run",
            [str(proctor), "run", str(ROOT / "examples/hello-world"), "-i", "message=hi"],
        ),
    ):
        warm = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)
        if warm.returncode != 0:
            raise SystemExit(f"{label} failed: {warm.stdout[-800:]}{warm.stderr[-800:]}")
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            subprocess.run(argv, cwd=tmp, env=env, capture_output=True, check=True)
            samples.append(time.perf_counter_ns() - t0)
        s = sorted(samples)
        out[label] = {
            "median_ms": round(statistics.median(s) / 1e6, 1),
            "p95_ms": round(s[-1] / 1e6, 1)
            if runs < 20
            else round(s[int(runs * 0.95) - 1] / 1e6, 1),
        }
    return out


def peer(name: str, argv: list[str]) -> dict[str, object] | None:
    python = ROOT / ".peers" / name / "bin" / "python"
    if not python.exists() or not PEERS_DIR.is_dir():
        return None
    proc = subprocess.run([str(python), *argv], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"peer {name} failed: {proc.stderr[-500:]}", file=sys.stderr)
        return None
    last = [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
    return json.loads(last)  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--cold-runs", type=int, default=10)
    ap.add_argument("--skip-peers", action="store_true")
    args = ap.parse_args()
    print(f"loadavg before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    ours = governed(args.iters, args.warmup)
    print(f"proctor governed calls ({args.iters} timed, {args.warmup} warm-up), µs:")
    for label, r in ours.items():
        print(f"  {label:24s} median {r['median_us']:8.1f}  p95 {r['p95_us']:8.1f}")
    cold = cold_start(args.cold_runs)
    print(f"cold start (median of {args.cold_runs}), ms:")
    for label, r in cold.items():
        print(f"  {label:24s} median {r['median_ms']:8.1f}  p95 {r['p95_ms']:8.1f}")
    result: dict[str, object] = {"proctor": ours, "cold_start": cold}
    if not args.skip_peers:
        peers: dict[str, float] = {}
        tg = peer("tollgate", [str(PEERS_DIR / "tollgate_bench.py")])
        if tg:
            peers["tollgate governed_jsonl"] = float(tg["median_us"]["governed_jsonl"])  # type: ignore[index]
        agt = peer(
            "agt",
            ["-W", "ignore", str(PEERS_DIR / "agt_bench.py"), "--iters", "5000", "--warmup", "500"],
        )
        if agt:
            med = agt["median_us"]
            for key in med:  # type: ignore[union-attr]
                if "file" in key or "sink" in key:
                    peers[f"agt {key}"] = float(med[key])  # type: ignore[index]
        auro = peer("auro", [str(PEERS_DIR / "auro_bench.py"), "--skip-e2e", "--skip-mcp"])
        if auro:
            for key, value in auro["execute"].items():  # type: ignore[union-attr]
                if isinstance(value, dict) and "median_us" in value:
                    peers[f"auro {key}"] = float(value["median_us"])
        read = ours["fs.read 4KiB prose"]["median_us"]
        echo = ours["echo"]["median_us"]
        print("peers (median µs) and ratio peer / proctor (> 1 means proctor is faster):")
        for key, value in peers.items():
            mine = read if "read" in key else echo
            print(f"  {key:48s} {value:8.1f}   x{value / mine:5.2f} vs proctor {mine:.1f}")
        result["peers_median_us"] = peers
    print(json.dumps(result))


if __name__ == "__main__":
    main()

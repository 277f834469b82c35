#!/usr/bin/env python3
"""Long runs: does the cost of a step and of a call stay flat as a run grows?

Every figure goes through the real ``proctor.Session`` in a fresh temporary workspace (SQLite
run store, audit log, shipped policies, receipts with fsync, a signing key under a temporary
PROCTOR_HOME):

  steps N        a generated skill with N tool steps (``echo`` and ``data.digest`` in turn),
                 run by ``Session.run`` to its seal (a run under 1,000 steps is repeated
                 until about 1,000 steps are sampled; wall and seal are then medians). Per
                 step: the time from one step's start to the next one's (each step's recorded
                 ``started_at``; the last step ends at its ``ended_at``), so it holds the
                 whole step: reconciliation, the call, the durable step record. Per call:
                 each call's own recorded time (admission to result). Also the wall time of
                 the run and its seal (from the last step's end to the envelope: every
                 receipt written and synced).
  managed calls  one agent step whose managed turn (a scripted ``AgentDriver``, the seam a
                 model client uses) makes C ``echo`` calls; each call timed around the
                 driver's callback (admission, tool, store, audit). The tree is 1 + 1 + C
                 receipts (C = 30,000 is the receipt bound's own case).
  turn calls     one agent step paused ``needs_agent``; T calls made one by one through
                 ``Session.turn_call`` (what the MCP turn tools do: each call a new driver that
                 takes the lease, reloads the package and rebuilds the governor), then the
                 turn answered and the run sealed.
  writes         one agent step whose managed turn makes W ``fs.write`` calls, each to a new
                 path (under ``effects: allow`` and a write budget above W), so the shipped write
                 guards judge every call against the run's history.
  resumes        a run of 1,050 echo steps (its trace past its 1,000-entry limit) then R ask
                 steps, each approved by ``Session.resume``: per resume, the decision recorded,
                 the drive to the next ask and its pause.

Each section prints median and p95 (ms), and the median of the first and last tenth, whose
ratio says whether cost grows with the run. An unreported 20-step run goes first (imports and
first-use caches), so the smallest run measures steps, not start-up. A run still going after
``--cap`` seconds is stopped before its next step (the session's stop event) and reported on
the steps it did.

    .venv/bin/python bench/long_run.py [--steps 10,1000,10000] [--calls 30000]
        [--turn-calls 3000] [--writes 3000] [--resumes 300] [--cap 600] [--warmup 20] [--json]

A benchmark, not a test: it asserts nothing but that runs completed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

SKILL_MD = "---\nname: {name}\ndescription: A long run for the benchmark.\n---\n"
AGENT_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: turn
        agent:
          instructions: Echo many times.
          calls: {tools: [echo]}
          output:
            type: object
            properties: {calls: {type: integer}}
            required: [calls]
"""


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def show(label: str, seconds: list[float]) -> dict[str, float]:
    """Print and return median/p95 and the first/last tenth's medians, in ms."""
    ms = [v * 1000 for v in seconds]
    tenth = max(1, len(ms) // 10)
    row = {
        "median_ms": round(statistics.median(ms), 3),
        "p95_ms": round(p95(ms), 3),
        "first_tenth_ms": round(statistics.median(ms[:tenth]), 3),
        "last_tenth_ms": round(statistics.median(ms[-tenth:]), 3),
        "n": len(ms),
    }
    growth = row["last_tenth_ms"] / row["first_tenth_ms"] if row["first_tenth_ms"] else 0.0
    print(
        f"  {label:<28} median {row['median_ms']:8.3f}  p95 {row['p95_ms']:8.3f}"
        f"   first/last tenth {row['first_tenth_ms']:7.3f} / {row['last_tenth_ms']:7.3f}"
        f" (x{growth:.2f})  n={len(ms)}"
    )
    return row


def workspace(name: str, run_yaml: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix="proctor-long-"))
    (root / ".proctor").mkdir()
    folder = root / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name))
    (folder / "run.yaml").write_text(run_yaml)
    return root


def steps_yaml(n: int) -> str:
    lines = ["minimum_proctor: 0.1.0", "methods:", "  main:", "    steps:"]
    for i in range(n):
        if i % 2:
            lines += [
                f"      - id: s{i}",
                "        tool: data.digest",
                f"        inputs: {{value: {i}}}",
            ]
        else:
            lines += [
                f"      - id: s{i}",
                "        tool: echo",
                f"        inputs: {{text: step {i}}}",
            ]
    return "\n".join(lines) + "\n"


def session(root: Path, **kwargs: Any) -> Any:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(root / ".home")
    return Session(Workspace(root), environ=env, **kwargs)


def capped(cap: float) -> tuple[threading.Event, threading.Timer]:
    stop = threading.Event()
    timer = threading.Timer(cap, stop.set)
    timer.daemon = True
    timer.start()
    return stop, timer


def _t(value: Any) -> float:
    return datetime.fromisoformat(str(value)).timestamp()


def one_run(n: int, cap: float) -> dict[str, Any]:
    """Run the n-step skill once; its per-step and per-call samples, wall and seal time."""
    from proctor.errors import ProctorError

    root = workspace("long", steps_yaml(n))
    s = session(root)
    stop, timer = capped(cap)
    started = time.perf_counter()
    sealed = True
    try:
        env = s.run("long", cwd=root, stop=stop)
        run_id = env.run_id or ""
        assert env.status == "sealed" and env.outcome == "completed", env.refusal
    except ProctorError as exc:  # stopped at the cap: report the steps it did
        if exc.code != "run_stopped":
            raise
        sealed = False
        run_id = str((exc.details or {}).get("run_id"))
    returned = time.perf_counter()
    returned_wall = time.time()
    timer.cancel()
    steps = list(s.store.step_records(run_id).values())
    calls = [c.result for c in s.store.calls(run_id)]
    s.close()
    shutil.rmtree(root, ignore_errors=True)
    starts = [_t(b["started_at"]) for b in steps]
    per_step = [b - a for a, b in itertools.pairwise(starts)]
    if steps:
        per_step.append(_t(steps[-1]["ended_at"]) - starts[-1])
    return {
        "settled": len(steps),
        "sealed": sealed,
        "wall": returned - started,
        "per_step": per_step,
        "per_call": [_t(c["ended_at"]) - _t(c["started_at"]) for c in calls],
        "seal": returned_wall - _t(steps[-1]["ended_at"]) if sealed and steps else None,
    }


def long_steps(n: int, cap: float) -> dict[str, Any]:
    """An n-step run; a short one is repeated until about 1,000 steps are sampled, so its
    median is as steady as a long run's (each repeat a fresh workspace)."""
    repeats = max(1, 1000 // n) if n < 1000 else 1
    runs = [one_run(n, cap) for _ in range(repeats)]
    sealed = all(r["sealed"] for r in runs)
    wall = statistics.median(r["wall"] for r in runs)
    state = "sealed" if sealed else f"stopped at the {cap:.0f} s cap"
    times = f" (median of {repeats} runs)" if repeats > 1 else ""
    settled = runs[0]["settled"]
    print(f"{n} steps: {settled} settled, {state}, wall {wall:.2f} s{times}")
    out: dict[str, Any] = {"steps": n, "runs": repeats, "settled": settled, "sealed": sealed}
    out["wall_s"] = wall
    out["per_step"] = show("per step", [v for r in runs for v in r["per_step"]])
    out["per_call"] = show("per call (recorded)", [v for r in runs for v in r["per_call"]])
    if sealed and settled:
        seal = statistics.median(r["seal"] for r in runs)
        out["seal_s"] = seal
        print(f"  {'seal (last step -> envelope)':<28} {seal * 1000:8.1f} ms")
    return out


def _sealed(drive: Callable[[], Any]) -> str | None:
    """Drive a run to its seal; the error a failed seal raised, or None when it sealed."""
    from proctor.errors import ProctorError

    try:
        env = drive()
    except ProctorError as exc:
        return f"{exc.code}: {exc.message}"
    assert env.status == "sealed" and env.outcome == "completed", env.refusal
    return None


class _Echoes:
    """A managed agent that makes ``count`` echo calls in its turn, timing each one."""

    def __init__(self, count: int, stop: threading.Event) -> None:
        self.count = count
        self.stop = stop
        self.times: list[float] = []

    def drive_turn(self, turn: dict[str, Any], call: Callable[[Any], Any]) -> dict[str, Any]:
        from proctor.runtime.admission.governor import CallSpec

        for i in range(self.count):
            if self.stop.is_set():
                break
            spec = CallSpec("echo", {"text": f"call {i}"}, frozenset(), reason="bench")
            t0 = time.perf_counter()
            outcome = call(spec)
            self.times.append(time.perf_counter() - t0)
            if not outcome.ok:
                raise SystemExit(f"call {i} failed: {outcome.error}")
        return {"calls": len(self.times)}


def managed_calls(count: int, cap: float) -> dict[str, Any]:
    root = workspace("echoes", AGENT_YAML)
    stop, timer = capped(cap)
    agent = _Echoes(count, stop)
    s = session(root, agent_driver=agent)
    started = time.perf_counter()
    failed = _sealed(lambda: s.run("echoes", cwd=root))
    wall = time.perf_counter() - started
    timer.cancel()
    s.close()
    shutil.rmtree(root, ignore_errors=True)
    done = len(agent.times)
    state = "all made" if done == count else f"stopped at the {cap:.0f} s cap"
    calls_s = sum(agent.times)
    state += f", seal FAILED: {failed}" if failed else ""
    print(f"{count} calls in one managed turn: {done} made, {state}, wall {wall:.2f} s")
    out: dict[str, Any] = {"calls": count, "made": done, "wall_s": wall}
    out["per_call"] = show("per call", agent.times)
    out["seal_s"] = wall - calls_s
    print(f"  {'rest of the run (seal etc.)':<28} {out['seal_s'] * 1000:8.1f} ms")
    return out


def turn_calls(count: int, cap: float) -> dict[str, Any]:
    root = workspace("turns", AGENT_YAML)
    s = session(root)
    started = time.perf_counter()
    env = s.run("turns", cwd=root)
    assert env.status == "needs_agent", env.status
    run_id = env.run_id or ""
    deadline = time.perf_counter() + cap
    times = []
    for i in range(count):
        if time.perf_counter() > deadline:
            break
        t0 = time.perf_counter()
        outcome = s.turn_call(run_id, "turn", "echo", {"text": f"call {i}"}, f"c{i}")
        times.append(time.perf_counter() - t0)
        if not outcome.ok:
            raise SystemExit(f"turn call {i} failed: {outcome.error}")
    digest = s.envelope(run_id).answers_template["answers"]["turn"]["request_digest"]  # type: ignore[index]
    answer = {"request_digest": digest, "value": {"calls": len(times)}}
    t0 = time.perf_counter()
    failed = _sealed(lambda: s.resume(run_id, {"answers": {"turn": answer}}))
    seal = time.perf_counter() - t0
    wall = time.perf_counter() - started
    s.close()
    shutil.rmtree(root, ignore_errors=True)
    state = "all made" if len(times) == count else f"stopped at the {cap:.0f} s cap"
    state += f", seal FAILED: {failed}" if failed else ""
    print(f"{count} calls through Session.turn_call: {len(times)} made, {state}, wall {wall:.2f} s")
    out: dict[str, Any] = {"calls": count, "made": len(times), "wall_s": wall}
    out["per_call"] = show("per turn call", times)
    out["resume_seal_s"] = seal
    print(f"  {'resume -> seal':<28} {seal * 1000:8.1f} ms")
    return out


class _Writes:
    """A managed agent that writes ``count`` new files in its turn, timing each call."""

    def __init__(self, count: int, stop: threading.Event) -> None:
        self.count = count
        self.stop = stop
        self.times: list[float] = []

    def drive_turn(self, turn: dict[str, Any], call: Callable[[Any], Any]) -> dict[str, Any]:
        from proctor.runtime.admission.governor import CallSpec

        for i in range(self.count):
            if self.stop.is_set():
                break
            args = {"path": f"out/f{i}.txt", "content": f"file {i}\n", "create": True}
            spec = CallSpec("fs.write", args, frozenset(), reason="bench")
            t0 = time.perf_counter()
            outcome = call(spec)
            self.times.append(time.perf_counter() - t0)
            if not outcome.ok:
                raise SystemExit(f"write {i} failed: {outcome.error}")
        return {"calls": len(self.times)}


def writes(count: int, cap: float) -> dict[str, Any]:
    from proctor.core.authority import parse_authority

    root = workspace("writes", AGENT_YAML.replace("tools: [echo]", "tools: [fs.write]"))
    stop, timer = capped(cap)
    agent = _Writes(count, stop)
    s = session(root, agent_driver=agent)
    s.environ["PROCTOR_WRITE_BUDGET"] = str(count + 1)
    allow = parse_authority({"effects": "allow", "reach": "workspace"})
    started = time.perf_counter()
    failed = _sealed(lambda: s.run("writes", cwd=root, authority=allow))
    wall = time.perf_counter() - started
    timer.cancel()
    s.close()
    shutil.rmtree(root, ignore_errors=True)
    state = "all made" if len(agent.times) == count else f"stopped at the {cap:.0f} s cap"
    state += f", seal FAILED: {failed}" if failed else ""
    print(
        f"{count} writes in one managed turn: {len(agent.times)} made, {state}, wall {wall:.2f} s"
    )
    return {"writes": count, "wall_s": wall, "per_call": show("per write", agent.times)}


def resumes(count: int, cap: float, prefix: int = 1050) -> dict[str, Any]:
    lines = ["minimum_proctor: 0.1.0", "methods:", "  main:", "    steps:"]
    for i in range(prefix):
        lines += [f"      - id: s{i}", "        tool: echo", f"        inputs: {{text: step {i}}}"]
    for i in range(count):
        lines += [f"      - id: a{i}", "        ask: {reason: go on?}"]
        lines += [
            f"      - id: e{i}",
            "        tool: echo",
            f"        inputs: {{text: $steps.s{i}.text}}",
        ]
    root = workspace("asks", "\n".join(lines) + "\n")
    s = session(root)
    env = s.run("asks", cwd=root)
    deadline = time.perf_counter() + cap
    times = []
    while env.status != "sealed" and time.perf_counter() < deadline:
        doc = json.loads(json.dumps(env.answers_template))
        for entry in doc.get("approvals", {}).values():
            entry.update({"approved": True, "reason": "bench"})
        t0 = time.perf_counter()
        env = s.resume(env.run_id or "", doc)
        times.append(time.perf_counter() - t0)
    s.close()
    shutil.rmtree(root, ignore_errors=True)
    state = "sealed" if env.status == "sealed" else f"stopped at the {cap:.0f} s cap"
    print(f"{count} resumes after {prefix} steps: {len(times)} made, {state}")
    return {"resumes": count, "per_resume": show("per resume", times[:-1] or times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default="10,1000,10000", help="step counts, comma-separated")
    ap.add_argument("--calls", type=int, default=30_000, help="calls of the managed turn (0: skip)")
    ap.add_argument(
        "--turn-calls", type=int, default=3_000, help="Session.turn_call calls (0: skip)"
    )
    ap.add_argument("--writes", type=int, default=0, help="fs.write calls of a turn (0: skip)")
    ap.add_argument("--resumes", type=int, default=0, help="ask steps resumed (0: skip)")
    ap.add_argument("--warmup", type=int, default=20, help="steps of an unreported first run")
    ap.add_argument("--cap", type=float, default=600.0, help="seconds before a run is stopped")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    args = ap.parse_args()
    load, cpus, version = os.getloadavg()[0], os.cpu_count(), sys.version.split()[0]
    print(f"loadavg before: {load:.2f} on {cpus} cpus (python {version})")
    result: dict[str, Any] = {"steps": []}
    if args.warmup:  # imports and first-use caches, so the 10-step figure is a step's cost
        one_run(args.warmup, args.cap)
    for n in (int(x) for x in args.steps.split(",") if x.strip()):
        result["steps"].append(long_steps(n, args.cap))
    if args.calls:
        result["managed"] = managed_calls(args.calls, args.cap)
    if args.turn_calls:
        result["turn_calls"] = turn_calls(args.turn_calls, args.cap)
    if args.writes:
        result["writes"] = writes(args.writes, args.cap)
    if args.resumes:
        result["resumes"] = resumes(args.resumes, args.cap)
    print(f"loadavg after: {os.getloadavg()[0]:.2f}")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()

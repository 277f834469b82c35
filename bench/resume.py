"""Resume figures: time from `proctor resume` to the next pause or seal, and pause/resume
throughput with many paused runs in one store.

    .venv/bin/python bench/resume.py [--runs 20] [--paused 200]

1. latency: a run with one approval is started (it pauses), then `proctor resume RUN_ID -` is
   timed as a subprocess of the venv's Python until it exits with the sealed envelope; median
   and p95 over ``--runs``. The same is timed for `proctor run` to a pause, as a peer figure.
2. throughput: ``--paused`` runs are paused in one store (in process), then each is resumed to
   its seal (in process); runs per second and per-run median/p95 for both, plus a subprocess
   resume of one run with all the others still in the store.
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

SKILL_MD = "---\nname: gate\ndescription: One approval, then an echo.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: confirm
        ask: {reason: Continue?}
      - id: say
        tool: echo
        inputs: {text: done}
"""


def workspace(root: Path) -> Path:
    (root / ".proctor").mkdir(parents=True)
    skill = root / "skills" / "gate"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "run.yaml").write_text(RUN_YAML)
    return root


def env_for(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    return env | {"PROCTOR_HOME": str(root / ".home")}


def cli(root: Path, *args: str, stdin: str = "") -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=root,
        env=env_for(root),
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - started, out


def approval(envelope: dict[str, object]) -> str:
    doc = json.loads(json.dumps(envelope["answers_template"]))
    for entry in doc["approvals"].values():
        entry.update({"approved": True, "reason": "bench"})
    return json.dumps(doc)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def show(label: str, values: list[float]) -> None:
    ms = [v * 1000 for v in values]
    print(
        f"{label:<46} median {statistics.median(ms):8.1f} ms   p95 {p95(ms):8.1f} ms   n={len(ms)}"
    )


def latency(root: Path, runs: int) -> None:
    run_times, resume_times = [], []
    for _ in range(runs):
        took, out = cli(root, "run", "gate", "--json")
        assert out.returncode == 10, out.stderr
        run_times.append(took)
        envelope = json.loads(out.stdout)
        took, out = cli(root, "resume", envelope["run_id"], "-", "--json", stdin=approval(envelope))
        assert out.returncode == 0 and json.loads(out.stdout)["status"] == "sealed", out.stderr
        resume_times.append(took)
    show("proctor run -> pause (subprocess, peer)", run_times)
    show("proctor resume -> seal (subprocess)", resume_times)


def throughput(root: Path, paused: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    os.environ["PROCTOR_HOME"] = str(root / ".home")
    session = Session(Workspace(root))
    envelopes, pause_times = [], []
    started = time.perf_counter()
    for _ in range(paused):
        t0 = time.perf_counter()
        envelopes.append(session.run("gate", cwd=root))
        pause_times.append(time.perf_counter() - t0)
    pause_total = time.perf_counter() - started
    assert all(e.status == "needs_approval" for e in envelopes)
    # One subprocess resume with every other run still paused in the store.
    took, out = cli(
        root, "resume", envelopes[-1].run_id or "", "-", stdin=approval(envelopes[-1].to_json())
    )
    assert out.returncode == 0, out.stderr
    resume_times = []
    started = time.perf_counter()
    for env in envelopes[:-1]:
        t0 = time.perf_counter()
        done = session.resume(env.run_id or "", approval(env.to_json()))
        resume_times.append(time.perf_counter() - t0)
        assert done.status == "sealed"
    resume_total = time.perf_counter() - started
    session.close()
    print(
        f"{paused} runs paused in one store: {paused / pause_total:7.1f} pauses/s"
        f" ({pause_total:.2f} s)"
    )
    show("  per run: run -> pause (in process)", pause_times)
    print(
        f"{len(resume_times)} paused runs resumed:"
        f" {len(resume_times) / resume_total:7.1f} resumes/s ({resume_total:.2f} s)"
    )
    show("  per run: resume -> seal (in process)", resume_times)
    show(f"  proctor resume with {paused} runs in the store", [took])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--paused", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"python {sys.version.split()[0]}; cores {os.cpu_count()}")
        latency(workspace(Path(tmp) / "latency"), args.runs)
        throughput(workspace(Path(tmp) / "many"), args.paused)


if __name__ == "__main__":
    main()

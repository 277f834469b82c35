"""Replay figures: what ``[replay] retain`` costs a run, and how long recording and replaying
a retained run take.

    .venv/bin/python bench/replay.py [--runs 15] [--steps 20] [--size 4096]

A method of ``--steps`` steps (alternately ``fs.write`` of ``--size`` bytes and
``data.digest`` of the same text) is run in-process with ``Session.run``:

1. the same run without retention (the yardstick, measured in the same process, alternating
   with 2 so a loaded machine slows both alike) and with ``[replay] retain = true``: median
   and p95 of each, and the ratio of the medians (what keeping the scrubbed arguments costs);
2. ``retained_test`` (the test document from a sealed run: receipts verified, retained calls
   checked against them) and ``replay_run`` (that test run offline, compared call by call):
   median and p95, and each as a ratio to the retaining run itself.

A benchmark, not a test: it asserts nothing, except that the replay did not diverge (the
figures would then measure something else).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SKILL_MD = "---\nname: keeper\ndescription: Writes and digests.\n---\nKeep things.\n"


def _run_yaml(steps: int) -> str:
    lines = [
        "minimum_proctor: 0.1.0",
        "methods:",
        "  keep:",
        "    description: Write and digest.",
        "    inputs: {type: object, properties: {text: {type: string}}, required: [text]}",
        "    steps:",
    ]
    for n in range(steps):
        if n % 2 == 0:
            lines.append(
                f"      - {{id: w{n}, tool: fs.write, inputs: {{path: out/f{n}.txt,"
                " content: $input.text, create: true}}"
            )
        else:
            lines.append(f"      - {{id: d{n}, tool: data.digest, inputs: {{value: $input.text}}}}")
    return "\n".join(lines) + "\n"


def _workspace(base: Path, name: str, steps: int, retain: bool) -> Path:
    root = base / name
    (root / ".proctor").mkdir(parents=True)
    folder = root / "skills" / "keeper"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "run.yaml").write_text(_run_yaml(steps))
    if retain:
        (root / "proctor.toml").write_text("[replay]\nretain = true\n")
    return root


def _stats(label: str, times: list[float]) -> float:
    times = sorted(times)
    median = statistics.median(times)
    p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
    print(f"{label:<44} median {median * 1000:9.1f} ms   p95 {p95 * 1000:9.1f} ms")
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.testing.replay import replay_run
    from proctor.testing.retained import retained_test

    text = ("replayable " * (args.size // 11 + 1))[: args.size]
    with tempfile.TemporaryDirectory(prefix="proctor-bench-replay-") as scratch:
        base = Path(scratch)
        environ = {"PROCTOR_HOME": str(base / "home")}
        plain = _workspace(base, "plain", args.steps, retain=False)
        kept = _workspace(base, "kept", args.steps, retain=True)
        sessions = {
            root: Session(Workspace(root), environ=environ, durable=False) for root in (plain, kept)
        }
        last: dict[Path, str] = {}

        def run(root: Path) -> float:
            shutil.rmtree(root / "out", ignore_errors=True)  # each run creates its files
            start = time.perf_counter()
            env = sessions[root].run("skills/keeper", inputs={"text": text}, cwd=root)
            took = time.perf_counter() - start
            assert env.outcome == "completed" and env.run_id is not None, env.to_json()
            last[root] = env.run_id
            return took

        run(plain), run(kept)  # warm
        times: dict[Path, list[float]] = {plain: [], kept: []}
        for _ in range(args.runs):
            for root in (plain, kept):
                times[root].append(run(root))
        for session in sessions.values():
            session.close()
        print(f"run of {args.steps} steps, {args.size}-byte arguments, {args.runs} runs each")
        base_median = _stats("run, retention off (yardstick)", times[plain])
        kept_median = _stats("run, [replay] retain = true", times[kept])
        print(f"{'retention cost':<44} ratio {kept_median / base_median:6.2f}x the yardstick")

        def timed(fn: Callable[[], Any]) -> list[float]:
            out = []
            for _ in range(max(3, args.runs // 3)):
                start = time.perf_counter()
                fn()
                out.append(time.perf_counter() - start)
            return out

        run_id = last[kept]
        recorded = _stats("retained_test (record --from)", timed(
            lambda: retained_test(kept, run_id, environ)))  # fmt: skip
        outcomes: list[bool] = []
        replayed = _stats("replay_run (offline, compared)", timed(
            lambda: outcomes.append(replay_run(kept, run_id, environ).diverged)))  # fmt: skip
        print(f"{'record --from':<44} ratio {recorded / kept_median:6.2f}x the retaining run")
        print(f"{'replay':<44} ratio {replayed / kept_median:6.2f}x the retaining run")
        if any(outcomes):
            print("a replay diverged: the figures measure something else", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

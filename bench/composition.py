#!/usr/bin/env python3
"""Composition costs: a child run over the same steps inline, and a fan-out 4-way vs serial.

1. Child-run overhead. One timed round is a whole ``Session.run`` (start transaction, steps,
   seal with signed receipts) of either
     inline   a method with two echo steps, or
     child    a method with one ``skill:`` step whose child runs those two echo steps;
   the difference of the medians is what a child run costs (its own record, lease, start
   transaction, governor and run receipt) over the same steps inline.
2. Fan-out wall time: 20 children each running a 100 ms command (a real subprocess), under
   ``max_concurrency: 4`` and under ``max_concurrency: 1`` (serial); the ratio is the speed-up.

    .venv/bin/python bench/composition.py [--rounds 30] [--fan-rounds 3]

Figures are wall-clock on whatever else the machine runs; take them on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _timing import measure

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SKILL_MD = "---\nname: {name}\ndescription: A composition benchmark skill.\n---\nBench.\n"

INLINE = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - {id: one, tool: echo, inputs: {text: a}}
      - {id: two, tool: echo, inputs: {text: b}}
"""

PARENT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - {id: call, skill: ../inline}
"""

SLEEPER = """minimum_proctor: 0.1.0
methods:
  main:
    inputs: {type: object, properties: {n: {type: integer}}, required: [n]}
    steps:
      - id: work
        tool: command.execute
        inputs: {argv: [PYTHON, -c, "import time; time.sleep(0.1)"]}
"""

FAN = """minimum_proctor: 0.1.0
methods:
  main:
    inputs: {type: object, properties: {items: {type: array}}, required: [items]}
    steps:
      - id: fan
        skill: ../sleeper
        for_each: $input.items
        inputs: {n: $index}
"""


def _workspace(base: Path) -> Path:
    import json

    root = base / "ws"
    (root / ".proctor").mkdir(parents=True)
    for name, text in (("inline", INLINE), ("parent", PARENT), ("sleeper", SLEEPER), ("fan", FAN)):
        folder = root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(SKILL_MD.format(name=name))
        (folder / "run.yaml").write_text(text.replace("PYTHON", json.dumps(sys.executable)))
    return root


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--fan-rounds", type=int, default=3)
    args = parser.parse_args()

    from proctor.core.authority import parse_authority
    from proctor.receipts.signing import signer_from_seed
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    with tempfile.TemporaryDirectory() as tmp:
        root = _workspace(Path(tmp))
        session = Session(
            Workspace(root),
            environ={"PROCTOR_HOME": str(Path(tmp) / "home")},
            signer=signer_from_seed(bytes(range(32))),
        )
        allow = parse_authority({"effects": "allow"})
        try:
            print("child run overhead (a whole run each round: start, steps, signed seal)")
            inline = measure(
                "  inline: two echo steps",
                lambda: session.run("inline", cwd=root, authority=allow),
                args.rounds,
                warm=3,
            )
            child = measure(
                "  child: one skill: step running them",
                lambda: session.run("parent", cwd=root, authority=allow),
                args.rounds,
                warm=3,
            )
            print(f"  child run overhead (median difference): {child - inline:10.1f} us")
            print("fan-out of 20 children, each a 100 ms command")
            items = list(range(20))
            walls: dict[int, list[float]] = {4: [], 1: []}
            for _ in range(args.fan_rounds):
                for width in (4, 1):
                    limit = parse_authority({"effects": "allow", "max_concurrency": width})
                    start = time.perf_counter()
                    env = session.run("fan", inputs={"items": items}, cwd=root, authority=limit)
                    walls[width].append(time.perf_counter() - start)
                    assert env.outcome == "completed", env.refusal
            four, one = statistics.median(walls[4]), statistics.median(walls[1])
            print(f"  4-way   median {four * 1000:10.1f} ms   (n={len(walls[4])})")
            print(f"  serial  median {one * 1000:10.1f} ms   (n={len(walls[1])})")
            print(f"  speed-up {one / four:5.2f}x")
        finally:
            session.close()


if __name__ == "__main__":
    main()

"""``receipt.read`` and ``artifact.open`` figures, each beside its yardstick measured in the same
run.

    .venv/bin/python bench/receipt_read.py [--steps 50] [--rounds 200] [--mib 4]

1. ``receipt.read`` of one call receipt (with a JSON pointer) of a sealed child run of
   ``--steps`` steps, as a sibling of the same tree calls it. Yardstick: ``verify_tree`` of
   that run's receipts alone, which the tool must do before it reads anything: the ratio is
   what finding the receipt and checking the retained output add to the verification.
2. ``artifact.open`` of a ``--mib`` MiB artifact another run of the tree stored. Yardstick:
   ``artifact.read`` of the same bytes page by page (the reads the open checks ahead of the
   caller): the ratio is what the open's whole check costs over reading it once.

A benchmark, not a test: it asserts nothing. Figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path

from _timing import measure
from proctor.receipts.model import parse_envelope
from proctor.receipts.signing import signer_from_seed
from proctor.receipts.verify import verify_tree
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.tools.artifacts import ARTIFACT_OPEN, ARTIFACT_READ, ARTIFACT_STORE
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.receipt_read import RECEIPT_READ
from proctor.runtime.tools.receipts_tool import RECEIPTS_EXTRA

SKILL_MD = "---\nname: {name}\ndescription: A package for the receipt.read benchmark.\n---\n"
PARENT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - {id: child, skill: ../leaf, inputs: {}}
"""


def _leaf(steps: int) -> str:
    lines = ["minimum_proctor: 0.1.0", "methods:", "  main:", "    inputs: {type: object}"]
    lines.append("    steps:")
    for n in range(steps):
        lines.append(f"      - {{id: s{n}, tool: data.digest, inputs: {{value: {{n: {n}}}}}}}")
    return "\n".join(lines) + "\n"


def _skill(root: Path, name: str, run_yaml: str) -> None:
    folder = root / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name))
    (folder / "run.yaml").write_text(run_yaml)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--mib", type=int, default=4)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        (root / ".proctor").mkdir(parents=True)
        _skill(root, "parent", PARENT)
        _skill(root, "leaf", _leaf(opts.steps))
        ticks = count()
        start = datetime(2026, 1, 1, tzinfo=UTC)
        session = Session(
            Workspace(root),
            environ={"PROCTOR_HOME": str(Path(tmp) / "home")},
            clock=lambda: start + timedelta(milliseconds=next(ticks)),
            signer=signer_from_seed(bytes(range(32))),
        )
        env = session.run("parent", cwd=root)
        assert env.outcome == "completed", env.refusal
        child = next(r for r in session.store.list_runs() if r.data.get("tree") == env.run_id)
        load = session.receipts.get
        step = parse_envelope(load(child.receipt_id or "") or b"").children[-1].receipt_id
        call = parse_envelope(load(step) or b"").children[0].receipt_id
        caller = "f" * 32
        session.store.create_run(
            RunRecord(run_id=caller, skill="b", method="main", data={"tree": env.run_id})
        )
        keys = [session.signer.public_key]
        seam = {"load": load, "keys": keys}
        ctx = ToolContext(
            session.workspace, session.store, caller, "c", extras={RECEIPTS_EXTRA: seam}
        )
        args = {"receipt": call, "json_pointer": "/digest"}
        print(f"receipt.read: a child run of {opts.steps} steps (machine shared, loaded)")
        tool = measure(
            "receipt.read (call receipt, pointer)",
            lambda: RECEIPT_READ.handler(ctx, dict(args)),
            opts.rounds,
            warm=5,
        )
        floor = measure(
            "yardstick: verify_tree of that run",
            lambda: verify_tree(child.receipt_id, load, keys),
            opts.rounds,
            warm=5,
        )
        print(f"{'ratio receipt.read / verify_tree':<52} {tool / floor:.2f}x")

        owner = ToolContext(session.workspace, session.store, env.run_id or "", "c")
        value = {"blob": os.urandom(opts.mib * 1024 * 1024 // 2).hex()}
        desc = ARTIFACT_STORE.handler(owner, {"value": value})
        opener = ToolContext(session.workspace, session.store, caller, "c")

        def read_all() -> None:
            offset = 0
            while True:
                page = ARTIFACT_READ.handler(
                    owner, {"ref": desc["ref"], "offset": offset, "length": 4 * 1024 * 1024}
                )
                offset = page["next_offset"]
                if page["eof"]:
                    return

        print(f"artifact.open: a {desc['size'] // 1024} KiB artifact of the tree")
        rounds = max(5, opts.rounds // 20)
        opened = measure(
            "artifact.open",
            lambda: ARTIFACT_OPEN.handler(opener, {"artifact": desc}),
            rounds,
            warm=1,
        )
        paged = measure("yardstick: artifact.read of every page", read_all, rounds, warm=1)
        print(f"{'ratio artifact.open / artifact.read (all)':<52} {opened / paged:.2f}x")
        session.close()


if __name__ == "__main__":
    main()

"""Instructions per one-step run in process, counted by callgrind.

    .venv/bin/python bench/one_step_instructions.py [--runs 40] [--src PATH]

The CPU side of bench/one_step.py in a form a shared machine's load does not move:
``Session.run`` of the one-step ``echo`` skill, once its files are past the racily-clean
window and after 25 runs of warm-up (imports, first-use caches, the key, the day's pack).
Runs under ``valgrind --tool=callgrind`` twice, with instrumentation on around ``--runs``
runs and around none, and prints the difference per run. ``--src`` measures another
checkout's ``src`` (an earlier commit's, ``git archive``d) with this venv. Needs valgrind.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from _callgrind import SWITCH, collected

REPO = Path(__file__).resolve().parents[1]

RUNS = (
    SWITCH
    + """
import sys
sys.path.insert(1, sys.argv[2])
import one_step
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
runs = int(sys.argv[1])
root = one_step.workspace()
one_step.settled(root)
s = Session(Workspace(root), environ=one_step.environ(root))
for _ in range(25):
    assert s.run("one", cwd=root).status == "sealed"
_callgrind("on")
for _ in range(runs):
    s.run("one", cwd=root)
_callgrind("off")
s.close()
"""
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--src", type=Path, default=REPO / "src")
    parser.add_argument("--keep", type=Path, help="copy the profile of the runs here")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    here = str(Path(__file__).resolve().parent)
    with tempfile.TemporaryDirectory(prefix="proctor-bench-cg-") as tmp:
        many = collected(RUNS, [str(args.runs), here], args.src, Path(tmp) / "many")
        none = collected(RUNS, ["0", here], args.src, Path(tmp) / "none")
        if args.keep is not None:
            shutil.copyfile(Path(tmp) / "many", args.keep)
    per = (many - none) / args.runs
    print(f"Session.run of the one-step echo skill, {args.runs} runs under callgrind ({args.src})")
    print(f"  {many:,} - {none:,} instructions: {per:,.0f} a run")


if __name__ == "__main__":
    main()

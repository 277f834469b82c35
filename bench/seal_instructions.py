"""Instructions of the seal of a long run and of its signing floor, counted by callgrind.

    .venv/bin/python bench/seal_instructions.py [--steps 2000] [--src PATH] [--keep PATH]

The CPU side of bench/seal.py in a form a shared machine's load does not move: one process
under ``valgrind --tool=callgrind`` seals a ``--steps``-step run into a fresh receipt store
(after one warm-up seal: imports, first-use caches, the key) with instrumentation on around
it, and a second signs the run's signed bodies' yardstick (bench/seal.py's) with it on around
that; prints both counts, the instructions a receipt beyond the signatures, and the ratio.
``--src`` measures another checkout's ``src`` (an earlier commit's, ``git archive``d) with this
venv. Needs valgrind.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from _callgrind import SWITCH, collected

REPO = Path(__file__).resolve().parents[1]

WORK = (
    SWITCH
    + """
import sys, tempfile
from pathlib import Path
sys.path.insert(1, sys.argv[3])
import seal
from proctor.receipts.canonical import canonical
from proctor.receipts.signing import signer_from_seed
what, steps = sys.argv[1], int(sys.argv[2])
signer = signer_from_seed(bytes(range(32)))
bodies = [canonical({"n": i, "pad": "x" * 560}) for i in range(steps)]
bodies.append(canonical({"children": ["x" * 140] * steps}))
with tempfile.TemporaryDirectory() as tmp:
    seal.seal(Path(tmp) / "warm", signer, steps, 4096)
    seal.floor(signer, bodies)
    _callgrind("on")
    if what == "seal":
        seal.seal(Path(tmp) / "measured", signer, steps, 4096)
    else:
        seal.floor(signer, bodies)
    _callgrind("off")
"""
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--src", type=Path, default=REPO / "src")
    parser.add_argument("--keep", type=Path, help="copy the seal's profile here")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    here = str(Path(__file__).resolve().parent)
    with tempfile.TemporaryDirectory(prefix="proctor-bench-cg-") as tmp:
        sealed = collected(WORK, ["seal", str(args.steps), here], args.src, Path(tmp) / "seal")
        floor = collected(WORK, ["floor", str(args.steps), here], args.src, Path(tmp) / "floor")
        if args.keep is not None:
            shutil.copyfile(Path(tmp) / "seal", args.keep)
    receipts = 2 * args.steps + 1
    print(f"a {args.steps}-step run: {receipts} receipts, {args.steps + 1} signed ({args.src})")
    print(f"  seal  {sealed:,} instructions")
    print(f"  floor {floor:,} instructions (the signatures alone)")
    print(
        f"  {(sealed - floor) / receipts:,.0f} a receipt beyond the signatures;"
        f" seal / floor {sealed / floor:.3f}x"
    )


if __name__ == "__main__":
    main()

"""Instructions per governed ``fs.read`` turn call in process, counted by callgrind.

    .venv/bin/python bench/turn_call_instructions.py [--calls 200] [--src PATH]

The engine's part of bench/mcp_read.py's session side, in a form a shared machine's load does
not move: ``Session.turn_call`` of ``fs.read`` (a 4 KiB file) on the MCP client session's run
(``proctor mcp --tool fs.read``'s package, a session made as the MCP server makes its pool's:
managed, the sandbox required), after 20 calls of warm-up and once the package is past the
racily-clean window (as a server's is after its first seconds). Runs under
``valgrind --tool=callgrind`` twice, with instrumentation on around ``--calls`` calls and
around none, and prints the difference per call. ``--src`` measures another checkout's
``src`` (an earlier commit's, ``git archive``d) with this venv. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CALLS = """
import os, subprocess, sys, tempfile, time
from pathlib import Path
calls = int(sys.argv[1])
base = Path(tempfile.mkdtemp(prefix="proctor-bench-turn-"))
root = base / "ws"
(root / "data").mkdir(parents=True)
(root / ".proctor").mkdir()
(root / "data" / "a.txt").write_text(("The quick brown fox jumps.\\n" * 200)[:4096])
env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
env["PROCTOR_HOME"] = os.environ["PROCTOR_HOME"] = str(base / "home")
from proctor.mcp.core_tools import open_core_tools
from proctor.mcp.session_runs import TURN, seal_session_run
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.runtime.skill_files import RACY_NS
s = Session(Workspace(root), environ=env, sandbox_default="required", managed=True)
package = open_core_tools(root, ["fs.read"]).sessions.package
run = s.run(str(package), inputs={"client": "bench"}, cwd=root).run_id
time.sleep(RACY_NS / 1e9 + 0.2)
def call(name):
    outcome = s.turn_call(run, TURN, "fs.read", {"path": "data/a.txt"}, name)
    assert outcome.status == "completed", outcome
for i in range(20):
    call(f"w{i}")
quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], **quiet)
for i in range(calls):
    call(f"c{i}")
subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], **quiet)
seal_session_run(s, run)
s.close()
"""


def _collected(calls: int, src: Path, tmp: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = tmp / f"callgrind.{calls}"
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={out}", sys.executable, "-c", CALLS, str(calls)]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind said no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--src", type=Path, default=REPO / "src")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="proctor-bench-cg-") as tmp:
        many = _collected(args.calls, args.src, Path(tmp))
        none = _collected(0, args.src, Path(tmp))
    per = (many - none) / args.calls
    print(f"Session.turn_call of fs.read, {args.calls} calls under callgrind ({args.src})")
    print(f"  {many:,} - {none:,} instructions: {per:,.0f} a call")


if __name__ == "__main__":
    main()

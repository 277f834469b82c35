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
import shutil
import tempfile
from pathlib import Path

from _callgrind import SWITCH, collected

REPO = Path(__file__).resolve().parents[1]

CALLS = (
    SWITCH
    + """
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
_callgrind("on")
for i in range(calls):
    call(f"c{i}")
_callgrind("off")
seal_session_run(s, run)
s.close()
"""
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--src", type=Path, default=REPO / "src")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="proctor-bench-cg-") as tmp:
        many = collected(CALLS, [str(args.calls)], args.src, Path(tmp) / "many")
        none = collected(CALLS, ["0"], args.src, Path(tmp) / "none")
    per = (many - none) / args.calls
    print(f"Session.turn_call of fs.read, {args.calls} calls under callgrind ({args.src})")
    print(f"  {many:,} - {none:,} instructions: {per:,.0f} a call")


if __name__ == "__main__":
    main()

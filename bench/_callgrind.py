"""Count the instructions a script spends between its own ``callgrind_control -i on`` and
``-i off`` (valgrind's callgrind, started with instrumentation off): repeatable for the same
code and inputs whatever else the machine is doing, so a shared machine's load does not move
it. The scripts of ``bench/*_instructions.py`` switch it on around the work they measure."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

# what a script runs to switch counting on (or off) in its own process
SWITCH = """
import os, subprocess
def _callgrind(flag):
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run(["callgrind_control", "-i", flag, str(os.getpid())], **quiet)
"""


def collected(script: str, args: list[str], src: Path, out: Path) -> int:
    """The instructions ``script`` (run by this venv's python with ``src`` first on its path,
    ``args`` after it) counted while instrumentation was on; its profile is left at ``out``.

    Raises:
        SystemExit: the script failed, or callgrind printed no count.
    """
    env = {**os.environ, "PYTHONPATH": str(src)}
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={out}", sys.executable, "-c", script, *args]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the script failed under callgrind:\n{done.stderr[-2000:]}")
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind said no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))

"""Ending a sandboxed program is synchronous: when ``command.execute`` returns, nothing the
program started is alive, even when the program itself exited at once (bubblewrap may exit
before the kernel has torn its PID namespace down). Run 200 times."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any, cast

from proctor.runtime.boundary.sandbox import SANDBOX_EXTRA, SandboxUse
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.command import COMMAND_EXECUTE
from tests.runtime.boundary.sandbox_support import BWRAP, alive, needs_bwrap

pytestmark = needs_bwrap

# setsid and a double fork, then the program exits as soon as the sleeper runs
SLEEPER = """
import os, sys, time
marker = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(marker, "w").close()
        os.execvp("sleep", ["sleep", marker])
    os._exit(0)
os.wait()
while not os.path.exists(marker):
    time.sleep(0.001)
"""


def test_no_process_outlives_the_call_200_times(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    (root / "sleeper.py").write_text(SLEEPER)
    use = SandboxUse("bubblewrap", "required", bwrap=BWRAP)
    ctx = ToolContext(
        workspace=Workspace(root),
        store=cast(Any, None),  # the handler never touches the run store
        run_id="r",
        call_id="c",
        extras={SANDBOX_EXTRA: use},
    )
    prefix = f"1000.{secrets.randbelow(10**6):06d}"
    for n in range(200):
        marker = f"{prefix}{n:03d}"
        args = {"argv": [sys.executable, "sleeper.py", marker], "timeout_seconds": 30}
        result = COMMAND_EXECUTE.handler(ctx, args)
        assert result["exit_code"] == 0
        assert (root / marker).exists()  # the sleeper ran
        assert not alive(marker), f"run {n}: the sleeper outlived the call"

"""Attacks on what outlives or reaches past a sandboxed command: the driver's death, the
driver's terminal (TIOCSTI) and the host's processes in ``/proc``.

Each test runs a real driver (a Python process calling ``command.execute``'s handler under
bubblewrap) and proves the effect did not happen: no process of the sandbox left after the
driver was killed, no keystroke pushed into the driver's terminal, no host process seen.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import secrets
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.runtime.boundary.sandbox_support import BWRAP, alive, needs_bwrap, wait_until
from tests.runtime.driver_support import make_workspace

pytestmark = needs_bwrap
PY = sys.executable

# The driver: runs one command.execute under bubblewrap for each argv of its command line (a
# JSON list), printing each result's stdout; a ``control`` entry runs the argv as a plain
# child instead (same terminal, same session), to show the attack works where nothing stops it.
DRIVER = """import json, os, subprocess, sys
from pathlib import Path
from typing import Any, cast
from proctor.runtime.boundary.sandbox import SANDBOX_EXTRA, SandboxUse
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.command import COMMAND_EXECUTE
root, bwrap, plan = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
if sys.argv[4] == "terminal":  # take the terminal on stdin as this session's own
    import fcntl, termios
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
ctx = ToolContext(workspace=Workspace(root), store=cast(Any, None), run_id="r", call_id="c",
                  extras={SANDBOX_EXTRA: SandboxUse("bubblewrap", "required", bwrap=bwrap)})
for how, argv in plan:
    if how == "control":
        out = subprocess.run(argv, cwd=root, capture_output=True, text=True).stdout
    else:
        out = COMMAND_EXECUTE.handler(ctx, {"argv": argv, "timeout_seconds": 600})["stdout"]
    print(json.dumps([how, out]), flush=True)
"""

SLEEPER = """import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", sys.argv[1]])
    os._exit(0)
os.wait()
os.execvp("sleep", ["sleep", sys.argv[1]])
"""

# Pushes a line into every terminal it can reach (its controlling terminal by /dev/tty, and
# its standard descriptors), then lists the command lines of every process in /proc.
ATTACK = """import fcntl, json, os, sys, termios
report = {}
line = sys.argv[1] + "\\n"
targets = {"dev_tty": None, "fd0": 0, "fd1": 1, "fd2": 2}
for name, fd in targets.items():
    try:
        if fd is None:
            fd = os.open("/dev/tty", os.O_RDWR)
        for ch in line.encode():
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
        report[name] = "pushed"
    except OSError as exc:
        report[name] = exc.errno
seen = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            seen.append(open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"))
        except OSError:
            pass
report["cmdlines"] = seen
print(json.dumps(report))
"""


def _driver(
    root: Path, plan: list[list[object]], *, terminal: int | None, tag: str = "-"
) -> subprocess.Popen[str]:
    (root / "tools" / "driver.py").write_text(DRIVER)
    return subprocess.Popen(
        [PY, str(root / "tools" / "driver.py"), str(root), str(BWRAP), json.dumps(plan),
         "terminal" if terminal is not None else "-", tag],
        stdin=terminal if terminal is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip


def _sleepers(marker: str) -> list[int]:
    return [p.pid for p in alive(marker) if p.cmdline()[:1] == ["sleep"]]


def test_killing_the_driver_mid_command_leaves_no_process_of_the_sandbox(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "tools" / "sleeper.py").write_text(SLEEPER)
    marker = f"700.{secrets.randbelow(10**9):09d}"
    driver = _driver(root, [["sandbox", [PY, "tools/sleeper.py", marker]]], terminal=None)
    try:
        # the command runs: its sleeper and the sleeper's setsid'd, double-forked orphan
        wait_until(lambda: len(_sleepers(marker)) == 2, "both sleepers started")
        assert any("bwrap" in " ".join(p.cmdline()) for p in alive(marker))
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        # every process with the marker: both sleepers and both bubblewraps (the driver's
        # child and the namespace's first process, whose command lines carry the argv)
        wait_until(lambda: not alive(marker), "a process of the sandbox outlived its driver", 10)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        assert driver.stdout is not None
        driver.stdout.close()


def _kill_at_bwrap(driver: subprocess.Popen[str], marker: str, seen: set[str]) -> None:
    """SIGKILL ``driver`` the moment a bubblewrap of ``marker`` exists, reading ``/proc`` in a
    tight loop (a poll with pauses would come after the sandbox is set up)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            if not name.isdigit() or name in seen:
                continue
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in cmdline and cmdline[0].endswith(b"bwrap"):
                driver.kill()
                return
            if cmdline != [b""]:  # not yet exec'd: look again
                seen.add(name)
    raise AssertionError("no bubblewrap started")


def test_killing_the_driver_while_bubblewrap_sets_up_leaves_nothing(tmp_path: Path) -> None:
    # --die-with-parent takes hold in the sandbox's first process only once it is set up
    root = make_workspace(tmp_path / "ws")
    for _ in range(4):
        marker = f"701.{secrets.randbelow(10**9):09d}"
        seen = set(os.listdir("/proc"))
        driver = _driver(root, [["sandbox", ["sleep", marker]]], terminal=None)
        try:
            _kill_at_bwrap(driver, marker, seen)
            driver.wait(timeout=30)
            wait_until(lambda m=marker: not alive(m), "a sandbox outlived its killed driver", 10)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
            assert driver.stdout is not None
            driver.stdout.close()


def _pending_input(fd: int) -> bytes:
    """What the terminal holds for its reader now (nothing waits: TIOCSTI is synchronous)."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        return os.read(fd, 4096)
    except BlockingIOError:
        return b""
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def test_no_keystroke_reaches_the_drivers_terminal_and_no_host_process_is_seen(
    tmp_path: Path,
) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "tools" / "attack.py").write_text(ATTACK)
    master, slave = pty.openpty()
    # the line TIOCSTI would push, as a canonical-mode terminal hands it to its reader
    attempt, control = f"touch pwned-{secrets.token_hex(4)}", f"echo control-{secrets.token_hex(4)}"
    plan: list[list[object]] = [
        ["sandbox", [PY, "tools/attack.py", attempt]],
        ["control", [PY, "tools/attack.py", control]],
    ]
    tag = f"host-{secrets.token_hex(8)}"  # in the driver's command line only
    driver = _driver(root, plan, terminal=slave, tag=tag)
    try:
        assert driver.stdout is not None
        sandboxed = json.loads(json.loads(driver.stdout.readline())[1])
        # the driver waits for its next command; the sandboxed attack is over: nothing pushed
        assert all(sandboxed[k] != "pushed" for k in ("dev_tty", "fd0", "fd1", "fd2"))
        assert attempt.encode() not in _pending_input(slave)
        # no process of the host: not its driver (its pid namespace is its own)
        assert not [c for c in sandboxed["cmdlines"] if tag in c or "driver.py" in c]
        assert any("attack.py" in c for c in sandboxed["cmdlines"])  # its own /proc is listed
        controlled = json.loads(json.loads(driver.stdout.readline())[1])
        assert any(tag in c for c in controlled["cmdlines"])  # the control sees the host's
        driver.wait(timeout=60)
        # the control: a child left in the driver's session pushes its line into the terminal
        assert controlled["dev_tty"] == "pushed"
        ready, _, _ = select.select([slave], [], [], 10)
        assert ready and control.encode() in _pending_input(slave)
        assert not list(root.glob("pwned-*"))
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        if driver.stdout is not None:
            driver.stdout.close()
        os.close(master)
        os.close(slave)

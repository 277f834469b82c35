"""Commands run for a bench by a small process started before the bench grows.

Linux carries the peak RSS of the memory a process replaces at exec into the new program's
own (``ru_maxrss`` starts from the parent's size at the fork), so a command a bench starts
once it holds its trees or its records reports the bench's size as its peak whenever that is
larger than the command's own, and two commands compared by their peaks both read the bench.
A :class:`Launcher`, made first while the bench is small, starts each command instead and
answers its exit code, CPU and peak RSS from its own ``wait4``.

Run the benches as scripts: this folder is then on the path (``from _launch import Launcher``).
"""

from __future__ import annotations

import json
import subprocess
import sys

# Runs each command it is sent (one JSON line: argv, env or null, folder or null) and answers
# one JSON line: exit code, user and sys CPU seconds and peak RSS (KiB) of the command with
# the children it reaped, wall seconds, and its output.
_LAUNCHER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    argv, env, cwd = json.loads(line)
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, cwd=cwd)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    answer = [os.waitstatus_to_exitcode(status), usage.ru_utime, usage.ru_stime,
              usage.ru_maxrss, time.perf_counter() - started, out.decode(errors="replace")]
    print(json.dumps(answer), flush=True)
"""


class Launcher:
    """A small process that runs commands for the bench (see the module's text)."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _LAUNCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(
        self, argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None
    ) -> tuple[int, float, float, float, str]:
        """Run ``argv`` (with ``env``, or the launcher's own environment; in ``cwd``, or the
        folder the bench started in): its exit code,
        CPU seconds (user + sys, its reaped children included), peak RSS in MiB, wall
        seconds, and its output."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps([argv, env, cwd]) + "\n")
        self._proc.stdin.flush()
        code, user, system, maxrss, wall, out = json.loads(self._proc.stdout.readline())
        return code, user + system, maxrss / 1024, wall, out

    def close(self) -> None:
        """End the launcher."""
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait()

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The driver's watch: when the process that started sandboxes dies, they die too.

bubblewrap's ``--die-with-parent`` binds the sandbox's first process (its PID namespace's
init) to bubblewrap's life only once the sandbox is set up. A driver killed in the few
milliseconds before then (SIGKILL, the OOM killer) kills bubblewrap but leaves that init, and
the program it goes on to start, running with no one to end them.

So the first time a driver process starts a sandbox, it starts one small watch of its own (a
Python standard-library program, in a session of its own, that outlives the driver): the watch
reads a pipe only the driver holds and, when the pipe closes (the driver ended, however it
ended), kills every process whose environment carries the driver's mark (:func:`mark`), which
bubblewrap is started with and unsets for the program. A driver that ended cleanly has ended
its sandboxes already; the watch then finds none. After a fork, the child starts a watch of its
own.

Nothing here refuses a call: if the watch cannot be started, sandboxes go on without it (the
sandbox is still killed with its driver after set-up).
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
from collections.abc import Mapping

__all__ = ["MARK_ENV", "mark", "marked"]

MARK_ENV = "PROCTOR_DRIVER_MARK"
"""The environment name bubblewrap carries the driver's mark under (unset for the program)."""

# Runs with -I -S: the standard library alone, no site. Reads stdin to its end (the driver's
# end), then kills what carries the mark, again until a pass finds none: a bubblewrap killed
# while it forked may leave a child the pass before did not see.
_WATCH = """import os, signal, sys
mark = ("\\0" + sys.argv[1] + "\\0").encode()
while os.read(0, 4096):
    pass
for _ in range(50):
    found = False
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/environ", "rb") as handle:
                environ = b"\\0" + handle.read()
        except OSError:
            continue
        if mark in environ:
            found = True
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    if not found:
        break
"""

_LOCK = threading.Lock()
_STATE: dict[str, object] = {}


def mark() -> str | None:
    """The ``NAME=value`` environment entry of this driver process's mark, its watch started
    the first time (and again in a forked child); ``None`` when the watch cannot start."""
    with _LOCK:
        if _STATE.get("pid") == os.getpid():
            entry = _STATE.get("entry")
            return entry if isinstance(entry, str) else None
        inherited = _STATE.get("fd")
        if isinstance(inherited, int):  # the parent's, kept by a fork: its watch is its own
            os.close(inherited)
        entry = f"{MARK_ENV}={secrets.token_hex(16)}"
        read, write = os.pipe()  # both close on exec: no program started later holds them
        # the watch holds nothing else of the driver's: a caller reading the driver's output
        # to its end must not wait for the watch
        actions: list[tuple[int, ...] | tuple[int, int, str, int, int]] = [
            (os.POSIX_SPAWN_DUP2, read, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2 and fd != read and _inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", "-c", _WATCH, entry],
                {},
                file_actions=actions,
                setsid=True,
            )
        except OSError:
            os.close(write)
            _STATE.update(pid=os.getpid(), entry=None, fd=None)
            return None
        finally:
            os.close(read)
        # the write end stays open for the life of this process: its end is the watch's word
        _STATE.update(pid=os.getpid(), entry=entry, fd=write)
        return entry


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # the descriptor listing /proc/self/fd, closed since
        return False


def marked(launch: list[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """A bubblewrap command line (``launch``, its environment ``env``) that carries this
    driver's mark and unsets it for the program; unchanged when the watch cannot start."""
    entry = mark()
    if entry is None:
        return launch, dict(env)
    name, _, value = entry.partition("=")
    return [launch[0], "--unsetenv", name, *launch[1:]], {**env, name: value}

"""Running one program for a process tool: start it in its sandbox, wait, end it whole.

Every process tool (``command.execute``; ``worker.run`` and ``process.start`` build
their launch from the same sandbox spec) starts
its program through :func:`start` with the :class:`~proctor.runtime.boundary.sandbox.SandboxUse`
admission chose, waits with :func:`wait_for`, and always calls :func:`finish`, which kills
whatever is left and waits until it is gone:

- under bubblewrap the sandbox has a PID namespace of its own; killing the namespace's first
  process (learned from bubblewrap's ``--info-fd``) makes the kernel kill every process in it,
  ``setsid`` and double forks included, and a pidfd says when they are all gone;
- without a sandbox (``auto`` on a host without bubblewrap, or ``off``) psutil walks the
  leader's descendants and the process group is killed, which a double fork escapes;
- afterwards the sandbox's :class:`~proctor.runtime.boundary.sandbox_sweep.Sweep` removes any
  entry a run may never write that the program created;
- if the driver itself dies, bubblewrap's ``--die-with-parent`` ends the sandbox, and the
  driver's watch (:mod:`proctor.runtime.tools.driver_watch`) ends one whose set-up the death
  interrupted.

:func:`stop_running` kills every program running now (the driver is stopping), and
:func:`stop_scoped` those one cancelled call started (:func:`enter_stop_scope`); :func:`finish`
then says it was stopped.

:data:`STARTED` is how the call's claim learns where its effect runs: the driver sets it to a
function that records the program's process tree root (fenced by the run's lease); when that
record is refused (the driver lost its lease), the program just started is ended at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from proctor.contracts.values import dataclass
from proctor.errors import ToolFailed
from proctor.runtime.boundary.netrelay import Relay
from proctor.runtime.boundary.sandbox import SandboxUse, bwrap_argv
from proctor.runtime.boundary.sandbox_paths import run_sandbox
from proctor.runtime.boundary.sandbox_sweep import Sweep
from proctor.runtime.tools import driver_watch

if TYPE_CHECKING:
    import psutil

    from proctor.runtime.boundary.egress_proxy import EgressProxy
    from proctor.runtime.boundary.workspace import Workspace

__all__ = [
    "STARTED",
    "Ended",
    "Running",
    "check_startable",
    "enter_stop_scope",
    "finish",
    "start",
    "start_proxy",
    "stop_running",
    "stop_scoped",
    "wait_for",
]

# bubblewrap's own complaint when the program it was to run cannot be executed in the sandbox
_BWRAP_EXEC_FAILED = b"bwrap: execvp "
_REAP_SECONDS = 10.0
_LOCK = threading.Lock()
_RUNNING: dict[int, Running] = {}
_STOPPED: set[int] = set()

STARTED: contextvars.ContextVar[Callable[[dict[str, float]], None] | None] = contextvars.ContextVar(
    "proctor_process_started", default=None
)
"""Called with the started program's tree root (``pid``: the process proctor started, its
process group; ``inner``: the sandbox's first process, when there is one; each with its start
time) before :func:`start` returns; an error it raises ends the program and is raised."""


@dataclass
class Running:
    """A started program: the process proctor started (bubblewrap, or the program itself);
    under bubblewrap, the sandbox's first process and a pidfd of it (readable once it ended);
    and the sweep to run once everything has ended; the egress proxy it reaches the network
    through (stopped once it has ended)."""

    proc: subprocess.Popen[bytes]
    name: str
    use: SandboxUse
    sweep: Sweep | None = None
    toolchains: tuple[Path, ...] = ()
    inner: psutil.Process | None = None
    inner_fd: int | None = None
    proxy: EgressProxy | None = None
    scope: threading.Event | None = None


@dataclass(frozen=True)
class Ended:
    """How a program ended: ``removed`` names what the sweep removed; ``stopped`` is a stop
    by :func:`stop_running`."""

    returncode: int
    name: str
    sandboxed: bool
    removed: tuple[str, ...] = ()
    stopped: bool = False

    def check_started(self, stderr_head: bytes) -> None:
        """Refuse a program bubblewrap could not execute inside the sandbox (``stderr_head``:
        the start of what was written to stderr, read to its end).

        Raises:
            ToolFailed: ``command_not_started``.
        """
        if self.sandboxed and self.returncode == 1 and stderr_head.startswith(_BWRAP_EXEC_FAILED):
            raise ToolFailed(
                f"cannot start '{self.name}' inside the sandbox: it is not visible there (the "
                "home and proctor's state are hidden; see docs/sandbox.md)",
                code="command_not_started",
            )


def check_startable(argv0: str, cwd: Path, env: Mapping[str, str]) -> None:
    """Refuse a program that cannot be found (nothing is started).

    Raises:
        ToolFailed: ``command_not_started``.
    """
    if "/" in argv0:
        path = argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0)
        found = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        found = shutil.which(argv0, path=env.get("PATH", os.defpath)) is not None
    if not found:
        raise ToolFailed(
            f"cannot start '{os.path.basename(argv0)}': no such executable file",
            code="command_not_started",
        )


def start(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    use: SandboxUse,
    workspace: Workspace,
    environ: Mapping[str, str],
    deadline: float,
) -> Running:
    """Start ``argv`` in ``cwd`` with exactly ``env``, under bubblewrap when ``use`` says so
    (its spec from ``workspace`` and the session's ``environ``), stdout and stderr piped.

    Raises:
        ToolFailed: ``command_not_started``: the program cannot be found (nothing started).
    """
    check_startable(argv[0], cwd, env)
    launch, launch_env, sweep, info, proxy = argv, env, None, None, None
    tools: tuple[Path, ...] = ()
    if use.used == "bubblewrap" and use.bwrap is not None:
        spec, sweep = run_sandbox(
            workspace, environ=environ, env=env, cwd=cwd, network=use.network, argv0=argv[0]
        )
        proxy = start_proxy(use)
        info = os.pipe()
        relay = None if proxy is None or proxy.folder is None else Relay(proxy.folder, egress=True)
        launch = bwrap_argv(spec, argv, bwrap=use.bwrap, info_fd=info[1], relay=relay)
        launch, launch_env = driver_watch.marked(launch, dict(spec.env))
        tools = spec.toolchains
    try:
        proc = subprocess.Popen(
            launch,
            cwd=cwd,
            env=launch_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            shell=False,
            pass_fds=() if info is None else (info[1],),
        )
    except OSError as exc:
        if info is not None:
            os.close(info[0])
        if proxy is not None:
            proxy.stop()
        raise ToolFailed(
            f"cannot start '{os.path.basename(argv[0])}': {exc.strerror}",
            code="command_not_started",
        ) from exc
    finally:
        if info is not None:
            os.close(info[1])
    running = Running(
        proc, os.path.basename(argv[0]), use, sweep, tools, proxy=proxy, scope=_SCOPE.get()
    )
    with _LOCK:
        _RUNNING[proc.pid] = running
    if info is not None:
        _capture_sandbox(running, info[0], deadline)
    note = STARTED.get()
    if note is not None:
        try:
            note(_root(running))
        except BaseException:
            finish(running)  # its claim cannot say where it runs: it does not run on
            raise
    if running.scope is not None and running.scope.is_set():
        stop_scoped(running.scope)  # the stop came while it was starting
    return running


def start_proxy(use: SandboxUse) -> EgressProxy | None:
    """The egress proxy of a sandboxed process whose run grants egress, started (``None``
    for any other: its sandbox has no way out at all). Its decisions go to ``use.log``."""
    if not use.proxied:
        return None
    from proctor.runtime.boundary.egress_allow import EgressAllow
    from proctor.runtime.boundary.egress_proxy import EgressProxy

    log = use.log
    return EgressProxy(
        EgressAllow.parse(use.egress),
        on_connection=None if log is None else (lambda c: log.note(c.to_json())),
    ).start()


def _root(running: Running) -> dict[str, float]:
    """The program's process tree root: pids and start times (psutil's reckoning)."""
    import psutil

    root: dict[str, float] = {"pid": running.proc.pid}
    with contextlib.suppress(psutil.Error):
        root["pid_started"] = round(psutil.Process(running.proc.pid).create_time(), 2)
    if running.inner is not None:
        root["inner"] = running.inner.pid
        with contextlib.suppress(psutil.Error):
            root["inner_started"] = round(running.inner.create_time(), 2)
    return root


def _capture_sandbox(running: Running, fd: int, deadline: float) -> None:
    """Learn the sandbox's first process from bubblewrap's info pipe (closed here), and hold
    a pidfd of it. While bubblewrap runs, that process is its unreaped child, so the pid is
    still its own; psutil's start-time check confirms the pidfd was opened on it. (The pipe is
    not inherited by the program, so it cannot write a pid of its choosing there.)"""
    import psutil  # loaded when a process is ended, not at start-up

    data = b""
    try:
        while time.monotonic() < deadline and b"}" not in data:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        inner = psutil.Process(int(json.loads(data.decode("utf-8"))["child-pid"]))
    except (ValueError, KeyError, TypeError, psutil.Error):
        return
    running.inner = inner
    try:
        pidfd = os.pidfd_open(inner.pid)
    except (AttributeError, OSError):
        return
    if inner.is_running():
        running.inner_fd = pidfd
    else:
        os.close(pidfd)


def wait_for(running: Running, deadline: float) -> bool:
    """Wait until the program ends or ``deadline`` passes; ``True`` when it ended.

    ``Popen.wait(timeout)`` polls with sleeps that double up to 50 ms, which would add several
    milliseconds to every short command; a pidfd wakes up the moment the process ends.
    """
    proc = running.proc
    timeout = max(0.0, deadline - time.monotonic())
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return bool(ready)


def _kill_tree(running: Running) -> list[psutil.Process]:
    """Kill everything the program started; return the processes to wait for (under
    bubblewrap the sandbox's first process alone: its end ends the namespace)."""
    import psutil  # loaded when a process is ended, not at start-up

    proc = running.proc
    family: list[psutil.Process] = []
    if running.inner is not None:
        family.append(running.inner)
    elif proc.returncode is None:
        # a reaped leader's pid may belong to anyone by now: walk it only while it is ours
        with contextlib.suppress(psutil.Error):
            family += psutil.Process(proc.pid).children(recursive=True)
    for member in family:
        with contextlib.suppress(psutil.Error):
            member.kill()
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode is None:
        with contextlib.suppress(OSError):
            proc.kill()
    return family


def _wait_gone(running: Running, family: list[psutil.Process]) -> None:
    """Wait until each process is gone or a zombie (a PID namespace's first process is a
    zombie only once every process in its namespace is dead)."""
    import psutil  # loaded when a process is ended, not at start-up

    deadline = time.monotonic() + _REAP_SECONDS
    if running.inner_fd is not None:
        try:
            select.select([running.inner_fd], [], [], _REAP_SECONDS)
        finally:
            os.close(running.inner_fd)
            running.inner_fd = None
        return
    for member in family:
        while time.monotonic() < deadline:
            try:
                if member.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.Error:
                break
            time.sleep(0.001)


def finish(running: Running) -> Ended:
    """Kill what is left of the program, wait until all of it is gone, then sweep."""
    proc = running.proc
    try:
        family = _kill_tree(running)
        proc.wait()
        _wait_gone(running, family)
    finally:
        with _LOCK:
            _RUNNING.pop(proc.pid, None)
            stopped = proc.pid in _STOPPED
            _STOPPED.discard(proc.pid)
        if running.proxy is not None:  # nothing inside can use it any more
            running.proxy.stop()
    # every process of the sandbox has ended: nothing can race the sweep
    removed = tuple(running.sweep.run()) if running.sweep is not None else ()
    sandboxed = running.use.used == "bubblewrap"
    return Ended(proc.returncode, running.name, sandboxed, removed, stopped)


_SCOPE: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "proctor_stop_scope", default=None
)


def enter_stop_scope(stop: threading.Event) -> None:
    """Tie the programs this context starts from now on to ``stop`` (an MCP call's worker sets
    its call's event), so :func:`stop_scoped` ends exactly them."""
    _SCOPE.set(stop)


def stop_scoped(stop: threading.Event) -> int:
    """Kill the process tree of every program running now that was started under ``stop``
    (:func:`enter_stop_scope`): one cancelled call's, not the rest of the server's. Each then
    ends as stopped (:attr:`Ended.stopped`).

    Returns how many were stopped.
    """
    with _LOCK:
        running = [item for item in _RUNNING.values() if item.scope is stop]
        _STOPPED.update(item.proc.pid for item in running)
    for item in running:
        _kill_tree(item)
    return len(running)


def stop_running() -> int:
    """Kill the process tree of every program running now (the driver is stopping).

    Returns how many were stopped.
    """
    with _LOCK:
        running = list(_RUNNING.values())
        _STOPPED.update(item.proc.pid for item in running)
    for item in running:
        _kill_tree(item)
    return len(running)

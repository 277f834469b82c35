"""The supervised processes of a workspace, as their folders under ``.proctor/processes/`` say.

Each process has a folder (named by its ``process_id``) that its supervisor
(:mod:`proctor.runtime.tools.procs_supervisor`) keeps: ``spec.json`` (what was started, by which
run; no secret), ``state.json`` (how it runs or ended), ``lock`` (held while the supervisor
lives), ``control`` (a FIFO of commands) and the log segments. This module reads them for the
``process.*`` tools and for ``proctor process``: :func:`list_processes`, :func:`read_output`,
:func:`send` and :func:`stop`; and counts a run tree's live processes for the quota
(:func:`live_in_tree`, under :func:`quota_lock`).

A process whose supervisor died without recording how it ended (SIGKILL, the machine's OOM
killer) is reconciled the next time anything reads it: what is left of its program is killed
and it is recorded ``lost``, never left ``running``.

Refusals: ``process_unknown`` (no such process, or one another run started),
``process_id_invalid``, ``process_not_running`` (a write or resize to a process that ended).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import select
import signal
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from proctor.errors import RefusedCall, ToolFailed

__all__ = [
    "OUTPUT_SCHEMA",
    "PROCESS_ENV",
    "PROCESS_ID_PATTERN",
    "abandon",
    "describe",
    "folder_of",
    "list_processes",
    "live_in_tree",
    "quota_lock",
    "read_output",
    "reconcile_lost",
    "running",
    "send",
    "stop",
]

OUTPUT_SCHEMA = "proctor.process.output.v1"
PROCESS_ENV = "PROCTOR_PROCESS_ID"
"""Set to the process id in the environment the supervisor starts bubblewrap (or, unsandboxed,
the program) with; bubblewrap unsets it for the program."""
PROCESS_ID_PATTERN = r"^proc_[0-9a-f]{16}$"
_ID = re.compile(PROCESS_ID_PATTERN)
_HEADER = struct.Struct(">cI")
_STREAMS = {b"o": "stdout", b"e": "stderr", b"t": "terminal"}
_STOP_SECONDS = 15.0
# states a supervisor records before its end: found with the supervisor dead, they are lost
_UNENDED = ("starting", "running")


def folder_of(processes: Path, process_id: str, *, run_id: str | None) -> Path:
    """The folder of ``process_id``; with ``run_id``, only a process that run started.

    Raises:
        RefusedCall: ``process_id_invalid``, ``process_unknown``.
    """
    if not isinstance(process_id, str) or not _ID.match(process_id):
        raise RefusedCall(
            "a process id is 'proc_' and 16 hex digits, as process.start returns it",
            code="process_id_invalid",
        )
    folder = processes / process_id
    try:
        spec = json.loads((folder / "spec.json").read_text())
    except (OSError, ValueError) as exc:
        raise _unknown(process_id) from exc
    if run_id is not None and spec.get("run_id") != run_id:
        raise _unknown(process_id)
    return folder


def _unknown(process_id: str) -> RefusedCall:
    return RefusedCall(
        f"no process {process_id} was started by this run",
        code="process_unknown",
        details={"process_id": process_id},
    )


def running(folder: Path) -> bool:
    """Whether the supervisor of ``folder`` still lives (it holds ``lock`` for its life)."""
    try:
        fd = os.open(folder / "lock", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` is the state)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def _same(pid: object, started: object) -> bool:
    """Whether ``pid`` is still the process recorded: its start time (``/proc`` ticks) must
    match, so a reused pid is never signalled."""
    if not isinstance(pid, int) or pid <= 1 or not isinstance(started, int):
        return False
    fields = _stat_fields(pid)
    return fields is not None and len(fields) > 19 and int(fields[19]) == started


def _kill_session(leader: int) -> None:
    """Kill every process of the session ``leader`` began (the supervisor started the program
    in a session of its own)."""
    with contextlib.suppress(OSError):
        os.killpg(leader, signal.SIGKILL)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        member = _stat_fields(int(name))
        if member is not None and member[3] == str(leader):  # its session id
            with contextlib.suppress(OSError):
                os.kill(int(name), signal.SIGKILL)


def _kill_marked(process_id: str) -> None:
    """Kill every process started with ``PROCESS_ENV=process_id`` in its environment: a
    supervisor killed before it recorded the program leaves them unnamed (bubblewrap binds its
    life to the supervisor's only part-way through its set-up)."""
    mark = f"\0{PROCESS_ENV}={process_id}\0".encode()
    for _ in range(50):  # again until a pass finds none: one killed mid-fork has a new child
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    environ = b"\0" + handle.read()  # a zombie's reads empty
            except OSError:
                continue
            if mark in environ:
                found = True
                with contextlib.suppress(OSError):
                    os.kill(int(name), signal.SIGKILL)
        if not found:
            return


def _reconcile_lost(folder: Path, state: dict[str, Any]) -> dict[str, Any]:
    """The supervisor died while its state said ``starting`` or ``running``: end what is left
    of the program and record the process ``lost``."""
    if _same(state.get("sandbox_pid"), state.get("sandbox_start")):
        # bubblewrap's namespace init: its end ends every process of the sandbox
        with contextlib.suppress(OSError):
            os.kill(state["sandbox_pid"], signal.SIGKILL)
    if _same(state.get("child_pid"), state.get("child_start")):
        _kill_session(state["child_pid"])
    _kill_marked(folder.name)
    lost = {
        **state,
        "state": "lost",
        "ended_at": time.time(),
        "exit_code": None,
        "lost": "its supervisor was killed before it recorded how the process ended",
    }
    temp = folder / f".state.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        temp.write_text(json.dumps(lost, sort_keys=True))
        os.replace(temp, folder / "state.json")
    return lost


def abandon(folder: Path) -> None:
    """A start whose supervisor gave no word: once the supervisor is dead, kill what it
    started (named or not) and record the process ``lost``."""
    state = _unended_when_free(folder, (None, *_UNENDED))
    if state is not None:
        _reconcile_lost(folder, state)


def _unended_when_free(folder: Path, states: tuple[str | None, ...]) -> dict[str, Any] | None:
    """The state of ``folder`` when it is one of ``states`` (unended) and still is once its
    supervisor's lock was found free (a state read after that is final: see :func:`describe`);
    ``None`` otherwise. An ended state is final too: no lock is tried for it."""
    if _json(folder / "state.json").get("state") not in states or running(folder):
        return None
    state = _json(folder / "state.json")  # again, after the lock: the supervisor's last word
    return state if state.get("state") in states else None


def describe(folder: Path) -> dict[str, Any]:
    """A process as ``process.list`` and ``proctor process list`` show it (a process whose
    supervisor died unrecorded is reconciled to ``lost`` first).

    The lock is tried before the state is read: a supervisor records how its program ended
    and only then lets go of the lock, so a state read after the lock was found free is
    final. Read the other way round, a process ending between the two reads would be taken
    for a lost one and its record overwritten."""
    alive = running(folder)
    spec, state = _json(folder / "spec.json"), _json(folder / "state.json")
    if not alive and state.get("state") in _UNENDED:
        state = _reconcile_lost(folder, state)
    return {
        "process_id": folder.name,
        "run_id": spec.get("run_id"),
        "step_id": spec.get("step_id"),
        "argv": spec.get("argv", []),
        "cwd": spec.get("cwd_shown", "."),
        "tty": spec.get("tty") is not None,
        "sandbox": spec.get("sandbox"),
        "max_seconds": spec.get("max_seconds"),
        "running": alive,
        "state": "running" if alive else str(state.get("state", "exited")),
        "exit_code": None if alive else state.get("exit_code"),
        "stopped": state.get("stopped"),
        "started_at": state.get("started_at"),
        "ended_at": None if alive else state.get("ended_at"),
        "removed": [] if alive else list(state.get("removed", [])),
        "destinations": _destinations(folder / "egress.jsonl"),
    }


def _destinations(path: Path) -> list[dict[str, Any]]:
    """What the process reached through the egress proxy, once each, in order."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                found.append(entry)
    return found


def list_processes(processes: Path, *, run_id: str | None = None) -> list[dict[str, Any]]:
    """Every process of the workspace (with ``run_id``: of that run), oldest first."""
    if not processes.is_dir():
        return []
    found = []
    for folder in sorted(processes.iterdir()):
        if not _ID.match(folder.name):
            continue
        info = describe(folder)
        if run_id is None or info["run_id"] == run_id:
            found.append(info)
    found.sort(key=lambda item: item.get("started_at") or 0)
    return found


def reconcile_lost(processes: Path) -> list[str]:
    """Reconcile every process of the workspace whose supervisor died unrecorded (as reading
    it would); return their ids. Reads only each folder's ``state.json`` and lock."""
    lost: list[str] = []
    if not processes.is_dir():
        return lost
    for folder in sorted(processes.iterdir()):
        if not _ID.match(folder.name):
            continue
        state = _unended_when_free(folder, _UNENDED)
        if state is not None:
            _reconcile_lost(folder, state)
            lost.append(folder.name)
    return lost


@contextlib.contextmanager
def quota_lock(processes: Path) -> Iterator[None]:
    """Hold the workspace's process quota lock (``processes/.quota``, flock) while inside."""
    fd = os.open(processes / ".quota", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def live_in_tree(processes: Path, tree: str) -> list[str]:
    """The ids of the running processes of the run tree whose root is ``tree`` (a process
    started before trees were recorded counts by its own run)."""
    found: list[str] = []
    if not processes.is_dir():
        return found
    for folder in sorted(processes.iterdir()):
        if not _ID.match(folder.name) or not running(folder):
            continue
        spec = _json(folder / "spec.json")
        if (spec.get("tree") or spec.get("run_id")) == tree:
            found.append(folder.name)
    return found


def _segments(folder: Path) -> list[tuple[int, Path]]:
    out = []
    for path in folder.glob("seg-*"):
        with contextlib.suppress(ValueError):
            out.append((int(path.name[4:]), path))
    return sorted(out)


def read_output(folder: Path, *, after: int, max_bytes: int) -> dict[str, Any]:
    """The output logged after the cursor ``after``, at most ``max_bytes`` of it, stream by
    stream, with the next cursor and how many bytes the log no longer keeps. The text is
    returned raw (the supervisor already replaced delivered secrets); callers scrub it."""
    segments = _segments(folder)
    entries: list[dict[str, Any]] = []
    cursor, dropped, used = max(0, after), 0, 0
    if segments and cursor < segments[0][0]:
        dropped, cursor = segments[0][0] - cursor, segments[0][0]
    for index, (start, path) in enumerate(segments):
        end = segments[index + 1][0] if index + 1 < len(segments) else None
        if end is not None and cursor >= end:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        at = cursor - start
        while at + _HEADER.size <= len(data) and used < max_bytes:
            tag, size = _HEADER.unpack_from(data, at)
            if tag not in _STREAMS:
                raise RefusedCall(
                    f"cursor {after} is not one a read of this process returned",
                    code="cursor_invalid",
                    details={"after": after},
                )
            if at + _HEADER.size + size > len(data):
                break  # a record still being written
            body = data[at + _HEADER.size : at + _HEADER.size + size]
            if used + size > max_bytes and entries:
                break
            stream = _STREAMS.get(tag, "stdout")
            text = body.decode("utf-8", "replace")
            if entries and entries[-1]["stream"] == stream:
                entries[-1]["text"] += text
            else:
                entries.append({"stream": stream, "text": text})
            used += size
            at += _HEADER.size + size
        cursor = start + at
        if used >= max_bytes or (end is not None and cursor < end):
            break
    info = describe(folder)
    return {
        "schema": OUTPUT_SCHEMA,
        "process_id": folder.name,
        "entries": entries,
        "next_cursor": cursor,
        "dropped_bytes": dropped,
        "running": info["running"],
        "exit_code": info["exit_code"],
        "removed": info["removed"],
    }


def send(folder: Path, message: dict[str, Any]) -> None:
    """Give the supervisor one command (``write``, ``resize``, ``stop``).

    Raises:
        ToolFailed: ``process_not_running`` when the supervisor has ended.
    """
    line = (json.dumps(message) + "\n").encode("utf-8")
    try:
        fd = os.open(folder / "control", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _not_running(folder.name) from exc
    try:
        if not running(folder):
            raise _not_running(folder.name)
        os.write(fd, line)
    except BlockingIOError as exc:
        raise ToolFailed(
            "the process's supervisor is not taking commands now; try again",
            code="process_busy",
        ) from exc
    finally:
        os.close(fd)


def _not_running(process_id: str) -> ToolFailed:
    return ToolFailed(
        f"the process {process_id} has ended", code="process_not_running",
        details={"process_id": process_id},
    )  # fmt: skip


def write_input(folder: Path, data: str, call_id: str) -> None:
    """Type ``data`` to the process's stdin or terminal (applied once per ``call_id``).

    Raises:
        ToolFailed: ``process_not_running``, ``process_busy``.
    """
    encoded = base64.b64encode(data.encode("utf-8")).decode("ascii")
    send(folder, {"op": "write", "data": encoded, "call_id": call_id})


def stop(folder: Path) -> dict[str, Any]:
    """Stop the process: SIGTERM to its whole tree, SIGKILL after a grace period; return once
    its supervisor has ended (the tree with it). A supervisor that died without ending the
    tree has its recorded program tree killed here."""
    import psutil  # loaded when a process is ended, not at start-up

    state = _json(folder / "state.json")
    supervisor = state.get("supervisor_pid")
    if running(folder):
        with contextlib.suppress(ToolFailed):
            send(folder, {"op": "stop"})
        if isinstance(supervisor, int):
            _wait_pid(supervisor, _STOP_SECONDS)
    if running(folder) and isinstance(supervisor, int):
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(supervisor)
            for member in [*proc.children(recursive=True), proc]:
                with contextlib.suppress(psutil.Error):
                    member.send_signal(signal.SIGKILL)
        _wait_pid(supervisor, _STOP_SECONDS)
    return describe(folder)


def _wait_pid(pid: int, seconds: float) -> None:
    import psutil  # loaded when a process is ended, not at start-up

    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        select.select([fd], [], [], seconds)
    finally:
        os.close(fd)
    # the supervisor's own exit comes a moment before the kernel frees its lock
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                time.sleep(0.005)
                continue
        return

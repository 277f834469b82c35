"""The supervisor of one long-lived process (``process.start``): a small detached program.

Run as ``python -I procs_supervisor.py <folder>`` by :mod:`proctor.runtime.tools.procs`, with
the program's environment and the secret values delivered to it as one JSON document on stdin
(never on disk, never on a command line). It imports only the standard library (no psutil: the
tree is read from ``/proc``; no subprocess: the program is started with ``posix_spawn``), so
it starts quickly, costs little memory per process and loads nothing of the workspace. It:

- forks once and lets its first process exit, so the tool that spawned it can reap it: the
  supervisor then belongs to no run's driver and outlives the run's pause or end;
- holds ``lock`` (flock) for its whole life: the process is running exactly while it is held;
- once the program has started, caps its own address space (``RLIMIT_AS``,
  :data:`SUPERVISOR_MEMORY`; the program is not bound by it), so a run tree's supervisors cost
  at most its process quota times that;
- marks itself a child subreaper, so a program that double-forks is still its descendant and
  is killed with the tree (under bubblewrap the sandbox's PID namespace does that too, and
  ``--die-with-parent`` ends the sandbox if the supervisor itself is killed);
- writes the program's output to a bounded log in segments (``seg-<start offset>``; the
  oldest segment is dropped once the log passes its bound), each record tagged with its stream
  (``o`` stdout, ``e`` stderr, ``t`` terminal), exact delivered secret values replaced first;
- reads ``control`` (a FIFO) for ``write`` (stdin or the terminal, applied once per call id),
  ``resize`` (the terminal's rows and cols) and ``stop`` (SIGTERM to the whole tree, then
  SIGKILL after a grace period), and stops the program at its ``max_seconds`` the same way;
- once the whole tree has ended, removes what the program created that a run may never write
  (a new ``proctor.toml``, ``policies/``, a planted signing key: the sandbox's sweep, which
  :mod:`proctor.runtime.tools.procs` keeps in ``spec.json``), and names it in ``state.json``
  (``removed``);
- records how it ended in ``state.json`` and says on stdout, once, whether the program started.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import json
import os
import resource
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path
from typing import Any

SEGMENT_BYTES = 4 * 1024 * 1024
"""A log segment's size; two are kept, so a process's log holds at most 8 MiB."""
SUPERVISOR_MEMORY = 128 * 1024 * 1024
"""The address space a supervisor may use once its program runs (about 20 MiB are mapped)."""
_GRACE_SECONDS = 3.0
_SETUP_SECONDS = 10.0
_REDACTED = b"[REDACTED]"
_PR_SET_CHILD_SUBREAPER = 36
_HEADER = struct.Struct(">cI")


def _write_json(path: Path, value: dict[str, Any]) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(value, sort_keys=True))
    os.replace(temp, path)


class _Log:
    """The bounded, segmented output log; offsets are global and never reused."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.offset = 0
        self._start = 0
        self._fd = self._open(0)

    def _open(self, start: int) -> int:
        path = self.folder / f"seg-{start:016d}"
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def append(self, tag: bytes, data: bytes) -> None:
        for at in range(0, len(data), 65536):
            part = data[at : at + 65536]
            if self.offset - self._start + len(part) + _HEADER.size > SEGMENT_BYTES:
                os.close(self._fd)
                old = sorted(self.folder.glob("seg-*"))
                self._start = self.offset
                self._fd = self._open(self._start)
                for stale in old[:-1]:  # keep the segment just closed and the new one
                    stale.unlink(missing_ok=True)
            os.write(self._fd, _HEADER.pack(tag, len(part)) + part)
            self.offset += _HEADER.size + len(part)


class _Scrubber:
    """Replaces exact delivered secret values in one stream, holding back a tail so a value
    split between two reads is still seen whole."""

    def __init__(self, secrets: list[bytes]) -> None:
        self.secrets = sorted((s for s in secrets if s), key=len, reverse=True)
        self.hold = max((len(s) for s in self.secrets), default=1) - 1
        self.buffer = b""

    def feed(self, data: bytes, *, final: bool = False) -> bytes:
        self.buffer += data
        for secret in self.secrets:
            self.buffer = self.buffer.replace(secret, _REDACTED)
        if final or self.hold == 0:
            out, self.buffer = self.buffer, b""
        else:
            cut = max(0, len(self.buffer) - self.hold)
            out, self.buffer = self.buffer[:cut], self.buffer[cut:]
        return out


def _stat(pid: str) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` state, ``[1]`` ppid,
    ``[19]`` start time); empty once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rpartition(b")")[2].split()
    except OSError:
        return []


def _descendants(*, living: bool = False) -> list[int]:
    """Every process below this one, parents before their children (with ``living``, zombies
    left out). A child subreaper's orphans stay below it, so this is the program's whole tree."""
    below: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(name)
            if fields and not (living and fields[0] == b"Z"):
                below.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [os.getpid()]
    while todo:
        for child in below.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_tree(sig: int) -> None:
    for pid in reversed(_descendants()):
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
            return [int(part) for part in handle.read().split()]
    except (OSError, ValueError):
        return []


def _reap_tree(seconds: float) -> None:
    """Reap what the kill left until nothing lives below this process, for ``seconds`` at most
    (orphans of the program are re-parented here, and waited for like children)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        if not _descendants(living=True):
            return
        time.sleep(0.005)


class _Child:
    """The supervised program, started with ``posix_spawn`` in a session of its own, its
    standard descriptors ``fds`` (importing subprocess would cost each supervisor 1 MiB)."""

    def __init__(self, argv: list[str], *, cwd: str, env: dict[str, str], fds: list[int]) -> None:
        path = argv[0]
        if "/" not in path:  # looked up on the program's PATH, as subprocess does
            found = (os.path.join(d, path) for d in os.get_exec_path(env))
            path = next((f for f in found if os.path.isfile(f) and os.access(f, os.X_OK)), "")
            if not path:
                raise FileNotFoundError(2, "No such file or directory")
        here = os.getcwd()
        os.chdir(cwd)  # posix_spawn has no working-directory action before Python 3.13
        try:
            self.pid = os.posix_spawn(
                path, argv, env,
                file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)],
                setsid=True, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )  # fmt: skip
        finally:
            os.chdir(here)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code (``-signal`` when killed) once the program ended, else ``None``."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the end, ``timeout`` seconds at most (``None`` if it runs on)."""
        if timeout is not None and self.returncode is None:
            fd = os.pidfd_open(self.pid)
            try:
                select.select([fd], [], [], timeout)
            finally:
                os.close(fd)
            return self.poll()
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode


class Supervisor:
    """One supervised program, from start to its recorded end."""

    def __init__(self, folder: Path, spec: dict[str, Any], secret: dict[str, Any]) -> None:
        self.folder = folder
        self.spec = spec
        self.env: dict[str, str] = secret["env"]
        self.secrets = [s.encode("utf-8") for s in secret.get("secrets", [])]
        self.log = _Log(folder)
        self.applied: set[str] = set()
        self.stop_reason: str | None = None
        self.stop_at: float | None = None
        self.deadline = time.monotonic() + float(spec["max_seconds"])
        self.master: int | None = None
        self.proc: _Child | None = None
        self.stdin: int | None = None
        self.outputs: list[int] = []  # stdout, stderr (a terminal's master otherwise)
        self.sandbox: list[int | None] = [None, None]  # the namespace init: pid, start time

    def start(self) -> None:
        tty = self.spec.get("tty")
        argv, cwd = self.spec["launch"], self.spec["cwd"]
        if tty:
            master, slave = os.openpty()
            self._winsize(master, int(tty["rows"]), int(tty["cols"]))
            self.master = master
            try:
                self.proc = _Child(argv, cwd=cwd, env=self.env, fds=[slave, slave, slave])
            finally:
                os.close(slave)
        else:
            pipes = [os.pipe() for _ in range(3)]
            try:
                ends = [pipes[0][0], pipes[1][1], pipes[2][1]]
                self.proc = _Child(argv, cwd=cwd, env=self.env, fds=ends)
            except OSError:
                for pair in pipes:
                    os.close(pair[0])
                    os.close(pair[1])
                raise
            for fd in ends:
                os.close(fd)
            self.stdin, self.outputs = pipes[0][1], [pipes[1][0], pipes[2][0]]
        # recorded at once: a reader that finds this supervisor dead kills the program's session
        self.state(state="starting")
        if self.spec.get("sandbox") == "bubblewrap":
            self._await_sandbox()

    def _await_sandbox(self) -> None:
        """Record bubblewrap's namespace init (its child) as soon as it exists, then wait
        until it has started the program (at most :data:`_SETUP_SECONDS`).

        Until then the init has not bound its life to bubblewrap's (``--die-with-parent`` takes
        hold in it only once the sandbox is set up): a supervisor killed earlier would leave it
        running. So the start is reported only after this, and the init is recorded
        (``starting``) for whoever finds this supervisor dead
        (:mod:`proctor.runtime.tools.procs_log` kills it)."""
        assert self.proc is not None
        outer = self.proc.pid
        deadline = time.monotonic() + _SETUP_SECONDS
        while time.monotonic() < deadline:
            inner = _children(outer)[:1]
            if inner and self.sandbox[0] != inner[0]:
                fields = _stat(str(inner[0]))
                if len(fields) > 19:
                    self.sandbox = [inner[0], int(fields[19])]
                    self.state(state="starting")
            if inner and _children(inner[0]):
                return
            fields = _stat(str(outer))
            if not fields or fields[0] == b"Z":
                return
            time.sleep(0.001)

    @staticmethod
    def _winsize(fd: int, rows: int, cols: int) -> None:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def state(self, **extra: Any) -> None:
        assert self.proc is not None
        # the program's start time lets a reader that finds this supervisor dead tell the
        # program (its session) from a process that reused its pid
        started = _stat(str(self.proc.pid))
        _write_json(
            self.folder / "state.json",
            {
                "supervisor_pid": os.getpid(),
                "child_pid": self.proc.pid,
                "child_start": int(started[19]) if len(started) > 19 else None,
                "sandbox_pid": self.sandbox[0],
                "sandbox_start": self.sandbox[1],
                **extra,
            },
        )

    def _control(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        op, call = message.get("op"), str(message.get("call_id", ""))
        if op == "stop":
            self._begin_stop("stopped")
        elif op == "resize" and self.master is not None:
            with contextlib.suppress(OSError, ValueError, KeyError, struct.error):
                self._winsize(self.master, int(message["rows"]), int(message["cols"]))
        elif op == "write" and call not in self.applied:
            self.applied.add(call)
            data = base64.b64decode(str(message.get("data", "")))
            target = self.master
            if target is None:
                target = self.stdin
            if target is not None:
                with contextlib.suppress(OSError):
                    os.write(target, data)

    def _begin_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stop_at = time.monotonic() + _GRACE_SECONDS
            _signal_tree(signal.SIGTERM)

    def run(self) -> int:
        assert self.proc is not None
        streams: dict[int, tuple[bytes, _Scrubber]] = {}
        if self.master is not None:
            streams[self.master] = (b"t", _Scrubber(self.secrets))
        else:
            streams[self.outputs[0]] = (b"o", _Scrubber(self.secrets))
            streams[self.outputs[1]] = (b"e", _Scrubber(self.secrets))
        control_path = self.folder / "control"
        control = os.open(control_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        keep_open = os.open(control_path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        pending = b""
        while streams or self.proc.poll() is None:
            now = time.monotonic()
            if self.stop_reason is None and now >= self.deadline:
                self._begin_stop("max_seconds")
            if self.stop_at is not None and now >= self.stop_at:
                _signal_tree(signal.SIGKILL)
                self.stop_at = now + _GRACE_SECONDS
            wake = min(t for t in (self.deadline, self.stop_at or self.deadline) if t)
            ready, _, _ = select.select([*streams, control], [], [], max(0.0, wake - now) + 0.01)
            for fd in ready:
                if fd == control:
                    pending += os.read(control, 65536)
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        self._control(line)
                    continue
                tag, scrubber = streams[fd]
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # a terminal whose every holder ended reads EIO
                    chunk = b""
                if chunk:
                    self.log.append(tag, scrubber.feed(chunk))
                else:
                    self.log.append(tag, scrubber.feed(b"", final=True))
                    del streams[fd]
            if not streams and self.proc.poll() is None:
                # the streams closed but the program runs on: wait for it (or its stop)
                self.proc.wait(timeout=max(0.01, min(1.0, wake - time.monotonic())))
        code = self.proc.wait()
        assert code is not None
        _signal_tree(signal.SIGKILL)  # whatever outlived the program
        _reap_tree(_GRACE_SECONDS)
        os.close(control)
        os.close(keep_open)
        return code


class _Crossings:
    """The sandbox's crossings (``spec["relay"]``): the published ports and the egress proxy,
    served for the process's whole life, then closed and their folder removed.

    Loaded only when there are any, from the proctor this file belongs to."""

    def __init__(self, doc: Any, folder: Path, secrets: list[str]) -> None:
        self.secrets = secrets
        self.parts: list[Any] = []
        self.doc = doc if isinstance(doc, dict) else None
        self.folder = folder

    def start(self) -> None:
        if self.doc is None:
            return
        package_root = str(Path(__file__).resolve().parents[3])
        if package_root not in sys.path:
            sys.path.append(package_root)
        from proctor.runtime.boundary.netrelay import PublishedPorts

        where = Path(self.doc["folder"])
        if self.doc.get("egress") is not None:
            self.parts.append(_proxy(self.doc["egress"], where, self.folder, self.secrets))
        if self.doc.get("ports"):
            self.parts.append(PublishedPorts(where, self.doc["ports"]).start())

    def stop(self) -> None:
        for part in self.parts:
            part.stop()
        if self.doc is not None:
            import shutil

            shutil.rmtree(self.doc["folder"], ignore_errors=True)


def _proxy(doc: dict[str, Any], where: Path, folder: Path, secrets: list[str]) -> Any:
    """Start the egress proxy (in ``where``). Every connection is audited in the run's audit
    log; each destination reached is added to ``egress.jsonl`` once, which
    ``process.list`` / ``read`` / ``stop`` report. The host asked for is scrubbed of the
    secrets delivered to the process first."""
    from proctor.contracts.values import replace
    from proctor.runtime.boundary.egress_allow import EgressAllow
    from proctor.runtime.boundary.egress_proxy import Connection, EgressProxy
    from proctor.runtime.boundary.sanitize import TaintSet, scrub_text
    from proctor.runtime.records.audit import AuditLog

    taint = TaintSet(secrets)
    audit = AuditLog(Path(doc["audit"]))
    reached: set[tuple[str, int, str]] = set()

    def note(asked: Connection) -> None:
        connection = replace(asked, host=scrub_text(asked.host, taint))
        audit.emit("egress_connection", run_id=doc["run_id"], step_index=None, taint=taint,
                   tool="process.start", call_id=doc["call_id"], process_id=folder.name,
                   **connection.to_json())  # fmt: skip
        key = (connection.host, connection.port, connection.address or "")
        if connection.address is not None and key not in reached:
            reached.add(key)
            line = {"host": key[0], "port": key[1], "address": key[2]}
            with (folder / "egress.jsonl").open("a") as out:
                out.write(json.dumps(line, sort_keys=True) + "\n")

    allow = EgressAllow.parse(doc["allow"])
    return EgressProxy(allow, on_connection=note, folder=where).start()


def _sweep(doc: Any) -> list[str]:
    """Run the sandbox's sweep (every process of the tree has ended: nothing races it).

    Loaded only now, from the proctor this file belongs to, so the supervisor still starts on
    the standard library alone."""
    if not isinstance(doc, dict):
        return []
    package_root = str(Path(__file__).resolve().parents[3])
    if package_root not in sys.path:
        sys.path.append(package_root)
    from proctor.runtime.boundary.sandbox_sweep import Sweep

    return Sweep.from_json(doc).run()


def main(folder_text: str) -> int:
    """Supervise the program described in ``<folder>/spec.json``."""
    folder = Path(folder_text)
    secret = json.loads(sys.stdin.buffer.read() or b"{}")
    spec = json.loads((folder / "spec.json").read_text())
    lock = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if os.fork() != 0:
        os._exit(0)  # the spawning tool reaps this first process at once
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    supervisor = Supervisor(folder, spec, secret)
    crossings = _Crossings(spec.get("relay"), folder, list(secret.get("secrets", [])))
    try:
        crossings.start()
        supervisor.start()
    except Exception as exc:  # any failure to start is the tool's "not started", never lost
        crossings.stop()
        said = getattr(exc, "message", None) or getattr(exc, "strerror", None) or "error"
        _write_json(folder / "state.json", {"state": "failed", "error": said})
        sys.stdout.write(json.dumps({"started": False, "error": said}) + "\n")
        return 1
    if not crossings.parts:
        # a supervisor serving the sandbox's crossings runs proctor's proxy and relay threads,
        # each reserving a stack of address space: the cap is for the plain supervisor only
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_AS, (SUPERVISOR_MEMORY, SUPERVISOR_MEMORY))
    started = time.time()
    supervisor.state(state="running", started_at=started)
    sys.stdout.write(json.dumps({"started": True}) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    code = supervisor.run()
    crossings.stop()  # the whole tree has ended: nothing can use them any more
    removed = _sweep(spec.get("sweep"))
    supervisor.state(
        state="exited",
        started_at=started,
        ended_at=time.time(),
        exit_code=code,
        stopped=supervisor.stop_reason,
        removed=removed,
    )
    os.close(lock)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""``command.execute``: run one program with an exact argv, never through a shell.

- the argv is passed as is (no shell, no expansion); ``cwd`` resolves inside the workspace;
- the process gets a small fixed environment (``PATH``, ``HOME``, ``LANG``, ``LC_ALL``, ``TZ``,
  ``TMPDIR``), never the driver's secrets;
- it runs in a session of its own; on timeout, or when the driver is stopped
  (:func:`stop_running`), the whole process tree is killed (psutil walks the children, and the
  process group is killed too, so a grandchild that double-forked is not left behind);
- stdout and stderr are read in full to hash them, and kept up to ``max_output_bytes`` each;
- the result records the exit code and both output digests; a non-zero exit fails the call
  (``command_failed``) unless ``check: false``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import threading
import time
from typing import IO, Any

from proctor.errors import ToolFailed
from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.fs import PATH_SCHEMA

__all__ = ["COMMAND_EXECUTE", "CommandStopped", "stop_running"]

_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
_RUNNING: dict[int, subprocess.Popen[bytes]] = {}
_LOCK = threading.Lock()
_STOPPED: set[int] = set()


class CommandStopped(Exception):
    """The driver stopped a running command: its claim stays unsettled on purpose, so the next
    driver asks a person whether to run it again (a retry request)."""


DEFAULT_MAX_OUTPUT = 1024 * 1024


class _Sink:
    """Reads one pipe to its end: hashes every byte, keeps the first ``keep`` bytes."""

    def __init__(self, pipe: IO[bytes], keep: int) -> None:
        self.hash = hashlib.sha256()
        self.kept = bytearray()
        self.total = 0
        self._pipe, self._keep = pipe, keep
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with self._pipe:
            while chunk := self._pipe.read(65536):
                self.hash.update(chunk)
                self.total += len(chunk)
                room = self._keep - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]

    def result(self) -> tuple[str, str, bool]:
        text = bytes(self.kept).decode("utf-8", errors="replace")
        return text, "sha256:" + self.hash.hexdigest(), self.total > len(self.kept)


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    try:
        import psutil

        try:
            family = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            family = []
        for child in family:
            with contextlib.suppress(psutil.Error):
                child.kill()
    except ImportError:  # psutil is a dependency; the process group kill below still runs
        pass
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()


def stop_running() -> int:
    """Kill the process tree of every command running now (the driver is stopping).

    Returns how many commands were stopped.
    """
    with _LOCK:
        running = list(_RUNNING.values())
    for proc in running:
        with _LOCK:
            _STOPPED.add(proc.pid)
        _kill_tree(proc)
    return len(running)


def _execute(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    argv = [str(a) for a in args["argv"]]
    cwd = ctx.workspace.resolve(args.get("cwd", "."), "list")
    timeout = float(args.get("timeout_seconds", 60))
    keep = int(args.get("max_output_bytes", DEFAULT_MAX_OUTPUT))
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd.abs,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            shell=False,
        )
    except OSError as exc:
        raise ToolFailed(
            f"cannot start '{os.path.basename(argv[0])}': {exc.strerror}",
            code="command_not_started",
        ) from exc
    with _LOCK:
        _RUNNING[proc.pid] = proc
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Sink(proc.stdout, keep), _Sink(proc.stderr, keep)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # A finished leader may leave children holding the pipes: kill what is left either way.
        _kill_tree(proc)
        proc.wait()
        with _LOCK:
            _RUNNING.pop(proc.pid, None)
    for sink in (out, err):
        sink.thread.join(timeout=5)
    with _LOCK:
        stopped = proc.pid in _STOPPED
        _STOPPED.discard(proc.pid)
    if stopped:
        raise CommandStopped(f"the command {os.path.basename(argv[0])!r} was stopped")
    stdout, stdout_digest, stdout_cut = out.result()
    stderr, stderr_digest, stderr_cut = err.result()
    result = {
        "exit_code": proc.returncode,
        "timed_out": timed_out,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_digest": stdout_digest,
        "stderr_digest": stderr_digest,
        "stdout_truncated": stdout_cut,
        "stderr_truncated": stderr_cut,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
    facts = {k: v for k, v in result.items() if k not in ("stdout", "stderr")}
    if timed_out:
        raise ToolFailed(
            f"the command ran past {timeout:g} s and its process tree was killed",
            code="command_timeout",
            details=facts,
        )
    if proc.returncode != 0 and args.get("check", True):
        raise ToolFailed(
            f"the command exited with status {proc.returncode}",
            code="command_failed",
            details=facts,
        )
    return result


def _command_paths(args: Any) -> list[tuple[str, Access]]:
    cwd = args.get("cwd", ".") if isinstance(args, dict) else "."
    return [(cwd if isinstance(cwd, str) else "", "list")]


COMMAND_EXECUTE = Tool(
    name="command.execute",
    description="Run one program with an exact argv (no shell) in a workspace folder, with a "
    "timeout and bounded output; the exit code and output digests are recorded.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["argv"],
        "properties": {
            "argv": {
                "type": "array",
                "minItems": 1,
                "maxItems": 256,
                "items": {"type": "string", "minLength": 1, "maxLength": 4096},
            },
            "cwd": PATH_SCHEMA,
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
            "max_output_bytes": {"type": "integer", "minimum": 0, "maximum": 16 * 1024 * 1024},
            "check": {"type": "boolean"},
        },
    },
    effect="process",
    handler=_execute,
    paths=_command_paths,
    output_schema={
        "type": "object",
        "required": ["exit_code", "stdout_digest", "stderr_digest"],
        "properties": {
            "exit_code": {"type": "integer"},
            "timed_out": {"type": "boolean"},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "stdout_digest": {"type": "string"},
            "stderr_digest": {"type": "string"},
            "stdout_truncated": {"type": "boolean"},
            "stderr_truncated": {"type": "boolean"},
            "duration_ms": {"type": "integer"},
        },
    },
)

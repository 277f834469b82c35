"""``worker.run``: a worker step's Python function, run once in a sandboxed process.

A ``worker:`` step (``{module, function}``) becomes one call of this tool, so it passes the same
admission as any process tool (scope, schema, containment of the module, policy, the floor,
the sandbox choice) and is recorded with a call receipt whose inputs commit the module's
digest and the limits; the result carries them too. The function:

- runs in a separate ``python -I -S`` process (:mod:`proctor.runtime.tools.pyfunc_runner`) in
  the sandbox commands use, with no network whatever the run's egress, the workspace read-only
  unless the step says ``write: true``, and an environment of exactly ``PATH`` and the step's
  declared ``env`` (nothing of proctor's own environment, no credential);
- gets the module's source as proctor read and digested it (what runs is what was digested),
  its inputs as JSON (any input whose canonical JSON passes 64 KiB arrives as a
  ``proctor.artifact.v1`` reference to read with ``ctx.read``), and returns JSON;
- runs under ``RLIMIT_CPU`` and ``RLIMIT_AS`` and a wall timeout, its tree killed at the end;
  its result may not pass ``max_output_bytes``;
- calls tools back through admission with ``ctx.call(tool, args)``: each is a recorded call of
  the step, admitted against the step's ``calls.tools`` (an empty list admits nothing), never
  waiting on a person, at most ``max_calls`` of them.

Failures (:class:`~proctor.errors.ToolFailed`): ``worker_failed`` (the function raised),
``worker_cpu_limit``, ``worker_memory_limit``, ``worker_timeout``, ``worker_output_too_large``,
``worker_output_invalid``, ``worker_function_missing``, ``worker_crashed``; refusals:
``worker_module_invalid``, ``worker_module_changed`` (the module's bytes differ from the
``module_digest`` the step pinned).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

import base64
import contextlib
import hashlib
import json
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from proctor.contracts.values import dataclass, replace
from proctor.errors import ProctorError, RefusedCall, ToolFailed
from proctor.runtime.boundary.sandbox import bwrap_argv
from proctor.runtime.boundary.sandbox_paths import run_sandbox
from proctor.runtime.boundary.sandbox_setting import note_toolchains
from proctor.runtime.boundary.sandbox_sweep import Sweep
from proctor.runtime.tools import driver_watch, workspace_lock
from proctor.runtime.tools.artifacts import artifact_store
from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.command import call_sandbox, session_environ
from proctor.runtime.tools.fs import PATH_SCHEMA
from proctor.runtime.tools.fsutil import read_bytes

__all__ = ["INLINE_INPUT_BYTES", "PYFUNC_EXTRA", "WORKER_RUN", "PyfuncHooks"]

PYFUNC_EXTRA = "pyfunc"
"""The ``ToolContext.extras`` key of the :class:`PyfuncHooks` the engine hands a worker call."""
INLINE_INPUT_BYTES = 64 * 1024
_RUNNER = Path(__file__).with_name("pyfunc_runner.py")
_STDERR_KEEP = 64 * 1024
_MAX_MODULE_BYTES = 4 * 1024 * 1024


@dataclass
class PyfuncHooks:
    """How a worker's ``ctx.call`` reaches admission: ``call(tool, args)`` returns
    ``{"ok": True, "result": ...}`` or ``{"ok": False, "error": {code, message}}``."""

    call: Callable[[str, dict[str, Any]], dict[str, Any]]


def _limits(args: dict[str, Any]) -> dict[str, int]:
    given = dict(args.get("limits") or {})
    return {
        "cpu_seconds": int(given.get("cpu_seconds", 10)),
        "memory_mb": int(given.get("memory_mb", 512)),
        "wall_seconds": int(given.get("wall_seconds", 60)),
        "max_output_bytes": int(given.get("max_output_bytes", 1024 * 1024)),
        "max_calls": int(args.get("max_calls", 100)),
    }


def _inputs(ctx: ToolContext, inputs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The inputs as the function gets them: a value past 64 KiB becomes an artifact ref."""
    from proctor.receipts.canonical import canonical

    out: dict[str, Any] = {}
    refs: list[str] = []
    for name, value in inputs.items():
        data = canonical(value)
        if len(data) > INLINE_INPUT_BYTES:
            desc = artifact_store(ctx).put_bytes(
                data, run_id=ctx.run_id, media_type="application/json", source=f"input:{name}"
            )
            out[name] = desc
            refs.append(name)
        else:
            out[name] = value
    return out, refs


def _launch(
    ctx: ToolContext, env: dict[str, str], write: bool
) -> tuple[list[str], dict[str, str], str, Sweep | None]:
    argv = [sys.executable, "-I", "-S", str(_RUNNER)]
    use = call_sandbox(ctx)
    if use.used == "bubblewrap" and use.bwrap is not None:
        spec, sweep = run_sandbox(
            ctx.workspace,
            environ=session_environ(ctx),
            env=env,
            cwd=ctx.workspace.root,
            network=False,
        )
        note_toolchains(ctx.extras, spec.toolchains)
        if not write:  # the reach roots are bound read-only instead of read-write
            spec = replace(spec, writable=(), read_only=(*spec.writable, *spec.read_only))
        # the driver's watch ends the sandbox if the driver dies while bubblewrap sets it up
        launch, launch_env = driver_watch.marked(bwrap_argv(spec, argv, bwrap=use.bwrap), spec.env)
        return launch, launch_env, use.used, sweep
    return argv, env, use.used, None


def _rlimits(limits: dict[str, int]) -> Callable[[], None]:
    cpu, memory = limits["cpu_seconds"], limits["memory_mb"] * 1024 * 1024

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _lines(pipe: IO[bytes], limit: int, into: queue.Queue[bytes | None]) -> None:
    with pipe:
        while line := pipe.readline(limit + 1):
            into.put(line)
            if not line.endswith(b"\n"):
                break
    into.put(None)


def _drain(pipe: IO[bytes], kept: bytearray) -> None:
    with pipe:
        while chunk := pipe.read(65536):
            room = _STDERR_KEEP - len(kept)
            if room > 0:
                kept += chunk[:room]


class _Session:
    """One run of the function: the process, its pipes, and the calls it makes."""

    def __init__(self, ctx: ToolContext, proc: subprocess.Popen[bytes], limits: dict[str, int]):
        self.ctx, self.proc, self.limits = ctx, proc, limits
        self.calls = 0
        hooks = ctx.extras.get(PYFUNC_EXTRA)
        self.hooks = hooks if isinstance(hooks, PyfuncHooks) else None

    def reply(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.proc.stdin.flush()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = request.get("type")
        if kind == "call":
            if self.hooks is None:
                return _error("calls_unavailable", "this call of worker.run has no ctx.call")
            if self.calls >= self.limits["max_calls"]:
                return _error(
                    "max_calls_exceeded",
                    f"the worker made its {self.limits['max_calls']} calls (max_calls)",
                )
            self.calls += 1
            tool, args = request.get("tool"), request.get("args")
            return self.hooks.call(str(tool), args if isinstance(args, dict) else {})
        if kind == "read":
            try:
                page = artifact_store(self.ctx).read(
                    str(request.get("ref")),
                    run_id=self.ctx.run_id,
                    offset=int(request.get("offset") or 0),
                    length=int(request.get("length") or 1024 * 1024),
                )
            except (ProctorError, ValueError, TypeError) as exc:
                code = exc.code if isinstance(exc, ProctorError) else "read_invalid"
                return _error(code, str(exc))
            return {
                "ok": True,
                "result": {
                    "data": base64.b64encode(page.data).decode("ascii"),
                    "offset": page.offset,
                    "next_offset": page.next_offset,
                    "eof": page.eof,
                    "digest": page.digest,
                    "range_digest": "sha256:" + hashlib.sha256(page.data).hexdigest(),
                },
            }
        return _error("request_invalid", "unknown request")


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message}}


def _kill(proc: subprocess.Popen[bytes]) -> None:
    import psutil  # loaded when a process is ended, not at start-up

    with contextlib.suppress(psutil.Error):
        for member in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                member.kill()
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    proc.wait()


def _run(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    # a workspace that asks for it runs one tree's process tools at a time
    with workspace_lock.hold(ctx):
        return _run_held(ctx, args)


def _run_held(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target = ctx.workspace.resolve(args["module"], "read")
    if not target.rel.endswith(".py"):
        raise RefusedCall(
            f"'{target.rel}' is not a .py module", code="worker_module_invalid",
            details={"module": target.rel},
        )  # fmt: skip
    source = read_bytes(target)
    if len(source) > _MAX_MODULE_BYTES:
        raise RefusedCall("the module is larger than 4 MiB", code="worker_module_invalid")
    module_digest = "sha256:" + hashlib.sha256(source).hexdigest()
    pinned = args.get("module_digest")
    if pinned is not None and pinned != module_digest:
        raise RefusedCall(
            f"'{target.rel}' changed since its digest was taken; nothing was run",
            code="worker_module_changed",
            details={"module": target.rel},
        )
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RefusedCall("the module is not UTF-8 text", code="worker_module_invalid") from exc
    limits = _limits(args)
    inputs, as_refs = _inputs(ctx, dict(args.get("inputs") or {}))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **dict(args.get("env") or {})}
    write = bool(args.get("write", False))
    launch, launch_env, sandbox, sweep = _launch(ctx, env, write)
    started = time.monotonic()
    proc = subprocess.Popen(
        launch,
        cwd=ctx.workspace.root,
        env=launch_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_rlimits(limits),
    )
    session = _Session(ctx, proc, limits)
    lines: queue.Queue[bytes | None] = queue.Queue()
    kept = bytearray()
    assert proc.stdout is not None and proc.stderr is not None
    threading.Thread(
        target=_lines, args=(proc.stdout, limits["max_output_bytes"] + 4096, lines), daemon=True
    ).start()
    err_thread = threading.Thread(target=_drain, args=(proc.stderr, kept), daemon=True)
    err_thread.start()
    deadline = started + limits["wall_seconds"]
    start = {"source": text, "filename": target.rel, "function": args["function"], "inputs": inputs}
    session.reply(start)
    ending: dict[str, Any] | None = None
    timed_out = False
    try:
        while ending is None:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                timed_out = True
                break
            if line is None:
                break
            if not line.endswith(b"\n"):
                raise ToolFailed(
                    f"the worker's result passed max_output_bytes "
                    f"({limits['max_output_bytes']} bytes)",
                    code="worker_output_too_large",
                )
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("type") in ("done", "error"):
                ending = message
            else:
                reply = session.answer(message)
                reply["id"] = message.get("id")
                session.reply(reply)
    finally:
        _kill(proc)
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        err_thread.join(timeout=5)
    # every process of the worker has ended: nothing races the sweep
    removed = sweep.run() if sweep is not None and write else []
    facts = {
        "module": target.rel,
        "module_digest": module_digest,
        "function": args["function"],
        "limits": limits,
        "calls": session.calls,
        "sandbox": sandbox,
        "inputs_as_artifacts": as_refs,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
    if removed:
        raise ToolFailed(
            "the worker created files a run may never write (they grant authority); they were "
            f"removed: {', '.join(removed)}",
            code="authority_file_created",
            details={**facts, "removed": removed},
        )
    return _outcome(ending, timed_out, proc.returncode, limits, facts, bytes(kept))


def _outcome(
    ending: dict[str, Any] | None,
    timed_out: bool,
    returncode: int,
    limits: dict[str, int],
    facts: dict[str, Any],
    stderr: bytes,
) -> dict[str, Any]:
    from proctor.runtime.boundary.sanitize import scrub_text

    tail = scrub_text(stderr.decode("utf-8", "replace"))[-4096:]
    if timed_out:
        raise ToolFailed(
            f"the worker ran past its wall limit ({limits['wall_seconds']} s) and was killed",
            code="worker_timeout", details=facts,
        )  # fmt: skip
    if ending is None:
        cpu = returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU, -signal.SIGKILL, 137)
        if cpu:
            raise ToolFailed(
                f"the worker used up its CPU limit ({limits['cpu_seconds']} s) and was killed",
                code="worker_cpu_limit", details=facts,
            )  # fmt: skip
        raise ToolFailed(
            f"the worker ended without a result (status {returncode}): {tail[-300:]}",
            code="worker_crashed", details=facts,
        )  # fmt: skip
    if ending["type"] == "error":
        kind = str(ending.get("kind"))
        codes = {
            "memory": ("worker_memory_limit", "the worker ran out of its memory limit "
                       f"({limits['memory_mb']} MiB)"),
            "function_missing": ("worker_function_missing",
                                 f"the module has no function {facts['function']!r}"),
            "output_invalid": ("worker_output_invalid",
                               f"the worker's result is not JSON: {ending.get('message')}"),
        }  # fmt: skip
        code, message = codes.get(
            kind, ("worker_failed", f"the worker raised {scrub_text(str(ending.get('message')))}")
        )
        raise ToolFailed(message, code=code, details=facts)
    return {"output": ending.get("output"), **facts, "stderr": tail}


def _module_path(args: Any) -> list[tuple[str, Access]]:
    module = args.get("module") if isinstance(args, dict) else None
    return [(module if isinstance(module, str) else "", "read")]


WORKER_RUN = Tool(
    name="worker.run",
    description="Run a Python function of the workspace (def f(inputs, ctx) -> dict) once in "
    "a sandboxed process with CPU, memory and wall limits; JSON in, JSON out.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["module", "function"],
        "properties": {
            "module": PATH_SCHEMA,
            "function": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"},
            "inputs": {"type": "object", "maxProperties": 256, "additionalProperties": {}},
            "env": {
                "type": "object",
                "maxProperties": 64,
                "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"},
                "additionalProperties": {"type": "string", "maxLength": 4096},
            },
            "limits": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "cpu_seconds": {"type": "integer", "minimum": 1, "maximum": 600},
                    "memory_mb": {"type": "integer", "minimum": 64, "maximum": 4096},
                    "wall_seconds": {"type": "integer", "minimum": 1, "maximum": 3600},
                    "max_output_bytes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 16 * 1024 * 1024,
                    },
                },
            },
            "max_calls": {"type": "integer", "minimum": 0, "maximum": 10_000},
            "write": {"type": "boolean"},
            "module_digest": {"type": "string", "pattern": r"^sha256:[0-9a-f]{64}$"},
        },
    },
    effect="process",
    handler=_run,
    paths=_module_path,
    output_schema={
        "type": "object",
        "required": ["output", "module", "module_digest", "limits", "calls"],
    },
)

"""``command.execute``: run one program with an exact argv, never through a shell.

- the argv is passed as is (no shell, no expansion); ``cwd`` resolves inside the workspace;
- the process gets a small fixed environment: the names in :data:`INHERITED_ENV` copied from
  the session's environment, never ``PROCTOR_*`` settings or any other variable of the driver;
- a credential reaches it only through the step's ``credential:``: the driver's delivery seam
  (:func:`process_deliver`) puts the resolved credential in ``ctx.extras["process"]`` and the
  material is set in the child's environment under the delivery name the skill declared. It is
  never in the argv, the arguments, the driver's own ``os.environ`` or any record;
- it runs in the sandbox admission chose for the call (``ctx.extras["sandbox"]``, a
  :class:`~proctor.runtime.boundary.sandbox.SandboxUse`): under bubblewrap the home, the keys
  and proctor's state are hidden, only the run's reach roots are writable, there is no network
  without an egress grant, and the program has a PID namespace of its own (see
  ``docs/sandbox.md``); an entry a run may never write that the program created is removed
  afterwards and fails the call (``authority_file_created``);
- it runs in a session of its own (:mod:`proctor.runtime.tools.process`); on timeout, when it
  ends, or when the driver is stopped (:func:`stop_running`), everything it started is killed
  (under bubblewrap the end of the sandbox's first process ends its PID namespace, so nothing
  that calls ``setsid`` or double-forks is left behind);
- stdout and stderr are read to their end and kept up to ``max_output_bytes`` each; the kept
  text is scrubbed (the run's taint set, credential shapes, secret-named assignments) before
  it is cut, returned or digested;
- the result records the exit code, the byte count of each stream and the digest of each
  stream's *returned* (scrubbed) text. A digest of the raw stream would let anyone holding the
  record confirm a guessed secret offline (hash ``guess + "\\n"`` and compare), so none is
  kept; like ``http.request``'s ``body_digest``, the digest is of what the result carries.
  A non-zero exit fails the call (``command_failed``) unless ``check: false``.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from proctor.contracts.values import dataclass, field
from proctor.errors import CredentialError, ToolFailed
from proctor.runtime.boundary.sandbox import (
    SANDBOX_EXTRA,
    SandboxUse,
    sandbox_setting,
)
from proctor.runtime.boundary.sandbox_check import sandbox_for_call
from proctor.runtime.boundary.sandbox_setting import note_toolchains
from proctor.runtime.tools import process, workspace_lock
from proctor.runtime.tools.base import Access, CommandStopped, Tool, ToolContext
from proctor.runtime.tools.fs import PATH_SCHEMA

# re-exported: the driver stops every running command through it
from proctor.runtime.tools.process import stop_running as stop_running

if TYPE_CHECKING:
    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.home.credentials.model import ResolvedCredential

__all__ = [
    "COMMAND_EXECUTE",
    "INHERITED_ENV",
    "PROCESS_EXTRA",
    "CommandStopped",
    "ProcessContext",
    "call_sandbox",
    "child_env",
    "process_context",
    "process_deliver",
    "session_environ",
    "stop_running",
]

INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
"""The only variables a command inherits from the session's environment (when set there)."""

PROCESS_EXTRA = "process"
"""The ``ToolContext.extras`` key holding the :class:`ProcessContext`."""

# Raw bytes read past ``max_output_bytes`` so that a secret straddling the cut is still whole
# when the kept text is scrubbed; the scrubbed text is cut afterwards.
_SCRUB_SLACK = 64 * 1024


DEFAULT_MAX_OUTPUT = 1024 * 1024


@dataclass
class ProcessContext:
    """What ``command.execute`` needs beyond its arguments, built by the driver per call.

    Attributes:
        credentials: the credential resolved for this step (its ``credential:``), by name;
            each is set in the child's environment under its declared delivery name.
        taint: the run's taint set; delivered values are added, outputs are scrubbed with it.
        environ: the session's environment, the source of :data:`INHERITED_ENV` (the
            driver's ``os.environ`` when ``None``).
        undelivered: the step's ``credential:`` when it was not resolved (the call fails).
        declared: the package's declared ``environment`` variables that are set, by name
            (non-secret by declaration), given to the program beside the inherited names.
    """

    credentials: Mapping[str, ResolvedCredential] = field(default_factory=dict)
    taint: TaintSet | None = None
    environ: Mapping[str, str] | None = field(default=None, repr=False)
    undelivered: str | None = None
    declared: Mapping[str, str] = field(default_factory=dict, repr=False)


class _Sink:
    """Reads one pipe to its end: counts every byte, keeps the first ``keep`` bytes (+ slack)."""

    def __init__(self, pipe: IO[bytes], keep: int) -> None:
        self.kept = bytearray()
        self.total = 0
        self._pipe, self._keep = pipe, keep
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with self._pipe:
            while chunk := self._pipe.read(65536):
                self.total += len(chunk)
                room = self._keep + _SCRUB_SLACK - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]

    def result(self, taint: TaintSet | None) -> tuple[str, str, bool]:
        """The scrubbed text (at most ``keep`` bytes), its digest, and whether it was cut."""
        from proctor.runtime.boundary.sanitize import scrub_text

        text = scrub_text(bytes(self.kept).decode("utf-8", errors="replace"), taint)
        cut = self.total > self._keep
        if cut:
            text = text.encode("utf-8")[: self._keep].decode("utf-8", errors="ignore")
        return text, "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(), cut


def _process(ctx: ToolContext) -> ProcessContext:
    proc = ctx.extras.get(PROCESS_EXTRA)
    return proc if isinstance(proc, ProcessContext) else ProcessContext()


def _child_env(proc: ProcessContext) -> dict[str, str]:
    """The child's whole environment: the inherited names, then the delivered credential.

    Raises:
        CredentialError: ``credential_not_delivered`` when the step's credential was not
            resolved, ``credential_env_reserved`` when a delivery name would replace an
            inherited variable or name a ``PROCTOR_*`` setting (nothing is started either way).
    """
    if proc.undelivered is not None:
        raise CredentialError(
            f"credential {proc.undelivered!r} was not resolved for this step; declare it in "
            "run.yaml and name it with the step's credential:",
            code="credential_not_delivered",
            details={"credential": proc.undelivered},
        )
    base = os.environ if proc.environ is None else proc.environ
    env = {name: base[name] for name in INHERITED_ENV if name in base}
    env.update(
        (name, value)
        for name, value in proc.declared.items()
        if name not in INHERITED_ENV and not name.upper().startswith("PROCTOR_")
    )
    for credential in proc.credentials.values():
        if credential.env in INHERITED_ENV or credential.env.upper().startswith("PROCTOR_"):
            raise CredentialError(
                f"credential {credential.name!r} is delivered as {credential.env}, a name a "
                "command may not receive a secret in; declare another delivery name",
                code="credential_env_reserved",
                details={"credential": credential.name, "env": credential.env},
            )
        value = credential.secret.reveal()
        if proc.taint is not None:
            proc.taint.add(value)
        env[credential.env] = value
    return env


def process_context(ctx: ToolContext) -> ProcessContext:
    """The call's :class:`ProcessContext` (an empty one when the driver gave none)."""
    return _process(ctx)


def child_env(proc: ProcessContext) -> dict[str, str]:
    """The environment a process tool's program starts with (see :func:`_child_env`).

    Raises:
        CredentialError: ``credential_not_delivered``, ``credential_env_reserved``.
    """
    return _child_env(proc)


def session_environ(ctx: ToolContext) -> Mapping[str, str]:
    """The session's environment of the call (the driver's ``os.environ`` when it gave none).

    Every process tool builds its sandbox from this one: the proctor home, signing key, run
    database, audit log and receipt folder a session names in its own environment (the Python
    API's ``Session(environ=...)``) are hidden only if the spec is built from it.
    """
    environ = _process(ctx).environ
    return os.environ if environ is None else environ


def call_sandbox(ctx: ToolContext) -> SandboxUse:
    """The sandbox admission chose for the call (``required`` without admission).

    Raises:
        RefusedCall: ``sandbox_unavailable`` (only without admission's choice).
    """
    return _sandbox(ctx)


def _sandbox(ctx: ToolContext) -> SandboxUse:
    """The sandbox admission chose; a handler called without admission gets ``required``.

    Raises:
        RefusedCall: ``sandbox_unavailable`` (only without admission's choice).
    """
    use = ctx.extras.get(SANDBOX_EXTRA)
    if isinstance(use, SandboxUse):
        return use
    return sandbox_for_call(sandbox_setting(os.environ, default="required"), network=False)


def _execute(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    # a workspace that asks for it runs one tree's process tools at a time
    with workspace_lock.hold(ctx):
        return _execute_held(ctx, args)


def _execute_held(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    argv = [str(a) for a in args["argv"]]
    cwd = ctx.workspace.resolve(args.get("cwd", "."), "list")
    timeout = float(args.get("timeout_seconds", 60))
    keep = int(args.get("max_output_bytes", DEFAULT_MAX_OUTPUT))
    proc_ctx = _process(ctx)
    env = _child_env(proc_ctx)
    started = time.monotonic()
    running = process.start(
        argv,
        cwd=cwd.abs,
        env=env,
        use=_sandbox(ctx),
        workspace=ctx.workspace,
        environ=session_environ(ctx),
        deadline=started + timeout,
    )
    note_toolchains(ctx.extras, running.toolchains)
    assert running.proc.stdout is not None and running.proc.stderr is not None
    out, err = _Sink(running.proc.stdout, keep), _Sink(running.proc.stderr, keep)
    try:
        timed_out = not process.wait_for(running, started + timeout)
    finally:
        # A finished leader may leave children holding the pipes: kill what is left either way.
        ended = process.finish(running)
    for sink in (out, err):
        sink.thread.join(timeout=5)
    if ended.stopped:
        ran = time.monotonic() - started
        raise CommandStopped(
            f"the command {os.path.basename(argv[0])!r} was stopped {ran:.1f} s after it"
            " started: its whole process tree was killed"
        )
    ended.check_started(bytes(err.kept[:64]))
    stdout, stdout_digest, stdout_cut = out.result(proc_ctx.taint)
    stderr, stderr_digest, stderr_cut = err.result(proc_ctx.taint)
    result = {
        "exit_code": ended.returncode,
        "timed_out": timed_out,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_digest": stdout_digest,
        "stderr_digest": stderr_digest,
        "stdout_truncated": stdout_cut,
        "stderr_truncated": stderr_cut,
        "stdout_bytes": out.total,
        "stderr_bytes": err.total,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
    facts = {k: v for k, v in result.items() if k not in ("stdout", "stderr")}
    if ended.removed:
        raise ToolFailed(
            "the command created files a run may never write (they grant authority); they "
            f"were removed: {', '.join(ended.removed)}",
            code="authority_file_created",
            details={**facts, "removed": list(ended.removed)},
        )
    if timed_out:
        raise ToolFailed(
            f"the command ran past {timeout:g} s and its process tree was killed",
            code="command_timeout",
            details=facts,
        )
    if ended.returncode != 0 and args.get("check", True):
        raise ToolFailed(
            f"the command exited with status {ended.returncode}",
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
    "timeout and bounded, scrubbed output; the exit code and output digests are recorded.",
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
            "stdout_bytes": {"type": "integer"},
            "stderr_bytes": {"type": "integer"},
            "duration_ms": {"type": "integer"},
        },
    },
)


def process_deliver(
    credentials: Mapping[str, ResolvedCredential],
    step_credentials: Mapping[str, str | None],
    *,
    taint: TaintSet | None,
    environ: Mapping[str, str] | None = None,
    declared: Mapping[str, str] | None = None,
) -> Callable[[Any, Tool], dict[str, Any]]:
    """The admission ``deliver`` seam for process tools.

    ``credentials`` is what :func:`proctor.runtime.home.credentials.resolve_credentials` returned
    for the command; ``step_credentials`` maps a step id to its ``credential:``. A call gets
    only its own step's credential, so a step that names none starts its process with none.
    Every process call gets the run's taint set, so its output is scrubbed with it, and the
    package's ``declared`` environment.
    """

    def deliver(spec: Any, tool: Tool) -> dict[str, Any]:
        if tool.effect != "process":
            return {}
        name = step_credentials.get(getattr(spec, "step_id", None) or "")
        own = {name: credentials[name]} if name is not None and name in credentials else {}
        missing = name if name is not None and not own else None
        return {
            PROCESS_EXTRA: ProcessContext(
                credentials=own,
                taint=taint,
                environ=environ,
                undelivered=missing,
                declared=dict(declared or {}),
            )
        }

    return deliver

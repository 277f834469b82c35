"""``process.start/read/write/resize/stop/list``: programs that outlive the call that started
them (a dev server, a watcher, an interactive program).

- ``process.start {command, args?, cwd?, env?, tty?: {rows, cols}, max_seconds?, ports?}`` is
  a process tool like ``command.execute``: under the floor, its argv exact (no shell), its
  environment the inherited names, the step's delivered credential and the declared non-secret
  ``env`` only (``PROCTOR_*`` and the inherited names may not be set), and the same sandbox
  admission chose (bubblewrap: no home, no keys, only the reach writable, a network namespace
  of its own whose only way out is the egress proxy when the run grants egress, a PID
  namespace of its own). ``ports`` (a dev server's) are published on the host's ``127.0.0.1``
  at the same numbers for the process's life (``port_in_use`` when one is taken there). It
  starts a supervisor of its own
  (:mod:`proctor.runtime.tools.procs_supervisor`), which owns the program for its life, keeps
  its output in a bounded log under ``.proctor/processes/`` and stops it at ``max_seconds``
  (3600 by default, at most 86400). It returns a ``proctor.process.v1`` with the
  ``process_id``. The process belongs to the run that started it and keeps running while the
  run pauses or after it ends; only that run's calls (and a person, ``proctor process``) reach it.
  A run's tree (the root run and its child runs) has at most :data:`DEFAULT_MAX_RUNNING` live
  processes, or fewer as ``proctor.toml [processes] max_running`` says; a start past that is
  refused ``process_quota`` before anything starts;
- ``process.read {process_id, after?, max_bytes?}`` returns the output after a cursor, each part
  tagged ``stdout``, ``stderr`` or ``terminal``, the next cursor, the bytes the log dropped and
  whether it still runs. A secret delivered to the process is replaced in the log before it is
  written, and the result is scrubbed by admission like any other;
- ``process.write {process_id, input}`` types to its stdin or terminal (once per call);
  ``process.resize {process_id, rows, cols}``; ``process.stop {process_id}`` terminates the whole
  tree, then kills it, and returns once none of it is left; ``process.list`` lists the run's.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from proctor.errors import ConfigError, RefusedCall, ToolFailed
from proctor.runtime.boundary.netrelay import Relay, check_ports, make_folder
from proctor.runtime.boundary.sandbox import SandboxUse, bwrap_argv
from proctor.runtime.boundary.sandbox_paths import run_sandbox
from proctor.runtime.boundary.sandbox_setting import note_toolchains
from proctor.runtime.tools import procs_log, workspace_lock
from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.command import (
    INHERITED_ENV,
    call_sandbox,
    child_env,
    process_context,
    session_environ,
)
from proctor.runtime.tools.fs import PATH_SCHEMA
from proctor.runtime.tools.process import check_startable

__all__ = ["DEFAULT_MAX_RUNNING", "process_tools", "processes_dir"]

PROCESS_SCHEMA = "proctor.process.v1"
DEFAULT_MAX_SECONDS = 3600
DEFAULT_MAX_RUNNING = 8
"""Live processes one run tree may have at once; a workspace may only lower it."""
_START_SECONDS = 15.0
_SUPERVISOR = Path(__file__).with_name("procs_supervisor.py")
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_ID_SCHEMA: dict[str, Any] = {"type": "string", "pattern": procs_log.PROCESS_ID_PATTERN}


def processes_dir(ctx: ToolContext) -> Path:
    """``.proctor/processes`` of the call's workspace (created 0700).

    Raises:
        RefusedCall: ``state_dir_unsafe``.
    """
    return ctx.workspace.private_dir("processes")


def _env(ctx: ToolContext, declared: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    proc = process_context(ctx)
    env = child_env(proc)
    delivered = [env[c.env] for c in proc.credentials.values() if c.env in env]
    for name, value in declared.items():
        if name in INHERITED_ENV or name.upper().startswith("PROCTOR_") or name in env:
            raise RefusedCall(
                f"env may not set {name}: it is inherited, a proctor setting or a delivered "
                "credential's name",
                code="env_reserved",
                details={"name": name},
            )
        env[name] = value
    return env, delivered


def max_running(workspace_root: Path) -> int:
    """``[processes] max_running`` of ``<root>/proctor.toml`` (:data:`DEFAULT_MAX_RUNNING` when
    either is absent).

    Raises:
        ConfigError: ``bad_config``: not valid TOML, an unknown key, or a value that is not a
            whole number from 1 to :data:`DEFAULT_MAX_RUNNING` (a workspace only narrows it).
    """
    path = workspace_root / "proctor.toml"
    if not path.is_file():
        return DEFAULT_MAX_RUNNING
    import tomllib  # read only when the workspace has a proctor.toml

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"proctor.toml cannot be read: {exc}", code="bad_config") from exc
    table = doc.get("processes", {})
    if not isinstance(table, dict) or set(table) - {"max_running"}:
        raise ConfigError(
            "proctor.toml: [processes] must be a table whose only key is max_running",
            code="bad_config",
        )
    value = table.get("max_running", DEFAULT_MAX_RUNNING)
    if isinstance(value, bool) or not isinstance(value, int):
        value = 0
    if not 1 <= value <= DEFAULT_MAX_RUNNING:
        raise ConfigError(
            f"proctor.toml: [processes] max_running must be a whole number from 1 to "
            f"{DEFAULT_MAX_RUNNING} (a workspace can lower proctor's limit, not raise it)",
            code="bad_config",
        )
    return value


def _check_quota(ctx: ToolContext, processes: Path, tree: str) -> None:
    """Refuse a start past the tree's limit of live processes (held under the quota lock,
    so two starts cannot both take the last place).

    Raises:
        RefusedCall: ``process_quota``.
        ConfigError: ``bad_config`` (``[processes]`` of ``proctor.toml``).
    """
    limit = max_running(ctx.workspace.root)
    live = procs_log.live_in_tree(processes, tree)
    if len(live) >= limit:
        raise RefusedCall(
            f"this run's tree already has {len(live)} running process(es), its limit is "
            f"{limit}: stop one (process.stop, or `proctor process stop ID`) before starting "
            "another",
            code="process_quota",
            details={"running": live, "limit": limit},
        )


def _start(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    # a workspace that asks for it runs one tree's process tools at a time
    with workspace_lock.hold(ctx):
        processes = processes_dir(ctx)
        tree = workspace_lock.tree_of(ctx)
        # the quota lock is held from the count until the supervisor holds its own lock (or
        # failed): a process is counted live from then on
        with procs_log.quota_lock(processes):
            _check_quota(ctx, processes, tree)
            return _start_counted(ctx, args, processes, tree)


def _start_counted(
    ctx: ToolContext, args: dict[str, Any], processes: Path, tree: str
) -> dict[str, Any]:
    argv = [str(args["command"]), *(str(a) for a in args.get("args", []))]
    cwd = ctx.workspace.resolve(args.get("cwd", "."), "list")
    env, delivered = _env(ctx, dict(args.get("env", {})))
    check_startable(argv[0], cwd.abs, env)
    use = call_sandbox(ctx)
    ports = check_ports(args.get("ports", []))
    launch, launch_env, sweep, relay = argv, env, None, None
    if use.used == "bubblewrap" and use.bwrap is not None:
        spec, sweep = run_sandbox(
            ctx.workspace,
            environ=session_environ(ctx),
            env=env,
            cwd=cwd.abs,
            network=use.network,
            argv0=argv[0],
        )
        relay = _supervised_relay(ctx, use, ports)
        crossings = None
        if relay is not None:
            crossings = Relay(Path(relay["folder"]), relay["egress"] is not None, ports)
        launch = bwrap_argv(spec, argv, bwrap=use.bwrap, relay=crossings)
        launch_env = dict(spec.env)
        note_toolchains(ctx.extras, spec.toolchains)
    process_id = "proc_" + secrets.token_hex(8)
    # bubblewrap (and an unsandboxed program) carry the process id in their environment, so
    # a reader that finds the supervisor dead finds them even if it died before recording them
    launch_env = {**launch_env, procs_log.PROCESS_ENV: process_id}
    if launch is not argv:
        launch = [launch[0], "--unsetenv", procs_log.PROCESS_ENV, *launch[1:]]
    folder = processes / process_id
    folder.mkdir(mode=0o700)
    os.mkfifo(folder / "control", 0o600)
    max_seconds = int(args.get("max_seconds", DEFAULT_MAX_SECONDS))
    spec_doc = {
        "run_id": ctx.run_id,
        "tree": tree,
        "step_id": ctx.step_id,
        "call_id": ctx.call_id,
        "argv": argv,
        "launch": launch,
        "cwd": str(cwd.abs),
        "cwd_shown": cwd.rel,
        "tty": args.get("tty"),
        "max_seconds": max_seconds,
        "sandbox": use.used,
        # the supervisor removes, once the whole tree has ended, what the process created
        # that a run may never write (kept here, in .proctor/, out of the process's reach)
        "sweep": None if sweep is None else sweep.to_json(),
        # the supervisor runs the egress proxy and the published ports as long as it lives
        "relay": relay,
    }
    (folder / "spec.json").write_text(json.dumps(spec_doc, sort_keys=True))
    _spawn(folder, {"env": launch_env, "secrets": delivered})
    return {
        "schema": PROCESS_SCHEMA,
        "process_id": process_id,
        "argv": argv,
        "cwd": cwd.rel,
        "tty": args.get("tty") is not None,
        "max_seconds": max_seconds,
        "sandbox": use.used,
        "ports": list(ports) if use.used == "bubblewrap" else [],
        "running": procs_log.running(folder),
    }


def _supervised_relay(
    ctx: ToolContext, use: SandboxUse, ports: tuple[int, ...]
) -> dict[str, Any] | None:
    """What the supervisor needs to serve the sandbox's crossings (``None`` with neither an
    egress grant nor a published port): the private folder of their sockets (named now: the
    sandbox's command line binds it), the ports, and for the egress proxy the allow entries
    and where and for what call it audits."""
    if not use.proxied and not ports:
        return None
    from proctor.runtime.records.audit import audit_path

    egress = None
    if use.proxied:
        egress = {
            "allow": list(use.egress),
            "audit": str(audit_path(ctx.workspace.root, session_environ(ctx))),
            "run_id": ctx.run_id,
            "call_id": ctx.call_id,
        }
    return {"folder": str(make_folder()), "ports": list(ports), "egress": egress}


def _spawn(folder: Path, secret: dict[str, Any]) -> None:
    """Start the supervisor, hand it the environment on stdin, wait for its word.

    Raises:
        ToolFailed: ``command_not_started``.
    """
    proc = subprocess.Popen(
        [sys.executable, "-I", str(_SUPERVISOR), str(folder)],
        cwd=folder,
        env={"PATH": os.environ.get("PATH", os.defpath)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    with proc.stdin:
        proc.stdin.write(json.dumps(secret).encode("utf-8"))
    line = b""
    deadline = time.monotonic() + _START_SECONDS
    with proc.stdout:
        fd = proc.stdout.fileno()
        while b"\n" not in line and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            line += chunk
    proc.wait(timeout=_START_SECONDS)
    try:
        word = json.loads(line.split(b"\n", 1)[0] or b"{}")
    except ValueError:
        word = {}
    if not word.get("started"):
        procs_log.abandon(folder)
        why = word.get("error", "no word from its supervisor")
        raise ToolFailed(
            f"the process could not be started ({why})",
            code="command_not_started",
        )


def _folder(ctx: ToolContext, args: dict[str, Any]) -> Path:
    return procs_log.folder_of(processes_dir(ctx), args["process_id"], run_id=ctx.run_id)


def _read(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return procs_log.read_output(
        _folder(ctx, args),
        after=int(args.get("after", 0)),
        max_bytes=int(args.get("max_bytes", 64 * 1024)),
    )


def _write(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    procs_log.write_input(_folder(ctx, args), args["input"], ctx.call_id)
    return {"process_id": args["process_id"], "written": len(args["input"].encode("utf-8"))}


def _resize(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    folder = _folder(ctx, args)
    procs_log.send(folder, {"op": "resize", "rows": args["rows"], "cols": args["cols"]})
    return {"process_id": args["process_id"], "rows": args["rows"], "cols": args["cols"]}


def _stop(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return procs_log.stop(_folder(ctx, args))


def _list(ctx: ToolContext, _args: dict[str, Any]) -> dict[str, Any]:
    return {"processes": procs_log.list_processes(processes_dir(ctx), run_id=ctx.run_id)}


def _cwd_path(args: Any) -> list[tuple[str, Access]]:
    cwd = args.get("cwd", ".") if isinstance(args, dict) else "."
    return [(cwd if isinstance(cwd, str) else "", "list")]


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }


_DESCRIBED: dict[str, Any] = {"type": "object", "required": ["process_id", "running"]}


def process_tools() -> tuple[Tool, ...]:
    """The six ``process.*`` tools."""
    start = _object(
        {
            "command": {"type": "string", "minLength": 1, "maxLength": 4096},
            "args": {
                "type": "array",
                "maxItems": 255,
                "items": {"type": "string", "maxLength": 4096},
            },
            "cwd": PATH_SCHEMA,
            "env": {
                "type": "object",
                "maxProperties": 64,
                "propertyNames": {"pattern": _ENV_NAME},
                "additionalProperties": {"type": "string", "maxLength": 4096},
            },
            "tty": _object(
                {
                    "rows": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "cols": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
                ["rows", "cols"],
            ),
            "max_seconds": {"type": "integer", "minimum": 1, "maximum": 86400},
            # ports the program listens on inside its sandbox, published on the host's loopback
            "ports": {
                "type": "array",
                "maxItems": 16,
                "items": {"type": "integer", "minimum": 1024, "maximum": 65535},
            },
        },
        ["command"],
    )
    return (
        Tool(
            name="process.start",
            description="Start a long-lived program (a dev server, a watcher) in the sandbox "
            "under a supervisor; returns its process_id. It outlives the call.",
            schema=start,
            effect="process",
            handler=_start,
            paths=_cwd_path,
            output_schema={"type": "object", "required": ["schema", "process_id", "running"]},
        ),
        Tool(
            name="process.read",
            description="Read a started process's output after a cursor (stdout and stderr "
            "tagged), with the next cursor and whether it still runs.",
            schema=_object(
                {
                    "process_id": _ID_SCHEMA,
                    "after": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": 1024 * 1024},
                },
                ["process_id"],
            ),
            effect="read",
            handler=_read,
            output_schema={
                "type": "object",
                "required": ["schema", "entries", "next_cursor", "running"],
            },
        ),
        Tool(
            name="process.write",
            description="Type text to a started process's stdin or terminal.",
            schema=_object(
                {"process_id": _ID_SCHEMA, "input": {"type": "string", "maxLength": 65536}},
                ["process_id", "input"],
            ),
            effect="process",
            handler=_write,
            output_schema={"type": "object", "required": ["process_id", "written"]},
        ),
        Tool(
            name="process.resize",
            description="Resize a started process's terminal.",
            schema=_object(
                {
                    "process_id": _ID_SCHEMA,
                    "rows": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "cols": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
                ["process_id", "rows", "cols"],
            ),
            effect="process",
            handler=_resize,
            output_schema={"type": "object", "required": ["process_id"]},
        ),
        Tool(
            name="process.stop",
            description="Stop a started process: terminate its whole tree, then kill it.",
            schema=_object({"process_id": _ID_SCHEMA}, ["process_id"]),
            effect="process",
            handler=_stop,
            output_schema=_DESCRIBED,
        ),
        Tool(
            name="process.list",
            description="List the processes this run started.",
            schema=_object({}, []),
            effect="read",
            handler=_list,
            output_schema={"type": "object", "required": ["processes"]},
        ),
    )

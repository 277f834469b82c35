"""Open and serve one ``proctor mcp`` process: what the CLI calls.

Everything that can refuse is decided before the transport opens: the skills load, their
credential readiness is decided from one workspace snapshot, a named authority preset
resolves, an HTTP key and bind check out. A missing credential does not stop the server: it
is reported by name on stderr and its tool answers ``needs_credential``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.errors import ConfigError, UsageError
from proctor.mcp.catalog import Catalog, load_catalog
from proctor.mcp.server import ProctorServer
from proctor.mcp.shared import ServerConfig

if TYPE_CHECKING:
    import socket

    from proctor.core.authority import Authority
    from proctor.mcp.directive_tools import DirectiveExposure
    from proctor.mcp.http import HttpSettings
    from proctor.mcp.workers import WorkerSeat
    from proctor.runtime.boundary.workspace import Workspace

__all__ = ["open_server", "serve"]


def _preset(name: str, workspace: Workspace, environ: Mapping[str, str]) -> Authority:
    """The saved authority preset ``name``, when it lists this workspace.

    Raises:
        UsageError: ``preset_not_found``, ``preset_invalid``, ``preset_not_for_workspace``.
    """
    from proctor.runtime.home.presets import preset_authority

    return preset_authority(name, workspace.root, environ)


def open_server(
    refs: list[str],
    *,
    workspace: Workspace,
    run_id: str | None = None,
    authority_name: str | None = None,
    transport: str = "stdio",
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    console_url: str | None = None,
    trust_client_approvals: bool = False,
    directives: DirectiveExposure | None = None,
    gateway: bool = False,
    config: Path | None = None,
    tools: tuple[str, ...] = (),
) -> ProctorServer:
    """Load what the server offers and build it (nothing is served yet).

    ``environ`` is what the sessions read (default: a copy of ``os.environ`` taken now: a
    served call reads the settings the server started with, from a plain mapping rather than
    one that encodes and decodes on each of a run's reads).

    ``directives`` serves the directive tools (``--directives``), alone or beside skills;
    ``tools`` serves those of proctor's own tools (``--tool fs.read``), each client session one
    run (:mod:`proctor.mcp.core_tools`). Session runs a killed ``proctor mcp`` left open in
    the workspace are sealed here (:func:`proctor.mcp.session_runs.seal_orphans`).

    Raises:
        UsageError: neither skills, directives nor ``--run``, or ``--run`` with either; a
            reference that names no package or method; a tool name collision; an exposed
            directive id that names no directive (``directive_not_found``); a ``--tool`` that is
            none of proctor's tools (``tool_not_found``) or whose MCP name is taken
            (``mcp_tool_name_collision``).
        ParseError: a package file is invalid.
        ConfigError: a preset that does not resolve; ``--run`` naming a run this workspace
            does not hold.
    """
    import os

    env: Mapping[str, str] = dict(os.environ) if environ is None else environ
    if run_id is not None and (refs or directives is not None or gateway or tools):
        raise UsageError(
            "serve either skills, directives and the gateway, or one run (--run), not both",
            code="mcp_scope_ambiguous",
        )
    if run_id is None and not refs and directives is None and not gateway and not tools:
        raise UsageError(
            "name skills to serve, --tool NAME, --directives, --gateway, or --run RUN_ID",
            code="mcp_no_skills",
        )
    if config is not None and not gateway:
        raise UsageError(
            "--config names the upstream servers of --gateway", code="mcp_config_without_gateway"
        )
    if config is not None:
        from proctor.runtime.gateway.upstreams import CONFIG_ENV

        env = {**env, CONFIG_ENV: str(config.resolve())}
    start = cwd or Path.cwd()
    catalog = (
        Catalog()
        if run_id is not None or not refs
        else load_catalog(refs, cwd=start, workspace_root=workspace.root, environ=env)
    )
    served = None
    if gateway:
        from proctor.mcp.gateway import open_gateway

        served = open_gateway(workspace, env, None, _report)
    core = None
    if tools:
        from proctor.mcp.core_tools import open_core_tools

        core = open_core_tools(workspace.root, list(tools))
    authority = None if authority_name is None else _preset(authority_name, workspace, env)
    settings = ServerConfig(
        workspace=workspace,
        catalog=catalog,
        environ=env,
        authority=authority,
        authority_name=authority_name,
        run_scope=run_id,
        transport=transport,
        console_url=_console_url(console_url),
        trust_client_approvals=trust_client_approvals,
        refs=tuple(refs),
        cwd=start,
    )
    from proctor.mcp.turns import turn_tools

    turns = turn_tools(settings)
    if run_id is not None and turns is None:
        raise ConfigError(
            "--run needs the driver's turn API (pause and resume), which this build lacks",
            code="mcp_turns_unavailable",
        )
    proctor = ProctorServer(settings, turns=turns, directives=directives, gateway=served, core=core)
    if proctor.directives is not None:
        try:
            proctor.directives.check_exposure()
        except BaseException:
            proctor.close()
            raise
    if run_id is None:
        from proctor.mcp.session_runs import seal_orphans

        seal_orphans(proctor)
    if run_id is not None and turns is not None:
        turns.check_run(run_id, proctor)
    return proctor


def _report(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _console_url(url: str | None) -> str | None:
    """The console origin a URL-mode elicitation names.

    Raises:
        UsageError: ``console_url_invalid`` (not an http(s) origin).
    """
    if url is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise UsageError(
            "--console-url is the console's origin (http://127.0.0.1:8765 or https://...)",
            code="console_url_invalid",
        )
    return url.rstrip("/")


def _report_readiness(proctor: ProctorServer) -> list[dict[str, Any]]:
    missing = []
    for tool in proctor.config.catalog.tools.values():
        for credential in tool.missing:
            missing.append({"tool": tool.name, **credential.to_dict()})
            sys.stderr.write(
                f"proctor mcp: {tool.name} needs credential {credential.name!r}"
                f" ({credential.problem}); its calls answer needs_credential until it is set up:\n"
            )
            for command in credential.setup:
                sys.stderr.write(f"  {command}\n")
    sys.stderr.flush()
    return missing


def serve(
    proctor: ProctorServer,
    *,
    http: HttpSettings | None = None,
    handoff: tuple[WorkerSeat, socket.socket] | None = None,
    argv: list[str] | None = None,
) -> None:
    """Serve over stdio (``http is None``) or streamable HTTP until the client or a signal
    ends it; then release the sessions.

    Over HTTP, ``argv`` is the command line more workers are started with
    (``http.workers``); ``handoff`` is a started worker's seat and socket
    (:mod:`proctor.mcp.workers`)."""
    import anyio

    missing = _report_readiness(proctor)
    proctor.audit(
        "mcp_server_ready",
        transport=proctor.config.transport,
        run_scope=proctor.config.run_scope,
        authority=proctor.config.authority_name,
        console_url=proctor.config.console_url,
        trust_client_approvals=proctor.config.trust_client_approvals,
        tools=sorted(t.name for t in proctor.tool_list()),
        # Named so the audit's secret-field redaction leaves the names readable.
        not_ready=[
            {"tool": m["tool"], "requirement": m["credential"], "problem": m["problem"]}
            for m in missing
        ],
    )
    # What is loaded by now (the SDK's and proctor's modules, the protocol's models, the
    # catalog) is most of the heap and lives as long as the process: the collector's full
    # passes, otherwise a walk of all of it every few thousand calls, leave it out.
    import gc

    gc.freeze()
    # uvloop's loop where installed, over stdio as over HTTP: asyncio's, in Python, is crossed
    # about six times a call (a stdio fs.read 3.74 -> 3.66 M instructions a call)
    from proctor.mcp.http import loop_options

    try:
        if http is None:
            _end_calls_on_signals(proctor)
            anyio.run(_serve_stdio, proctor, backend_options=loop_options())
        else:
            from proctor.mcp.http import serve_http

            anyio.run(serve_http, proctor, http, handoff, argv, backend_options=loop_options())
    except KeyboardInterrupt:
        pass
    finally:
        proctor.close()


def _end_calls_on_signals(proctor: ProctorServer) -> None:
    """SIGTERM (a client's transport sends it when the server outlives its closed input) and
    SIGINT end the calls in flight rather than the process mid-step: every command a call is
    running has its process tree killed (its call then settles ``cancelled`` and its run is
    recorded ``stopped``), and the server stops serving; :func:`serve` then waits for the
    calls' workers to record that before it exits. A second signal exits at once."""
    import os
    import signal

    got: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        if got:
            os._exit(128 + signum)
        got.append(signum)
        proctor.stop_all()
        if proctor.hold_interrupt():  # raised once the call on the loop's thread returns
            return
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


async def _serve_stdio(proctor: ProctorServer) -> None:
    from proctor.mcp.wire import serve_stdio

    await serve_stdio(proctor.build(), proctor.audit)

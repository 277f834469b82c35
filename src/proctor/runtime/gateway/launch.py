"""Start a stdio upstream inside proctor's sandbox, and reach an HTTP one through the egress guard.

A stdio server is a process like any command a run starts: it runs under bubblewrap (the
setting of ``PROCTOR_SANDBOX``; ``required`` refuses to start it where bubblewrap does not
work), sees the workspace as its reach and an empty home, gets exactly the environment its
declaration gives (plus ``PATH`` and its credential), and has no network unless
``[mcp.<server>] egress`` grants destinations, which it then reaches only through the egress
proxy. An HTTP server's every connection goes through the egress transport, with the
workspace's ``[egress] allow`` and the server's own grant.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.errors import ToolFailed
from proctor.runtime.gateway.wire import HttpWire, StdioWire

if TYPE_CHECKING:
    from proctor.parser.mcp_config import HttpServer, StdioServer, UpstreamSettings
    from proctor.runtime.boundary.sandbox import SandboxUse
    from proctor.runtime.boundary.workspace import Workspace

__all__ = ["open_http", "open_stdio", "upstream_env"]

_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def upstream_env(
    server: StdioServer, environ: Mapping[str, str], secret: tuple[str, str] | None
) -> dict[str, str]:
    """The whole environment of a stdio upstream: its declared ``env``, ``PATH`` (declared, or
    the host's), and its credential's variable. Nothing else of the host's environment."""
    env = {"PATH": environ.get("PATH") or _DEFAULT_PATH}
    env.update(dict(server.env))
    if secret is not None:
        env[secret[0]] = secret[1]
    return env


def open_stdio(
    server: StdioServer,
    settings: UpstreamSettings,
    *,
    workspace: Workspace,
    environ: Mapping[str, str],
    secret: tuple[str, str] | None,
) -> tuple[StdioWire, SandboxUse]:
    """Start ``server`` in its sandbox; the wire talks to it and ends it on close.

    Raises:
        RefusedCall: ``sandbox_unavailable`` / ``sandbox_unverified`` under ``required``.
        ToolFailed: ``mcp_upstream_not_started``: the program cannot be found or started.
    """
    from proctor.runtime.boundary.netrelay import Relay
    from proctor.runtime.boundary.sandbox import bwrap_argv
    from proctor.runtime.boundary.sandbox_check import sandbox_for_call
    from proctor.runtime.boundary.sandbox_paths import run_sandbox
    from proctor.runtime.boundary.sandbox_setting import sandbox_setting
    from proctor.runtime.tools.process import start_proxy

    env = upstream_env(server, environ, secret)
    argv = [server.command, *server.args]
    use = sandbox_for_call(
        sandbox_setting(environ), network=bool(settings.egress), egress=settings.egress
    )
    cwd = workspace.root
    launch, launch_env, proxy, sweep = argv, env, None, None
    if use.used == "bubblewrap" and use.bwrap is not None:
        spec, sweep = run_sandbox(
            workspace, environ=environ, env=env, cwd=cwd, network=use.network, argv0=argv[0]
        )
        proxy = start_proxy(use)
        relay = None if proxy is None or proxy.folder is None else Relay(proxy.folder, egress=True)
        launch = bwrap_argv(spec, argv, bwrap=use.bwrap, relay=relay)
        launch_env = dict(spec.env)
    try:
        proc = subprocess.Popen(
            launch,
            cwd=cwd,
            env=launch_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            shell=False,
        )
    except OSError as exc:
        if proxy is not None:
            proxy.stop()
        raise ToolFailed(
            f"cannot start upstream MCP server '{server.name}': {exc.strerror}",
            code="mcp_upstream_not_started",
        ) from exc

    def end() -> None:
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the sandbox's PID namespace ends with it
        proc.wait()
        if proxy is not None:
            proxy.stop()
        if sweep is not None:
            sweep.run()

    wire = StdioWire(server.name, proc, float(settings.timeout_seconds), on_close=end)
    return wire, use


def open_http(
    server: HttpServer,
    settings: UpstreamSettings,
    *,
    workspace_root: Any,
    header: tuple[str, str] | None,
) -> HttpWire:
    """A wire to ``server`` whose every connection passes the egress guard (the workspace's
    ``[egress] allow`` plus the server's ``egress``); the credential header is added here,
    at the adapter, and nowhere else."""
    from proctor.runtime.boundary.egress_allow import EgressAllow, load_egress_allow
    from proctor.runtime.boundary.transport import egress_client

    allow = load_egress_allow(workspace_root).merged(EgressAllow.parse(settings.egress))
    headers = dict(server.headers)
    if header is not None:
        headers[header[0]] = header[1]
    client = egress_client(allow)
    return HttpWire(server.name, server.url, client, headers, float(settings.timeout_seconds))

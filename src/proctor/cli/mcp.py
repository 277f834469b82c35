"""``proctor mcp``: serve skills (and the turns of paused runs) to MCP clients.

The ``mcp`` SDK is imported only here, inside the command, so ``proctor --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import click

WORKER_HANDOFF = "--worker-handoff"  # proctor.mcp.workers.HANDOFF_OPTION (not imported: lazy)


def require_sdk() -> None:
    """Refuse to serve without the official MCP SDK, saying how to install it.

    Raises:
        ConfigError: ``mcp_sdk_missing`` (exit 3) when the ``mcp`` package cannot be imported.
    """
    from proctor.cli.extras import require_extra

    require_extra("mcp", "proctor mcp", code="mcp_sdk_missing")


class _WithReview(click.Command):
    """``proctor mcp`` serves; ``proctor mcp pin|diff|approve ...`` reviews upstream pins
    (:mod:`proctor.cli.mcp_upstream`). A skill reference spelled like one of those words is
    served as ``./pin``."""

    _REVIEW = ("pin", "diff", "approve")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in self._REVIEW:
            ctx.meta["proctor_mcp_review"] = (args[0], list(args[1:]))
            return []
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        review = ctx.meta.pop("proctor_mcp_review", None)
        if review is None:
            return super().invoke(ctx)
        from proctor.cli.mcp_upstream import SUBCOMMANDS

        name, rest = review
        command = SUBCOMMANDS[name]
        # no parent context: the usage line reads "proctor mcp pin", not "... SKILL_REF... pin"
        with command.make_context(f"{ctx.command_path} {name}", rest) as sub:
            return command.invoke(sub)


@click.command(
    "mcp",
    cls=_WithReview,
    epilog="Review upstream tool pins: proctor mcp pin|diff|approve --help",
)
@click.argument("refs", nargs=-1, metavar="SKILL_REF...")
@click.option(
    "--gateway",
    is_flag=True,
    help="Serve the workspace's upstream MCP servers (.mcp.json) as governed tools"
    " SERVER__TOOL, each client session one run.",
)
@click.option(
    "--tool",
    "core_tools",
    multiple=True,
    metavar="NAME",
    help="Serve this proctor tool (fs.read, fs.list, ...) as an MCP tool (fs_read), each client"
    " session one run whose calls are governed calls (repeatable).",
)
@click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --gateway: the mcpServers configuration (default: .mcp.json at the workspace root).",
)
@click.option(
    "--run",
    "run_id",
    metavar="RUN_ID",
    help="Serve the turn tools of this one paused run instead of skills.",
)
@click.option(
    "--authority",
    "authority_name",
    metavar="NAME",
    help="Apply this saved authority preset to every run the server starts.",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio, or streamable HTTP (needs PROCTOR_MCP_API_KEY).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="HTTP port (0 picks a free one and prints it).",
)
@click.option(
    "--workers",
    type=click.IntRange(0, 256),
    help="HTTP: how many processes serve the socket (default, or 0: one per core, at most 8;"
    " with --gateway or --tool the default is 1); a session stays with the process that"
    " opened it.",
)
@click.option(WORKER_HANDOFF, "handoff_fd", type=int, hidden=True)
@click.option(
    "--public-url",
    metavar="URL",
    help="Where clients reach a non-loopback HTTP bind (required for one).",
)
@click.option(
    "--workspace",
    "workspace_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The workspace to serve (default: found from the current folder). Skill references"
    " are then resolved from it, for hosts that cannot set a working folder.",
)
@click.option(
    "--console-url",
    metavar="URL",
    help="The console (proctor serve) that URL-mode elicitation sends a person to.",
)
@click.option(
    "--trust-client-approvals",
    is_flag=True,
    help="Count a client's form-mode 'accept' as an approval (audited; receipts say"
    " client-relayed). Off: it is information only and the request stays pending.",
)
@click.option(
    "--directives",
    "serve_directives",
    is_flag=True,
    help="Also serve list_directives, run_directive and list_tools (the reference kernel's"
    " directive tools).",
)
@click.option(
    "--directive",
    "directive_ids",
    multiple=True,
    metavar="ID",
    help="With --directives: expose only this directive (repeatable; default: all).",
)
@click.option(
    "--drive",
    is_flag=True,
    help="With --directives: the configured model works each directive's turn (otherwise the"
    " client works it with the turn tools).",
)
def mcp(
    refs: tuple[str, ...],
    gateway: bool,
    core_tools: tuple[str, ...],
    config: Path | None,
    run_id: str | None,
    authority_name: str | None,
    transport: str,
    host: str,
    port: int,
    public_url: str | None,
    workers: int | None,
    handoff_fd: int | None,
    workspace_dir: Path | None,
    console_url: str | None,
    trust_client_approvals: bool,
    serve_directives: bool,
    directive_ids: tuple[str, ...],
    drive: bool,
) -> None:
    """Serve SKILL_REF... (PATH[#METHOD] or a skills/ catalog name) as MCP tools.

    Each method is one tool; a call runs it under governance and returns its proctor.run.v1
    envelope. A client's answer never approves on its own: a person decides with `proctor
    approve` or in the console (--console-url sends URL-mode clients there), unless the
    operator passes --trust-client-approvals.
    Exit codes: 2 usage or parse error; 3 configuration error (no key, unsafe bind, the
    mcp extra not installed).

    \b
    Examples:
      proctor mcp examples/hello-world
      proctor mcp --tool fs.read --tool fs.list
      proctor mcp --directives --drive
    """
    import os

    require_sdk()
    from proctor.mcp import check_http_settings, open_server, serve
    from proctor.mcp.http import API_KEY_ENV
    from proctor.runtime.boundary.workspace import Workspace

    settings = None
    handoff = None
    try:
        if handoff_fd is not None:  # one of the workers another proctor mcp started
            from proctor.mcp.workers import read_handoff

            seat, sock, key = read_handoff(handoff_fd)
            handoff = (seat, sock)
            settings = check_http_settings(host, port, public_url, {API_KEY_ENV: key})
        elif transport == "http":
            if workers is None and (gateway or core_tools):
                # a stateless client's session run (--gateway, --tool) lives in the process
                # that opened it, and its calls may come over any connection: one process
                workers = 1
            elif not workers:  # unset or 0
                from proctor.mcp.workers import default_workers

                workers = default_workers()
            settings = check_http_settings(host, port, public_url, os.environ, workers)
    finally:
        # The key is held in the settings from here on; out of the environment, no process
        # proctor starts (commands, guards, a keyring backend) can inherit it.
        os.environ.pop(API_KEY_ENV, None)
    if transport != "http" and public_url is not None:
        raise click.UsageError("--public-url applies to --transport http only")
    if transport != "http" and (workers is not None or handoff_fd is not None):
        raise click.UsageError("--workers applies to --transport http only")
    if (directive_ids or drive) and not serve_directives:
        raise click.UsageError("--directive and --drive apply with --directives only")
    exposure = None
    if serve_directives:
        from proctor.mcp.directive_tools import DirectiveExposure

        exposure = DirectiveExposure(allowed=directive_ids or None, drive=drive)
    start = workspace_dir.resolve() if workspace_dir is not None else Path.cwd()
    proctor = open_server(
        list(refs),
        workspace=Workspace.discover(start),
        cwd=start,
        run_id=run_id,
        authority_name=authority_name,
        transport=transport,
        console_url=console_url,
        trust_client_approvals=trust_client_approvals,
        directives=exposure,
        gateway=gateway,
        config=config,
        tools=core_tools,
    )
    import sys

    serve(proctor, http=settings, handoff=handoff, argv=sys.argv[1:])

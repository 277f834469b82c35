"""``proctor mcp pin|diff|approve``: a person's review of upstream MCP tool definitions.

Every text a server sent (descriptions, schemas) is shown through the one renderer for the
terminal (:func:`proctor.cli.paint.inert`): control characters and bidirectional overrides are
made visible and inert, so a definition cannot hide what it says.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from proctor.cli.paint import inert
from proctor.cli.render import dump_json

if TYPE_CHECKING:
    from proctor.runtime.gateway.upstreams import Upstreams

_CONFIG = click.option(
    "--config",
    "config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The mcpServers client configuration (default: .mcp.json at the workspace root).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")


def open_upstreams(config: Path | None) -> Upstreams:
    """The workspace's upstreams (from the current folder).

    Raises:
        UsageError: ``mcp_no_upstreams``: the workspace configures no upstream server.
    """
    from proctor.errors import UsageError
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.gateway.upstreams import Upstreams, load_upstreams

    workspace = Workspace.discover(Path.cwd())
    loaded = load_upstreams(workspace.root, os.environ, config.resolve() if config else None)
    if loaded is None:
        raise UsageError(
            "this workspace has no .mcp.json (or name one with --config)",
            code="mcp_no_upstreams",
        )
    return Upstreams(loaded, workspace, os.environ)


@click.command("pin")
@click.argument("servers", nargs=-1)
@_CONFIG
@_JSON
def pin(servers: tuple[str, ...], config: Path | None, as_json: bool) -> None:
    """Pin the tool definitions of upstream SERVERS (all when none) in proctor-mcp.lock.

    Starts each server (a stdio one in the sandbox), lists its tools and pins every tool not
    pinned yet. A pinned tool whose definition changed is left for `proctor mcp diff` and
    `proctor mcp approve`.

    \b
    Example:
      proctor mcp pin filesystem
    """
    from proctor.runtime.gateway.review import pin_servers

    upstreams = open_upstreams(config)
    try:
        pinned = pin_servers(upstreams, list(servers))
    finally:
        upstreams.close()
    if as_json:
        dump_json({"pinned": pinned}, schema="proctor.mcp_pin.v1")
        return
    for server, tools in pinned.items():
        shown = ", ".join(tools) if tools else "nothing new"
        click.echo(inert(f"{server}: pinned {shown}"))


@click.command("diff")
@click.argument("targets", nargs=-1, metavar="[SERVER[/TOOL]]...")
@_CONFIG
@_JSON
def diff(targets: tuple[str, ...], config: Path | None, as_json: bool) -> None:
    """Show how upstream tool definitions differ from their pins.

    Each changed, new or removed tool is shown with a unified diff of its definition and
    the digest `proctor mcp approve` takes. Exit status 1 when anything differs.

    \b
    Example:
      proctor mcp diff filesystem/write_file
    """
    from proctor.runtime.gateway.review import tool_changes

    upstreams = open_upstreams(config)
    try:
        changes = tool_changes(upstreams, list(targets))
    finally:
        upstreams.close()
    if as_json:
        dump_json({"changes": changes}, schema="proctor.mcp_diff.v1")
    else:
        _show(changes)
    if changes:
        raise SystemExit(1)


def _show(changes: list[dict[str, Any]]) -> None:
    if not changes:
        click.echo("every upstream tool matches its pin")
        return
    for change in changes:
        click.echo(
            inert(
                f"{change['server']}/{change['tool']}: {change['change']}"
                " (text below is the upstream server's, not proctor's)"
            )
        )
        for line in change["diff"]:
            click.echo("  " + inert(line))
        if change["upstream_digest"] is not None:
            click.echo(
                inert(
                    f"  approve with: proctor mcp approve {change['server']}/{change['tool']}"
                    f" --digest {change['upstream_digest']}"
                )
            )


@click.command("approve")
@click.argument("target", metavar="SERVER/TOOL")
@click.option("--digest", required=True, help="The upstream digest `proctor mcp diff` showed.")
@_CONFIG
@_JSON
def approve(target: str, digest: str, config: Path | None, as_json: bool) -> None:
    """Approve an upstream tool's changed definition: pin what `proctor mcp diff` showed.

    Refused (nothing pinned) when the definition changed again since it was shown. The
    approval is written to the audit log.

    \b
    Example:
      proctor mcp approve filesystem/write_file --digest sha256:...
    """
    import getpass

    from proctor.runtime.gateway.review import approve_change
    from proctor.runtime.records.audit import AuditLog, audit_path

    upstreams = open_upstreams(config)
    try:
        done = approve_change(upstreams, target, digest, decided_by=getpass.getuser())
    finally:
        upstreams.close()
    audit = AuditLog(audit_path(upstreams.workspace.root, os.environ))
    try:
        audit.emit("mcp_definition_approved", run_id=None, step_index=None, **done)
    finally:
        audit.close()
    if as_json:
        dump_json(dict(done), schema="proctor.mcp_approve.v1")
        return
    click.echo(inert(f"pinned {done['server']}/{done['tool']} at {done['digest']}"))


SUBCOMMANDS: dict[str, click.Command] = {"pin": pin, "diff": diff, "approve": approve}

"""``proctor directives``: list, validate, catalogue and run directives.

``catalogue`` writes ``docs/DIRECTIVES.md`` with the loader the executor uses (``--check``
fails when the file is stale); ``run ID "request"`` runs one directive, managed by the
configured model with ``--drive``, else pausing ``needs_agent`` for a host.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from proctor.cli.paint import inert
from proctor.cli.render import dump_json


@click.group("directives")
def directives() -> None:
    """List, validate, catalogue and run directives.

    \b
    Example:
      proctor directives list
    """


def _session(drive: bool, max_steps: int | None = None) -> Any:
    from proctor.runtime.agents.sessions import DirectiveSession
    from proctor.runtime.boundary.workspace import Workspace

    agent = None
    if drive:
        from proctor.runtime.agents.loop import DEFAULT_MAX_STEPS, ManagedAgent

        agent = ManagedAgent.from_home(view="reference", max_steps=max_steps or DEFAULT_MAX_STEPS)
    return DirectiveSession(Workspace.discover(Path.cwd()), agent_driver=agent)


@directives.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def list_directives(as_json: bool) -> None:
    """List the directives of this workspace and the shipped ones; refused files by name.

    \b
    Example:
      proctor directives list --json
    """
    session = _session(False)
    try:
        found = session.directives()
    finally:
        session.close()
    if as_json:
        dump_json(
            {
                "directives": [d.to_dict() for d in found.listed()],
                "refused": [e.to_dict() for _, e in sorted(found.refused.items())],
                "replaced": sorted(found.replaced),
            },
            schema="proctor.directives.v1",
        )
        return
    for d in found.listed():
        click.echo(inert(f"{d.id}  [{d.category}]  tools: {', '.join(d.tools) or '-'}"))
        click.echo(inert(f"    {d.description}"))
    for _label, error in sorted(found.refused.items()):
        click.echo(inert(f"refused: {error.message} [{error.code}]"), err=True)


@directives.command("validate")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def validate(path: Path) -> None:
    """Check one directive file; exits 2 naming what is wrong.

    A refused file (frontmatter, id, description, category, tools) is named with what is wrong.

    \b
    Example:
      proctor directives validate directives/review.md
    """
    from proctor.runtime.directives import read_directive
    from proctor.runtime.tools.registry import native_tools

    directive = read_directive(path, tools=set(native_tools()))
    click.echo(f"{directive.id}: valid ({directive.category}; tools: {', '.join(directive.tools)})")


@directives.command("catalogue")
@click.option("--check", is_flag=True, help="Fail (exit 1) when the file is not up to date.")
@click.option(
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write (default: docs/DIRECTIVES.md in the workspace).",
)
def catalogue(check: bool, output: Path | None) -> None:
    """Write docs/DIRECTIVES.md from the directives the executor loads.

    \b
    Example:
      proctor directives catalogue
    """
    from proctor.runtime.directives import render_catalogue

    session = _session(False)
    try:
        found = session.directives()
        tools = session.tools
        root = session.workspace.root
    finally:
        session.close()

    def describe(name: str) -> str:
        tool = tools.get(name)
        return tool.description if tool is not None else "(not registered)"

    text = render_catalogue(found, describe)
    target = output or root / "docs" / "DIRECTIVES.md"
    if check:
        current = target.read_text(encoding="utf-8") if target.is_file() else None
        if current != text:
            click.echo(
                f"{target.name} is out of date: run `proctor directives catalogue`", err=True
            )
            sys.exit(1)
        click.echo(f"{target.name} is up to date ({len(found.directives)} directives)")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    click.echo(f"wrote {target.name}: {len(found.directives)} directives")
    for _label, error in sorted(found.refused.items()):
        click.echo(inert(f"refused: {error.message} [{error.code}]"), err=True)


def run_directive_command(
    directive_id: str,
    request: str,
    *,
    drive: bool,
    as_json: bool,
    max_steps: int | None,
    run_authority: str | None = None,
) -> None:
    """Run a directive and print its envelope (shared by ``directives run`` and
    ``run --directive``); exits like ``proctor run``."""
    from proctor.cli.driving import drive_and_print, host_authority

    authority = host_authority(run_authority, None, managed=drive)
    session = _session(drive, max_steps)
    drive_and_print(
        session, lambda: session.run_directive(directive_id, request, authority=authority), as_json
    )


@directives.command("run")
@click.argument("directive_id")
@click.argument("request")
@click.option("--drive", is_flag=True, help="Drive the turn with the configured model.")
@click.option("--max-steps", type=click.IntRange(1, 200), help="Model requests per turn.")
@click.option("--run-authority", "run_authority", metavar="JSON", help="What the host grants.")
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.run.v1 envelope.")
def run(
    directive_id: str,
    request: str,
    drive: bool,
    max_steps: int | None,
    run_authority: str | None,
    as_json: bool,
) -> None:
    """Run directive DIRECTIVE_ID on REQUEST.

    \b
    Example:
      proctor directives run review "check notes.txt" --drive
    """
    run_directive_command(
        directive_id,
        request,
        drive=drive,
        as_json=as_json,
        max_steps=max_steps,
        run_authority=run_authority,
    )

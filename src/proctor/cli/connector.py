"""``proctor connector list`` and ``proctor connector inspect NAME``: declared connectors.

Connectors are read from the workspace's ``connectors/`` and, with ``--skill REF``, from that
skill package's ``connectors/`` too (the package's shadow the workspace's of the same name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from proctor.cli.paint import inert
from proctor.cli.render import dump_json

LIST_SCHEMA = "proctor.connector.list.v1"
INSPECT_SCHEMA = "proctor.connector.v1"


@click.group("connector")
def connector() -> None:
    """List and inspect connectors and their operations.

    \b
    Example:
      proctor connector inspect tracker --json
    """


def _found(skill: str | None) -> dict[str, Any]:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.connectors.catalog import find_connectors
    from proctor.runtime.skills import load_skill

    cwd = Path.cwd()
    root = Workspace.discover(cwd).root
    if skill is None:
        return find_connectors(root)
    loaded = load_skill(skill, cwd=cwd, workspace_root=root)
    return find_connectors(root, loaded.folder, loaded.label)


def _operations(loaded: Any) -> list[dict[str, Any]]:
    from proctor.runtime.connectors.operations import operation_tools

    tools = operation_tools({loaded.connector.name: loaded})
    return [tool.describe() for tool in tools.values()]


@connector.command("list")
@click.option("--skill", "skill", metavar="REF", help="Also read this skill package's connectors.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def list_connectors(skill: str | None, as_json: bool) -> None:
    """List the connectors found, with their origin and operations.

    Example: proctor connector list --skill triage
    """
    found = _found(skill)
    rows = [
        {
            "name": name,
            "origin": loaded.origin,
            "credential": loaded.connector.credential,
            "source": loaded.source,
            "operations": sorted(loaded.connector.operations),
        }
        for name, loaded in found.items()
    ]
    if as_json:
        dump_json({"schema": LIST_SCHEMA, "connectors": rows})
        return
    if not rows:
        click.echo("no connectors found (connectors/<name>/connector.yaml)")
        return
    for row in rows:
        click.echo(inert(f"{row['name']}  {row['origin']}  ({row['source']})"))
        for op in row["operations"]:
            click.echo(inert(f"  {op}"))


@connector.command("inspect")
@click.argument("name")
@click.option("--skill", "skill", metavar="REF", help="Also read this skill package's connectors.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def inspect_connector(name: str, skill: str | None, as_json: bool) -> None:
    """Show one connector: its origin, credential and each operation's schema and rules.

    Example: proctor connector inspect tracker --skill triage --json
    """
    import json

    from proctor.errors import UsageError

    found = _found(skill)
    loaded = found.get(name)
    if loaded is None:
        known = ", ".join(sorted(found)) or "none"
        raise UsageError(
            f"no connector is named {name!r}; found: {known}", code="unknown_connector"
        )
    doc = {
        "schema": INSPECT_SCHEMA,
        "name": name,
        "description": loaded.connector.description,
        "base_url": loaded.connector.base_url,
        "mcp": loaded.connector.mcp,
        "origin": loaded.origin,
        "credential": loaded.connector.credential,
        "source": loaded.source,
        "operations": _operations(loaded),
    }
    if as_json:
        dump_json(doc)
        return
    click.echo(inert(f"{name}  {loaded.origin}  credential: {loaded.connector.credential or '-'}"))
    for op in doc["operations"]:
        flags = [op["verb"]]
        if op["approval"]:
            flags.append("approval: required")
        if op["readback"]:
            flags.append(f"readback: {op['readback']}")
        if op["cost"]:
            flags.append(f"cost: {op['cost']['usd_micro']} usd_micro/call")
        click.echo(inert(f"\n{op['operation']}  ({', '.join(flags)})"))
        click.echo(json.dumps(op["input_schema"], indent=2, sort_keys=True))

"""``proctor tool list`` and ``proctor tool inspect NAME``: the native tools and their schemas."""

from __future__ import annotations

import click

from proctor.cli.paint import inert
from proctor.cli.render import dump_json


@click.group("tool")
def tool() -> None:
    """List and inspect native tools.

    \b
    Example:
      proctor tool list
    """


@tool.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def list_tools(as_json: bool) -> None:
    """List every native tool with its effect class and description.

    \b
    Example:
      proctor tool list --json
    """
    from proctor.runtime.tools.registry import native_tools

    tools = sorted(native_tools().values(), key=lambda t: t.name)
    if as_json:
        dump_json(
            {
                "tools": [
                    {"name": t.name, "effect": t.effect, "description": t.description}
                    for t in tools
                ]
            },
            schema="proctor.tool_list.v1",
        )
        return
    width = max(len(t.name) for t in tools)
    for t in tools:
        click.echo(inert(f"{t.name.ljust(width)}  {t.effect.ljust(5)}  {t.description}"))


@tool.command("inspect")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def inspect_tool(name: str, as_json: bool) -> None:
    """Show one tool: effect class, description, input and output JSON Schemas.

    An unknown name is a usage error (exit 2) listing the known tools.

    \b
    Example:
      proctor tool inspect fs.read
    """
    import json

    from proctor.errors import UsageError
    from proctor.runtime.tools.registry import native_tools

    tools = native_tools()
    found = tools.get(name)
    if found is None:
        known = ", ".join(sorted(tools))
        raise UsageError(
            f"no native tool is named {name!r}; known tools: {known}", code="unknown_tool"
        )
    description = found.describe()
    if as_json:
        dump_json(description, schema="proctor.tool.v1")
        return
    click.echo(inert(f"{found.name}  (effect: {found.effect})"))
    click.echo(inert(found.description))
    click.echo("\ninput schema:")
    click.echo(json.dumps(found.schema, indent=2, sort_keys=True))
    if found.output_schema is not None:
        click.echo("\noutput schema:")
        click.echo(json.dumps(found.output_schema, indent=2, sort_keys=True))


@tool.command("cedar-schema")
def cedar_schema_command() -> None:
    """Print the Cedar schema (JSON) of the native tools, for writing policies/*.cedar.

    Each tool is an action of namespace Proctor; principals are Skill, resources Resource,
    and each action's context types the tool's arguments under context.args.

    \b
    Example:
      proctor tool cedar-schema > proctor.cedarschema.json
    """
    import json

    from proctor.policy.cedar import cedar_schema
    from proctor.runtime.tools.registry import native_tools

    schema = cedar_schema({name: t.schema for name, t in native_tools().items()})
    click.echo(json.dumps(schema, indent=2, sort_keys=True))

"""``proctor config``: the home's settings (the managed agent's provider, model, endpoint ...).

Keys are never typed here: ``agent.secret`` names a credential profile stored with
``proctor credential set``, which reads the key from a prompt or stdin.
"""

from __future__ import annotations

import click

from proctor.cli.render import dump_json


@click.group("config")
def config() -> None:
    """Show and change the home's settings (config.json).

    \b
    Example:
      proctor config show
    """


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--json", "as_json", is_flag=True, help="Print the agent section as JSON.")
def set_value(key: str, value: str, as_json: bool) -> None:
    """Set KEY (agent.provider, agent.model, agent.dialect, agent.endpoint_url, agent.secret,
    agent.timeout_s, agent.max_retries) to VALUE.

    An unknown key, an invalid value, or a value that looks like an API key is refused (exit 3).

    \b
    Example:
      proctor config set agent.model llama3
    """
    from proctor.runtime.home.config import set_agent_value

    section = set_agent_value(key, value)
    if as_json:
        dump_json({"agent": section}, schema="proctor.config.v1")
    else:
        click.echo(f"{key} = {section[key.partition('.')[2]]}")


@config.command("unset")
@click.argument("key")
def unset_value(key: str) -> None:
    """Remove KEY from the home's settings.

    \b
    Example:
      proctor config unset agent.model
    """
    from proctor.runtime.home.config import unset_agent_value

    unset_agent_value(key)
    click.echo(f"{key} unset")


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def show(as_json: bool) -> None:
    """Show the agent settings and whether they make a complete managed-agent configuration.

    \b
    Example:
      proctor config show --json
    """
    from proctor.errors import ConfigError
    from proctor.runtime.home.config import agent_config, load_config

    raw = load_config().get("agent") or {}
    try:
        agent_config()
        problem = None
    except ConfigError as exc:
        problem = exc.to_dict()
    if as_json:
        dump_json(
            {"agent": raw, "complete": problem is None, "problem": problem},
            schema="proctor.config.v1",
        )
        return
    for key in sorted(raw):
        click.echo(f"agent.{key} = {raw[key]}")
    if problem is None:
        click.echo("managed agent: ready")
    else:
        click.echo(f"managed agent: not ready [{problem['code']}] {problem['message']}")

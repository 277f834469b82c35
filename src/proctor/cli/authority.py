"""``proctor authority``: save, list, show and remove authority presets."""

from __future__ import annotations

from pathlib import Path

import click

from proctor.errors import UsageError


@click.group()
def authority() -> None:
    """Saved authority presets, applied with `proctor run --authority NAME`.

    \b
    Example:
      proctor authority list
    """


AUTHORITY_CAP = 1 << 20
"""The largest authority document ``authority save`` reads (bytes): one is a few hundred."""


@authority.command("save")
@click.argument("name")
@click.argument("file", metavar="FILE|-")
@click.option(
    "--workspace",
    "workspaces",
    multiple=True,
    metavar="DIR",
    help="A workspace the preset applies in (repeatable; default: this one).",
)
@click.option("--json", "as_json", is_flag=True)
def save(name: str, file: str, workspaces: tuple[str, ...], as_json: bool) -> None:
    """Save FILE (an authority JSON document) as preset NAME.

    \b
    Example:
      echo '{"effects": "ask"}' | proctor authority save notes -
    """
    from proctor.cli.driving import read_authority_json, read_capped
    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.home.presets import save_preset

    try:
        data = read_capped(file, AUTHORITY_CAP)  # a pipe or a device that never ends: a cap
    except OSError as exc:
        raise UsageError(f"cannot read {file!r}", code="authority_invalid") from exc
    if len(data) > AUTHORITY_CAP:
        raise UsageError(
            f"the authority document is over {AUTHORITY_CAP >> 10} KiB; nothing was saved",
            code="authority_invalid",
        )
    doc = read_authority_json(data, source="the authority document")
    roots = [Workspace(Path(w)).root for w in workspaces] or [Workspace.discover(Path.cwd()).root]
    saved = save_preset(name, doc, roots)
    if as_json:
        dump_json(saved)
    else:
        click.echo(f"saved authority preset {name} for {len(roots)} workspace(s)")


@authority.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_(as_json: bool) -> None:
    """List saved presets.

    \b
    Example:
      proctor authority list --json
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.home.presets import list_presets

    presets = list_presets()
    if as_json:
        dump_json({"presets": presets}, schema="proctor.authority_list.v1")
        return
    for doc in presets:
        auth = doc.get("authority") or {}
        click.echo(
            f"{doc['name']}  effects={auth.get('effects')} reach={auth.get('reach')}"
            f"  workspaces={len(doc.get('workspaces') or [])}"
        )


@authority.command("show")
@click.argument("name")
def show(name: str) -> None:
    """Print a preset as JSON.

    \b
    Example:
      proctor authority show notes
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.home.presets import load_preset

    dump_json(load_preset(name))


@authority.command("remove")
@click.argument("name")
def remove(name: str) -> None:
    """Delete a preset.

    \b
    Example:
      proctor authority remove notes
    """
    from proctor.runtime.home.presets import remove_preset

    remove_preset(name)
    click.echo(f"removed authority preset {name}")

"""``proctor package SKILL_DIR [--json]``: the exact artifact a publish would send.

``--json`` prints a ``proctor.package_projection.v1`` document::

    {"schema": "proctor.package_projection.v1", "kind": "skill", "name": "...",
     "version": "sha-<12 hex>",
     "content_digest": "sha256:<hex>", "size": 1234,
     "package": {<the proctor.package.json document: schema proctor.package.v1, files ...>}}

A folder holding ``connector.yaml`` (and no SKILL.md) is a connector package: ``kind`` is
``connector``. Nothing is written: ``proctor.package.json`` is derived from the files, never
read from them.
"""

from __future__ import annotations

from pathlib import Path

import click

from proctor.cli.paint import inert


@click.command("package")
@click.argument("skill_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the package as JSON.")
def package(skill_dir: Path, as_json: bool) -> None:
    """Show the files, content digest and version a publish of SKILL_DIR would send.

    Example: proctor package skills/summarise --json
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.packages.package import package_folder

    built = package_folder(skill_dir)
    if as_json:
        dump_json(
            {
                "schema": "proctor.package_projection.v1",
                "kind": built.kind,
                "name": built.name,
                "version": built.version,
                "content_digest": built.content_digest,
                "size": built.size,
                "package": built.document(),
            }
        )
        return
    click.echo(f"{built.name} {built.version}" + (" (connector)" if built.kind != "skill" else ""))
    click.echo(f"content digest {built.content_digest}")
    for rel, file_digest in built.digests.items():
        click.echo(inert(f"  {rel}  {file_digest[:19]}…  {len(built.files[rel])} bytes"))

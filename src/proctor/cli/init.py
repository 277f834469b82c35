"""``proctor init``: start a workspace with a first skill and its test.

Creates FOLDER (default: the current folder) when missing, its ``.proctor/`` state folder
(mode 0700), and ``skills/hello/`` with a ``SKILL.md``, a ``run.yaml`` and ``tests/greet.yaml``
that ``proctor test skills/hello`` passes. Nothing that exists is overwritten: a folder that
already holds ``skills/hello`` keeps it and only what is missing is added.
"""

from __future__ import annotations

from pathlib import Path

import click

SKILL_MD = """\
---
name: hello
description: Says hello back with your message.
---
# hello

Your first proctor skill: it echoes the message it is given. Run it with

    proctor run skills/hello -i message="hello"

and replay its test with `proctor test skills/hello`. Edit `run.yaml` to add steps
(`proctor tool list` shows the tools a step can call), then `proctor check`.
"""

RUN_YAML = """\
minimum_proctor: 0.1.0
methods:
  greet:
    description: Echo the message back.
    inputs:
      type: object
      properties:
        message: {type: string, minLength: 1, maxLength: 1000}
      required: [message]
      additionalProperties: false
    steps:
      - id: greet
        tool: echo
        inputs: {text: $input.message}
    result_from: [greet]
"""

TEST_YAML = """\
description: The message comes back as it was sent.
method: greet
inputs: {message: "hello, proctor"}
expect:
  status: sealed
  outcome: completed
  output:
    exact:
      text: "hello, proctor"
  steps: {greet: completed}
  receipt: verified
"""

FILES = {
    "skills/hello/SKILL.md": SKILL_MD,
    "skills/hello/run.yaml": RUN_YAML,
    "skills/hello/tests/greet.yaml": TEST_YAML,
}


@click.command("init")
@click.argument("folder", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print what was created as JSON.")
def init(folder: Path | None, as_json: bool) -> None:
    """Start a workspace in FOLDER (default: here) with a first skill and its test.

    Your home folder and / are refused as workspaces. Files that exist are kept.

    \b
    Example:
      proctor init my-project && cd my-project && proctor test skills/hello
    """
    import os

    from proctor.cli.render import dump_json
    from proctor.errors import UsageError
    from proctor.runtime.boundary.workspace import refuse_broad_root
    from proctor.runtime.records.store_file import private_folders

    root = (folder or Path.cwd()).absolute()
    given = str(folder) if folder is not None else "."  # errors name FOLDER as it was typed
    refuse_broad_root(root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{given!r} is not a folder", code="init_not_a_folder")
    created: list[str] = []
    try:
        root.mkdir(parents=True, exist_ok=True)
        if not (root / ".proctor").exists():
            private_folders(root / ".proctor")
            created.append(".proctor/")
        for rel, text in FILES.items():
            target = root / rel
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "x", encoding="utf-8") as handle:
                handle.write(text)
            created.append(rel)
    except OSError as exc:
        raise UsageError(
            f"cannot create the workspace in {given!r}: {exc.strerror or exc}",
            code="init_failed",
        ) from exc
    shown = os.path.relpath(root) if folder is not None else "."
    if as_json:
        dump_json({"workspace": shown, "created": created}, schema="proctor.init.v1")
        return
    for rel in created:
        click.echo(f"created {rel}")
    if not created:
        click.echo("nothing to create: the workspace and its first skill are already here")
    where = "" if folder is None else f"cd {shown} && "
    click.echo(f"next: {where}proctor run skills/hello -i message=hi; proctor test skills/hello")

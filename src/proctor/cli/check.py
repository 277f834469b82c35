"""``proctor check``: self-verify this workspace and the install."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click


@click.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print phases and findings as JSON.")
def check(as_json: bool) -> None:
    """Verify that every skill, policy and directive parses, every enforceable rule's guard is
    registered and every registered guard is bound, and every tool has a schema.

    A check that examined nothing fails. Exit 0 when everything passed, 1 otherwise.

    \b
    Example:
      proctor check --json
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.check import check_workspace, report

    doc = report(check_workspace(Workspace.discover(Path.cwd()), os.environ))
    if as_json:
        dump_json(doc)
    else:
        for phase in doc["phases"]:
            for c in phase["checks"]:
                mark = "ok  " if c["passed"] else "FAIL"
                click.echo(f"{mark} {phase['phase']}/{c['name']}: {c['detail']}")
                for f in c["findings"]:
                    click.echo(f"       [{f.get('code')}] {f.get('message')}")
        click.echo("passed" if doc["passed"] else "failed")
    sys.exit(0 if doc["passed"] else 1)

"""``proctor audit``: verify and read the audit log."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from proctor.errors import UsageError


def _log_path(path: str | None) -> Path:
    from proctor.runtime.records.audit import audit_path

    if path is not None:
        return Path(path)
    from proctor.runtime.boundary.workspace import Workspace

    return audit_path(Workspace.discover(Path.cwd()).root, os.environ)


@click.group()
def audit() -> None:
    """Inspect and verify the audit log."""


@audit.command()
@click.argument("path", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report.")
def verify(path: str | None, as_json: bool) -> None:
    """Check the audit log's hash chain; exit 1 naming the first bad line."""
    from proctor.cli.render import dump_json
    from proctor.runtime.records.audit import verify_chain

    log = _log_path(path)
    if not log.is_file():
        raise UsageError(f"no audit log at {log.name!r}")
    report = verify_chain(log)
    if as_json:
        dump_json(report.to_dict())
    elif report.ok:
        click.echo(f"audit log ok: {report.lines} lines, chain intact")
    else:
        click.echo(f"audit log broken at line {report.first_bad_line}: {report.reason}")
    if not report.ok:
        raise SystemExit(1)


@audit.command()
@click.argument("path", required=False)
@click.option("-n", "count", default=10, show_default=True, help="How many lines.")
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON list.")
def tail(path: str | None, count: int, as_json: bool) -> None:
    """Show the last N events of the audit log."""
    from proctor.cli.render import dump_json

    log = _log_path(path)
    if not log.is_file():
        raise UsageError(f"no audit log at {log.name!r}")
    records = []
    for line in log.read_bytes().splitlines()[-count:] if count > 0 else []:
        try:
            records.append(json.loads(line))
        except ValueError:
            records.append({"event": "<unreadable line>"})
    if as_json:
        dump_json(records)
        return
    for record in records:
        click.echo(
            f"{record.get('timestamp', '?')}  {record.get('event', '?')}  "
            f"run={record.get('run_id')} seq={record.get('sequence')}"
        )

"""``proctor pending``: every request the workspace's runs wait on, oldest first."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click


def age_of(since: str, now: datetime | None = None) -> str:
    """How long ago ``since`` (ISO 8601) was, in the largest whole unit: ``42s``, ``5m``,
    ``3h``, ``2d``; ``?`` when it cannot be read."""
    try:
        then = datetime.fromisoformat(since)
    except ValueError:
        return "?"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@click.command("pending")
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.pending.v1 document.")
@click.option(
    "--after",
    type=click.IntRange(0, 2**63 - 1),
    default=None,
    metavar="CURSOR",
    help="List only requests asked after this cursor (a previous page's next_cursor).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=200,
    show_default=True,
    help="Requests on one page.",
)
def pending(as_json: bool, after: int | None, limit: int) -> None:
    """List the requests waiting in this workspace, oldest first, one page at a time: run,
    address, kind, summary, age.

    Decide one with `proctor approve RUN_ID [ADDRESS]` or `proctor decline RUN_ID [ADDRESS]`.
    When more wait than one page holds, the last line (and `next_cursor` in JSON) gives the
    cursor of the next page.

    Example: proctor pending --json
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.approvals import PENDING_SCHEMA, pending_page
    from proctor.runtime.engine.session import Session

    session = Session(Workspace.discover(Path.cwd()))
    try:
        waiting, next_cursor = pending_page(session, after=after, limit=limit)
    finally:
        session.close()
    if as_json:
        requests = [s.to_json() for s in waiting]
        dump_json({"schema": PENDING_SCHEMA, "requests": requests, "next_cursor": next_cursor})
        return
    if not waiting and after is not None:
        click.echo("no more requests after that cursor")
        return
    if not waiting:
        click.echo("nothing is waiting in this workspace")
        return
    from proctor.cli.paint import inert

    for shown in waiting:
        click.echo(
            inert(f"{shown.run_id}  {shown.address}  {shown.kind}  {age_of(shown.waiting_since)}")
            + "  "
            + inert(shown.summary)
        )
    if next_cursor is not None:
        click.echo(f"more: proctor pending --after {next_cursor}")
    click.echo("decide: proctor approve RUN_ID [ADDRESS]  |  proctor decline RUN_ID [ADDRESS]")

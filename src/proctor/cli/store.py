"""``proctor store``: start the run store over, on purpose.

``proctor store init --new [--json]`` starts a new, empty SQLite run store where the old one is
gone, after writing ``store_started_over`` (with what showed the old store existed) to the audit
log. ``--json`` prints a ``proctor.store_init.v1`` document::

    {"schema": "proctor.store_init.v1", "store": ".proctor/runs.sqlite", "evidence": [...]}

It never replaces or empties a store file that is there (``store_exists``).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from proctor.errors import UsageError


@click.group("store")
def store() -> None:
    """Manage the workspace's run store.

    \b
    Example:
      proctor store init --new
    """


@store.command("init")
@click.option(
    "--new", "new", is_flag=True,
    help="Start a new, empty store although records show an old one existed (audited).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.store_init.v1 document.")
def init(new: bool, as_json: bool) -> None:
    """Start a new, empty run store where the old one is missing.

    A run refuses to start (store_missing) when the store is gone but the audit log, the
    receipts or its check mark show it existed; restore the file from a backup if you can.
    --new starts over instead: the old runs' records stay in the audit log and receipts, but
    history and resume lose them.

    Example: proctor store init --new
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.receipts import receipt_dir
    from proctor.runtime.records.store_evidence import start_over

    if not new:
        raise UsageError(
            "say --new to start a new, empty run store (the old one's runs are lost to"
            " history and resume)",
            code="store_init_unconfirmed",
        )
    if os.environ.get("PROCTOR_DATABASE_URL"):
        raise UsageError(
            "the run store is on PostgreSQL (PROCTOR_DATABASE_URL): its server keeps it",
            code="store_init_postgres",
        )
    workspace = Workspace.discover(Path.cwd())
    session = Session(workspace)
    try:
        path, shown = session.store_file()
        evidence = start_over(
            path,
            shown,
            audit=session.audit,
            receipts_dir=receipt_dir(workspace.state_dir, os.environ),
        )
    finally:
        session.close()
    if as_json:
        dump_json({"store": shown, "evidence": evidence.found}, schema="proctor.store_init.v1")
        return
    click.echo(f"started a new, empty run store at {shown}")
    for trace in evidence.found:
        click.echo(f"  it replaces a store whose record shows: {trace}")

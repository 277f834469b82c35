"""``proctor store``: start the run store over, on purpose; move a package's state.

``proctor store init --new [--json]`` starts a new, empty SQLite run store where the old one is
gone, after writing ``store_started_over`` (with what showed the old store existed) to the audit
log. ``--json`` prints a ``proctor.store_init.v1`` document::

    {"schema": "proctor.store_init.v1", "store": ".proctor/runs.sqlite", "evidence": [...]}

It never replaces or empties a store file that is there (``store_exists``).

``proctor store migrate --from IDENTITY --to IDENTITY [--json]`` moves every ``store.*`` event,
key and idempotency record a package kept under one identity to another (a local folder moved
is a new identity), on whichever state store backend ``PROCTOR_STORE_URL`` selects, after
writing ``store_migrated`` to the audit log. ``--json`` prints ``proctor.store_migrate.v1``::

    {"schema": "proctor.store_migrate.v1", "from": "local:old", "to": "local:new",
     "moved": {"events": 3, "keys": 1, "writes": 4}}
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from proctor.errors import UsageError


@click.group("store")
def store() -> None:
    """Manage the workspace's run store and its packages' state.

    \b
    Examples:
      proctor store init --new
      proctor store migrate --from local:skills/old --to local:skills/new
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


@store.command("migrate")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="IDENTITY",
    help="The identity the package's state is kept under now (local:OLD/PATH).",
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="IDENTITY",
    help="The identity to keep it under (local:NEW/PATH); it must hold no state.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.store_migrate.v1 document.")
def migrate(source: str, target: str, as_json: bool) -> None:
    """Move a package's state (store.* events, keys, idempotency records) to a new identity.

    A package's state is kept under its identity: core:NAME, registry:PUBLISHER/NAME, or
    local:PATH for a folder of the workspace, so a folder moved (or renamed) is a new package
    with no state. Run this once, while neither identity has a run going. Refused when the
    target already holds state (store_target_not_empty) or the source holds none
    (store_source_empty); audited as store_migrated.

    Example: proctor store migrate --from local:skills/old --to local:skills/new
    """
    from proctor.cli.paint import inert
    from proctor.cli.render import dump_json
    from proctor.core.package_identity import is_identity
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.storage.select import open_state_store

    for flag, value in (("--from", source), ("--to", target)):
        if not is_identity(value):
            raise UsageError(
                f"{flag} is a package identity: core:NAME, registry:PUBLISHER/NAME or"
                " local:PATH (proctor history shows each run's)",
                code="store_identity_invalid",
            )
    workspace = Workspace.discover(Path.cwd())
    session = Session(workspace)
    try:
        state = open_state_store(os.environ, workspace.state_dir)
        moved = state.migrate(source, target)
        session.audit.emit(
            "store_migrated", run_id=None, step_index=None, fsync=True,
            source=source, target=target, moved=moved,
        )  # fmt: skip
    finally:
        session.close()
    if as_json:
        dump_json({"from": source, "to": target, "moved": moved},
                  schema="proctor.store_migrate.v1")  # fmt: skip
        return
    counted = ", ".join(f"{n} {name}" for name, n in moved.items())
    click.echo(inert(f"moved the state of {source} to {target} ({counted})"))

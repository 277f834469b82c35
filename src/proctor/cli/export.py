"""``proctor export RECEIPT --format dsse``: a sealed run as a signed in-toto statement.

Parses, calls :func:`proctor.runtime.records.export.export_dsse`, writes the envelope (on
stdout, or atomically to ``--out``). The envelope is DSSE's own JSON, not a proctor document,
so it carries no ``schema`` key; errors are printed as every command prints them.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

__all__ = ["export"]


@click.command("export")
@click.argument("target", metavar="RECEIPT")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["dsse"]),
    required=True,
    help="dsse: one DSSE envelope holding an in-toto Statement v1.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the envelope to this file (replaced atomically) instead of printing it.",
)
def export(target: str, fmt: str, out: Path | None) -> None:
    """Export a sealed run (its run receipt id, or its run id) as a signed in-toto statement.

    The receipt tree must verify with the local keys; the envelope is signed with the local
    signing key, so `proctor key export-public` is what checks it.

    \b
    Example:
      proctor export sha256:RECEIPT_ID --format dsse --out run.intoto.json
    """
    from proctor.receipts.canonical import canonical
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.home.keys import load_signer, trusted_local_keys
    from proctor.runtime.records.backend import open_run_store
    from proctor.runtime.records.export import export_dsse
    from proctor.runtime.records.receipts import ReceiptStore, receipt_dir
    from proctor.runtime.records.store_file import run_store_path

    workspace = Workspace.discover(Path.cwd())
    receipts = ReceiptStore(receipt_dir(workspace.state_dir, os.environ))
    receipts.check()
    signer = load_signer(create=False).signer
    store = None
    if (
        os.environ.get("PROCTOR_DATABASE_URL")
        or run_store_path(workspace.state_dir, os.environ).exists()
    ):
        store = open_run_store(workspace.state_dir, os.environ, "the run store")
    try:
        envelope = export_dsse(
            target,
            load=receipts.get,
            store=store,
            signer=signer,
            trusted=trusted_local_keys(),
        )
    finally:
        if store is not None:
            store.close()
    data = canonical(envelope) + b"\n"
    if out is None:
        click.echo(data.decode("ascii"), nl=False)
        return
    _write_atomically(out, data)
    click.echo(f"wrote {out.name}: DSSE envelope, in-toto Statement v1", err=True)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file in its folder, then renamed).

    Raises:
        UsageError: (``export_out_unwritable``) the folder cannot be written.
    """
    from proctor.errors import UsageError

    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(
            f"cannot write {path.name!r}: {exc.strerror}", code="export_out_unwritable"
        ) from exc

"""``proctor verify RECEIPT_ID|FILE``: check a receipt's signature and its whole tree.

Exit status: 0 verified, 1 invalid, 4 unverified (intact as far as it could be checked, but
signed by a key not trusted here, or an unsigned call receipt given as the root). ``--json``
prints a ``proctor.verify.v1`` document (see :class:`proctor.receipts.verify.VerifyResult`).
"""

from __future__ import annotations

import sys

import click

EXIT_VERIFIED = 0
EXIT_INVALID = 1
EXIT_UNVERIFIED = 4


@click.command("verify")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.verify.v1 document.")
@click.option(
    "--key",
    "key_path",
    type=click.Path(dir_okay=False),
    help="Trusted public key file (PEM from `proctor key export-public`). "
    "Default: the local signing key.",
)
@click.option(
    "--receipts-dir",
    type=click.Path(file_okay=False),
    help="Folder of receipt files to read children from (default: the workspace store, "
    "or the folder of FILE).",
)
def verify(target: str, as_json: bool, key_path: str | None, receipts_dir: str | None) -> None:
    """Verify a receipt (by id, or a receipt file) and every receipt below it.

    \b
    Example:
      proctor verify sha256:RECEIPT_ID
    """
    from proctor.runtime.records.receipts import verify_receipt

    result = verify_receipt(target, receipts_dir=receipts_dir, public_key=key_path)
    if as_json:
        from proctor.cli.render import dump_json

        dump_json(result.to_json())
    else:
        click.echo(f"{result.status}: {result.message}")
        click.echo(
            f"receipts: {result.receipts} (signed and checked {result.signed}, "
            f"amortized calls {result.amortized}, unknown key {result.unknown_key}); "
            f"depth {result.depth}"
        )
        if result.receipt_id:
            click.echo(f"root: {result.receipt_id}")
    code = {"verified": EXIT_VERIFIED, "invalid": EXIT_INVALID}.get(result.status, EXIT_UNVERIFIED)
    sys.stdout.flush()
    if code:
        sys.exit(code)

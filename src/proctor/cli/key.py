"""``proctor key``: show, export and rotate the local signing key.

``proctor key show --json`` prints a ``proctor.key.v1`` document::

    {"schema": "proctor.key.v1", "algorithm": "ed25519", "key_id": "sha256:<hex>",
     "public_key_base64": "...", "public_key_hex": "...", "path": "~/.proctor/signing_key.pem",
     "created": false}

``key_id`` is ``sha256:`` + hex SHA-256 of the 32 raw public-key bytes. ``path`` is shown as
``~/.proctor/...``, ``$PROCTOR_HOME/...`` or ``$PROCTOR_SIGNING_KEY``, never absolute.

``proctor key export-public`` prints the public key as PEM (SubjectPublicKeyInfo, what
``openssl pkey -pubin`` reads); give that file to ``proctor verify --key``.

``proctor key rotate [--json]`` makes a new key, keeps the old public key trusted in
``<home>/trusted_keys/`` and records ``key_rotated`` in the workspace's audit log; ``--json``
prints a ``proctor.key_rotation.v1`` document::

    {"schema": "proctor.key_rotation.v1", "old_key_id": "sha256:<hex>" | null,
     "new_key_id": "sha256:<hex>", "old_key_trusted": "$PROCTOR_HOME/trusted_keys/<hex>.pem"
     | null, "path": "$PROCTOR_HOME/signing_key.pem", "unverifiable_key_ids": [...]}

``unverifiable_key_ids`` are keys that signed receipts of this workspace and are trusted
nowhere here any more (their receipts verify only with ``proctor verify --key``).

Showing or exporting creates the key on first use, except where this workspace's receipts were
signed by a home key that is gone: that is refused ``signing_key_missing`` (rotate on purpose).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from proctor.runtime.home.keys import LocalKey
    from proctor.runtime.records.receipts import ReceiptStore


def _receipts() -> ReceiptStore:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.receipts import ReceiptStore, receipt_dir

    return ReceiptStore(receipt_dir(Workspace.discover(Path.cwd()).state_dir, os.environ))


def _local_key() -> LocalKey:
    from proctor.runtime.home.keys import load_signer

    return load_signer(held_key_ids=lambda: _receipts().key_ids(source="home"))


@click.group("key")
def key() -> None:
    """Show, export or rotate the local signing key (created in the home on first use).

    \b
    Example:
      proctor key show
    """


@key.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.key.v1 document.")
def show(as_json: bool) -> None:
    """Print the public key and key id of the local signing key.

    \b
    Example:
      proctor key show --json
    """
    from proctor.cli.render import dump_json

    local = _local_key()
    public = local.signer.public_key
    doc = {
        "schema": "proctor.key.v1",
        "algorithm": "ed25519",
        "key_id": public.key_id,
        "public_key_base64": base64.b64encode(public.raw).decode("ascii"),
        "public_key_hex": public.raw.hex(),
        "path": local.shown_path,
        "created": local.created,
    }
    if as_json:
        dump_json(doc)
        return
    if local.created:
        click.echo(f"created a new signing key at {local.shown_path}", err=True)
    click.echo(f"key id:     {public.key_id}")
    click.echo(f"public key: {doc['public_key_base64']} (base64, raw 32 bytes)")
    click.echo(f"key file:   {local.shown_path}")


@key.command("export-public")
def export_public() -> None:
    """Print the public key as PEM (for `proctor verify --key`).

    \b
    Example:
      proctor key export-public > proctor-key.pem
    """
    click.echo(_local_key().signer.public_key.pem(), nl=False)


@key.command("rotate")
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.key_rotation.v1 document.")
def rotate(as_json: bool) -> None:
    """Make a new signing key; the old public key stays trusted for verifying old receipts.

    The rotation is recorded in this workspace's audit log (event key_rotated). Use it when
    the key is compromised, or when it was lost and proctor refuses signing_key_missing.

    Example: proctor key rotate
    """
    from proctor.cli.render import dump_json
    from proctor.errors import ProctorError
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.home.keys import Rotation, rotate_key, trusted_local_keys
    from proctor.runtime.records.audit import AuditLog, audit_path

    receipts = _receipts()
    receipts.check()
    held = receipts.key_ids()
    audit = AuditLog(audit_path(Workspace.discover(Path.cwd()).root, os.environ))

    def record(rotation: Rotation) -> None:
        written = audit.emit(
            "key_rotated",
            run_id=None,
            step_index=None,
            fsync=True,
            old_key_id=None if rotation.old is None else rotation.old.key_id,
            new_key_id=rotation.new.signer.key_id,
            old_key_trusted=rotation.trusted_path,
        )
        if written.get("audit_persisted") is False:
            raise ProctorError(
                "the rotation could not be recorded in the audit log, so the key was not"
                " rotated; free the disk or fix the log's permissions and run it again",
                code="audit_unwritable",
            )

    try:
        rotation = rotate_key(before_replace=record)
    finally:
        audit.close()
    trusted = {k.key_id for k in trusted_local_keys()}
    lost = sorted(held - trusted)
    doc = {
        "schema": "proctor.key_rotation.v1",
        "old_key_id": None if rotation.old is None else rotation.old.key_id,
        "new_key_id": rotation.new.signer.key_id,
        "old_key_trusted": rotation.trusted_path,
        "path": rotation.new.shown_path,
        "unverifiable_key_ids": lost,
    }
    if as_json:
        dump_json(doc)
        return
    click.echo(f"new key id: {doc['new_key_id']} ({rotation.new.shown_path})")
    if rotation.old is not None:
        click.echo(f"old key id: {doc['old_key_id']} (kept trusted: {rotation.trusted_path})")
    else:
        click.echo("there was no key to retire")
    for key_id in lost:
        click.echo(
            f"receipts here signed by {key_id} are not trusted by any key now; they verify"
            " only with that key's public key (proctor verify --key FILE)",
            err=True,
        )
    click.echo("recorded in the audit log as key_rotated")

"""``proctor key``: show and export the local signing key's public half.

``proctor key show --json`` prints a ``proctor.key.v1`` document::

    {"schema": "proctor.key.v1", "algorithm": "ed25519", "key_id": "sha256:<hex>",
     "public_key_base64": "...", "public_key_hex": "...", "path": "~/.proctor/signing_key.pem",
     "created": false}

``key_id`` is ``sha256:`` + hex SHA-256 of the 32 raw public-key bytes. ``path`` is shown as
``~/.proctor/...``, ``$PROCTOR_HOME/...`` or ``$PROCTOR_SIGNING_KEY``, never absolute.

``proctor key export-public`` prints the public key as PEM (SubjectPublicKeyInfo, what
``openssl pkey -pubin`` reads); give that file to ``proctor verify --key``.
"""

from __future__ import annotations

import base64

import click


@click.group("key")
def key() -> None:
    """Show or export the local signing key (created in the home on first use)."""


@key.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.key.v1 document.")
def show(as_json: bool) -> None:
    """Print the public key and key id of the local signing key."""
    from proctor.cli.render import dump_json
    from proctor.runtime.home.keys import load_signer

    local = load_signer()
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
    """Print the public key as PEM (for `proctor verify --key`)."""
    from proctor.runtime.home.keys import load_signer

    click.echo(load_signer().signer.public_key.pem(), nl=False)

"""``proctor verify`` without click: its options, a plain command line read from them (see
:mod:`proctor.cli.plain_argv`), and the verification itself.

:mod:`proctor.cli.verify` builds the click command from :data:`VERIFY_OPTIONS`; the entry point
(:func:`proctor.cli.main.main`) reads a plain ``proctor verify`` command line here and calls
:func:`verify_command` without importing click, whose import cost more than a tenth of a
large tree's walk. Help, an unknown option or a path ``click.Path`` would refuse are left to
click, which reads or refuses them as before.

Exit status: 0 verified, 1 invalid, 4 unverified (intact as far as it could be checked, but
signed by a key not trusted here, or an unsigned call receipt given as the root). ``--json``
prints a ``proctor.verify.v1`` document (see :class:`proctor.receipts.verify.VerifyResult`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from proctor.cli.plain_argv import Option, read_plain

__all__ = [
    "EXIT_INVALID",
    "EXIT_UNVERIFIED",
    "EXIT_VERIFIED",
    "VERIFY_OPTIONS",
    "parse_verify_argv",
    "verify_command",
]

EXIT_VERIFIED = 0
EXIT_INVALID = 1
EXIT_UNVERIFIED = 4

#: verify's options, in the order help lists them (see :data:`proctor.cli.plain_argv.Option`)
VERIFY_OPTIONS: tuple[Option, ...] = (
    ("as_json", ("--json",), "flag", None, "Print a proctor.verify.v1 document."),
    ("key_path", ("--key",), "file", None,
     "Trusted public key file (PEM from `proctor key export-public`). "
     "Default: the local signing key."),
    ("receipts_dir", ("--receipts-dir",), "folder", None,
     "Folder of receipt files to read children from (default: the workspace store, "
     "or the folder of FILE)."),
    ("witnesses", ("--witnesses",), "flag", None,
     "Also check against the seals the witnesses hold ([witness] urls in the home); "
     "without RECEIPT: every witnessed run receipt of the workspace."),
)  # fmt: skip


def parse_verify_argv(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of ``proctor verify ARGS`` as click would read them, or ``None``."""
    return read_plain(args, (("target", None),), VERIFY_OPTIONS)


def verify_command(
    target: str | None,
    as_json: bool,
    key_path: str | None,
    receipts_dir: str | None,
    witnesses: bool = False,
) -> None:
    """``proctor verify``: verify the tree, print the result, exit with its code."""
    from proctor.runtime.records.verify_folder import verify_receipt

    if target is None:
        if not witnesses:
            from proctor.errors import UsageError

            raise UsageError(
                "give a RECEIPT to verify, or --witnesses to check every witnessed one",
                code="usage_error",
            )
        from proctor.cli.witnessing import verify_witnessed

        verify_witnessed(as_json, key_path)
        return
    result = verify_receipt(target, receipts_dir=receipts_dir, public_key=key_path)
    doc = result.to_json()
    if witnesses:
        from proctor.cli.witnessing import against_witnesses

        doc = against_witnesses(doc, result, target)
    if as_json:
        from proctor.cli.render import dump_json

        dump_json(doc)
    else:
        import click  # its echo (ANSI stripped where stdout is no terminal), as before

        from proctor.cli.paint import inert

        # the message may quote a tampered receipt: shown through the terminal's boundary
        click.echo(inert(f"{doc['status']}: {doc['message']}"))
        click.echo(
            f"receipts: {result.receipts} (signed and checked {result.signed}, "
            f"amortized calls {result.amortized}, unknown key {result.unknown_key}); "
            f"depth {result.depth}"
        )
        if result.receipt_id:
            click.echo(f"root: {result.receipt_id}")
        if "witnesses" in doc:
            click.echo(inert(f"witnesses: {doc['witnesses']['message']}"))
    code = {"verified": EXIT_VERIFIED, "invalid": EXIT_INVALID}.get(doc["status"], EXIT_UNVERIFIED)
    sys.stdout.flush()
    if code:
        sys.exit(code)

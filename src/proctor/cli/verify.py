"""``proctor verify RECEIPT_ID|FILE``: check a receipt's signature and its whole tree.

The options are declared in :data:`proctor.cli.verifying.VERIFY_OPTIONS` (the entry point reads
a plain command line from the same table without click) and the verification is
:func:`proctor.cli.verifying.verify_command`, which says what the exit status means.
"""

from __future__ import annotations

from typing import Any

import click

from proctor.cli.plain_argv import with_options
from proctor.cli.verifying import (
    EXIT_INVALID,
    EXIT_UNVERIFIED,
    EXIT_VERIFIED,
    VERIFY_OPTIONS,
    verify_command,
)

__all__ = ["EXIT_INVALID", "EXIT_UNVERIFIED", "EXIT_VERIFIED", "verify"]


@click.command("verify")
@click.argument("target", required=False)
@with_options(VERIFY_OPTIONS)
def verify(target: str | None, **params: Any) -> None:
    """Verify a receipt (by id, or a receipt file) and every receipt below it.

    With --witnesses, the run receipt must also be one the witnesses countersigned when its
    run sealed; without RECEIPT, every run receipt the witnesses hold must still be here.

    \b
    Example:
      proctor verify sha256:RECEIPT_ID
      proctor verify sha256:RECEIPT_ID --witnesses
    """
    verify_command(target=target, **params)

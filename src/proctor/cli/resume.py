"""``proctor resume RUN_ID FILE|-``: answer a paused run and drive it on, or close it.

The options are declared in :data:`proctor.cli.resuming.RESUME_OPTIONS` and the resume is
:func:`proctor.cli.resuming.resume_command` (the entry point reads a plain command line
without click).
"""

from __future__ import annotations

from typing import Any

import click

from proctor.cli.driving import EXIT_HELP
from proctor.cli.plain_argv import with_options
from proctor.cli.resuming import RESUME_OPTIONS, resume_command

__all__ = ["resume"]


@click.command("resume", epilog=EXIT_HELP)
@click.argument("run_id")
@click.argument("source", metavar="FILE|-", default="-")
@with_options(RESUME_OPTIONS)
def resume(run_id: str, source: str, **params: Any) -> None:
    """Continue RUN_ID with a proctor.resume.v1 document from FILE or stdin.

    `{}` continues a run whose decisions are already recorded (or that was stopped);
    `{"close": {"outcome": "declined"}}` alone seals it. Works from any folder of the
    workspace.

    \b
    Example:
      proctor resume RUN_ID answers.json
    """
    resume_command(run_id=run_id, source=source, **params)

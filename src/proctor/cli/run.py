"""``proctor run``: run a skill method under governance and print its envelope.

The options are declared in :data:`proctor.cli.running.RUN_OPTIONS` (the entry point reads a
plain command line from the same table without click) and the run is
:func:`proctor.cli.running.run_command`.
"""

from __future__ import annotations

from typing import Any

import click

from proctor.cli.driving import EXIT_HELP
from proctor.cli.plain_argv import with_options
from proctor.cli.running import RUN_OPTIONS, run_command

__all__ = ["run"]


@click.command("run", epilog=EXIT_HELP)
@click.argument("ref")
@with_options(RUN_OPTIONS)
def run(ref: str, **params: Any) -> None:
    """Run REF (PATH[#METHOD] or a skills/ catalog name) under governance.

    A run that waits on a person or an agent prints its requests, an answers template bound
    to their digests and the exact `proctor resume` command, and exits 10.

    \b
    Example:
      proctor run examples/hello-world -i message="hello, proctor"
    """
    run_command(ref=ref, **params)

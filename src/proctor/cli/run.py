"""``proctor run``: run a skill method under governance and print its envelope.

The options are declared in :data:`proctor.cli.running.RUN_OPTIONS` (the entry point reads a
plain command line from the same table without click) and the run is
:func:`proctor.cli.running.run_command`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from proctor.cli.driving import EXIT_HELP
from proctor.cli.plain_argv import Option
from proctor.cli.running import RUN_OPTIONS, run_command

__all__ = ["run", "with_options"]


def with_options(options: Sequence[Option]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click options of a command's :data:`~proctor.cli.plain_argv.Option` rows, listed in
    help in their order."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for name, flags, kind, metavar, text in reversed(options):
            if kind == "flag":
                fn = click.option(*flags, name, is_flag=True, help=text)(fn)
            else:
                fn = click.option(
                    *flags, name, multiple=kind == "multiple", metavar=metavar, help=text
                )(fn)
        return fn

    return decorate


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

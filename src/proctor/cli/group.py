"""The click group behind ``proctor`` (see :mod:`proctor.cli.main`)."""

from __future__ import annotations

import importlib

import click

from proctor.cli.caches import use_home_caches
from proctor.cli.commands import COMMANDS, SUMMARY

__all__ = ["COMMANDS", "cli"]


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        use_home_caches()  # a command runs (not a listing of commands)
        module = importlib.import_module(entry[0])
        command = getattr(module, entry[1])
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> object:
        """Run the command, then say once if any run data it printed was shown as escapes
        (:func:`proctor.cli.paint.note`)."""
        import sys

        paint = sys.modules.get("proctor.cli.paint")
        if paint is not None:
            paint.forget()
        try:
            return super().invoke(ctx)
        finally:
            paint = sys.modules.get("proctor.cli.paint")
            if paint is not None:
                paint.note()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, help=SUMMARY, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="proctor", prog_name="proctor")
def cli() -> None:
    """The ``proctor`` group; its help is :data:`proctor.cli.commands.SUMMARY`."""

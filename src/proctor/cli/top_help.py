"""``proctor --help`` written without click.

The top-level help is a listing: the program's summary, its two options and the table of
commands (:mod:`proctor.cli.commands`). Importing click to lay out that listing cost two thirds
of ``proctor --help``'s instructions, so it is written here, exactly as click lays it out when
nothing needs wrapping: click's formatter is as wide as the terminal less two columns, at most
78. On a terminal narrower than 80 columns this module answers nothing and click writes the
help, wrapped. ``tests/cli/test_top_help.py`` holds the text equal to click's at many widths.
"""

from __future__ import annotations

import os
import sys

from proctor.cli.commands import COMMANDS, SUMMARY

__all__ = ["terminal_columns", "top_help"]

_OPTIONS = (
    ("--version", "Show the version and exit."),
    ("-h, --help", "Show this message and exit."),
)
_WIDTH = 78  # click's formatter at 80 columns or more (its max_width less two)


def terminal_columns() -> int:
    """The columns click's formatter sees: ``COLUMNS`` when it is a positive number, else the
    terminal of standard output, else 80 (as :func:`shutil.get_terminal_size` answers)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns or 80


def top_help(columns: int) -> str | None:
    """The text of ``proctor --help`` at ``columns``, or ``None`` below 80 columns (or when a
    line would not fit and click would wrap it)."""
    if columns < _WIDTH + 2:
        return None
    lines = ["Usage: proctor [OPTIONS] COMMAND [ARGS]...", "", f"  {SUMMARY}", ""]
    lines += ["Options:", *_rows(_OPTIONS), "", "Commands:"]
    lines += _rows(tuple((name, COMMANDS[name][2]) for name in sorted(COMMANDS)))
    if any(len(line) > _WIDTH for line in lines):
        return None
    return "\n".join(lines) + "\n"


def _rows(rows: tuple[tuple[str, str], ...]) -> list[str]:
    """Two columns as click's ``write_dl`` lays them out: indented two, the first padded to
    its widest entry plus two."""
    first = max(len(name) for name, _ in rows)
    return [f"  {name.ljust(first)}  {text}" for name, text in rows]

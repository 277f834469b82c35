"""The terminal's rendering boundary: every text from run data that a command prints goes
through :func:`inert`, and plain output for the commands every run prints through (``run``,
``resume``, ``ask``) styles it only on a terminal that takes it.

Text from a run (commands, arguments, diffs, payloads, results, process output, skill names
and descriptions, refusal messages, audit lines) is untrusted: :func:`inert` shows every
control character, escape sequence, bidirectional override and invisible character as its
escape (``\\x1b``, ``\\u202e``, see :mod:`proctor.core.inert_text`), whatever the output
is, and counts them; a command says so once with :func:`note` (before a prompt that decides
on the text). Only an explicit ``--raw`` flag prints run data as it is, and says so.

A run's summary is printed at the end of every ``proctor run``; loading a rich-text library
for it cost about 40 ms of each start, so this module does not.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from proctor.core.inert_text import NOTE, visible

__all__ = ["RAW_NOTE", "Out", "forget", "inert", "markup", "note"]

RAW_NOTE = "--raw: run data printed as it is, control and escape characters included"
_STYLES = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}
_shown = [0]  # characters shown as escapes since the last note (one command per process)


def inert(text: object) -> str:
    """``text`` (``str()`` of it) with every control, escape, bidirectional and invisible
    character but newline and tab shown as its escape; counted for :func:`note`."""
    out, count = visible(text if isinstance(text, str) else str(text))
    _shown[0] += count
    return out


def markup(text: object) -> str:
    """:func:`inert` text escaped for rich markup (nothing in it is read as a style)."""
    from rich.markup import escape

    return escape(inert(text))


def forget() -> None:
    """Start a command's count afresh: its note speaks of what it printed, never of escapes
    counted before it began (by code that ran in this process outside any command)."""
    _shown[0] = 0


def note(stream: TextIO | None = None) -> bool:
    """Write the note that characters were shown as escapes to ``stream`` (standard error by
    default) when any were since the last note; True when it wrote one."""
    if not _shown[0]:
        return False
    _shown[0] = 0
    target = stream if stream is not None else sys.stderr
    target.write(f"note: {NOTE}\n")
    target.flush()
    return True


class Out:
    """Lines to a stream, styled (``Out.style``) only when the stream is a terminal and neither
    ``NO_COLOR`` is set nor ``TERM`` is ``dumb``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.color = (
            bool(isatty and isatty())
            and "NO_COLOR" not in os.environ
            and os.environ.get("TERM") != "dumb"
        )

    def style(self, text: str, name: str) -> str:
        """``text`` (made inert) in the named style: green, red, yellow, dim or bold."""
        text = inert(text)
        return f"\x1b[{_STYLES[name]}m{text}\x1b[0m" if self.color else text

    def print(self, *parts: str, end: str = "\n") -> None:
        """Write the parts (each already styled or passed through :func:`inert`) as one line."""
        self.stream.write("".join(parts) + end)

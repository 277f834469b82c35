"""Plain terminal output for the commands every run prints through (``run``, ``resume``,
``ask``): colour only on a terminal that takes it, untrusted text made inert.

A run's summary is printed at the end of every ``proctor run``; loading a rich-text library
for it cost about 40 ms of each start. Text from a run (results, refusal messages, notes, a
request's reason) is untrusted: :func:`inert` replaces control characters (an escape sequence
could rewrite the terminal) except tab and newline, whatever the output is.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

__all__ = ["Out", "inert"]

_STYLES = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}
_CONTROLS = {c: "\ufffd" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F)}


def inert(text: str) -> str:
    """``text`` with every control character but tab and newline replaced by U+FFFD."""
    return text.translate(_CONTROLS)


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

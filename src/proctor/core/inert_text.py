"""Text from a run made inert for a person: what every medium (the terminal, the console's
pages) paints run data through.

A run's data (a command, a diff, a payload, a result, process output, a skill's name and
description, a refusal message, an audit line) is chosen by a model, a package or a program,
and reaches a person who decides on it. Characters that a terminal or a browser acts on
instead of showing would let that data lie about itself: an escape sequence (CSI, OSC
including OSC 52 that sets the clipboard), a backspace or a carriage return rewrites what is
on screen; a bidirectional override reorders it; a zero-width or other format character hides
text inside text. :func:`pieces` splits a text into what is shown as it is and each such
character, which a medium shows as its escape (``\\x1b``, ``\\u202e``): visible, and inert.

Kept as they are: newline and tab (a diff and process output have lines) and every printable
character. Everything else that is a control character (C0, DEL, C1, the single-byte CSI and
OSC among them), a format character (bidi overrides and isolates, zero-width characters, the
soft hyphen, tag characters), a line or paragraph separator, or a surrogate, is escaped.

Pure: no I/O; each medium (``proctor.cli.paint``, the console's jinja hook) paints the pieces.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["NOTE", "escape_of", "is_hostile", "pieces", "visible"]

NOTE = (
    "control, escape, bidirectional or invisible characters in this output are shown as"
    " escapes (\\x1b, \\u202e); `--raw` where offered prints them as they are"
)
"""What a medium says once when it showed any character as its escape."""

_KEPT = frozenset("\n\t")
_HOSTILE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


@lru_cache(maxsize=4096)
def is_hostile(char: str) -> bool:
    """Whether a terminal or a browser could act on ``char`` rather than show it (see the
    module docstring); newline and tab are not."""
    if char in _KEPT:
        return False
    return unicodedata.category(char) in _HOSTILE_CATEGORIES


def escape_of(char: str) -> str:
    """The visible escape of one character: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    point = ord(char)
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def pieces(text: str) -> Iterator[tuple[str, bool]]:
    """``text`` as runs of ``(piece, hostile)``: printable text as it is (``False``), and each
    hostile character alone (``True``), in order."""
    start = 0
    for index, char in enumerate(text):
        if is_hostile(char):
            if start < index:
                yield text[start:index], False
            yield char, True
            start = index + 1
    if start < len(text):
        yield text[start:], False


def visible(text: str) -> tuple[str, int]:
    """``text`` with every hostile character replaced by its escape, and how many were."""
    if text.isprintable():  # the common case: nothing to do (newline and tab are not printable)
        return text, 0
    out: list[str] = []
    count = 0
    for piece, hostile in pieces(text):
        if hostile:
            count += 1
            out.append(escape_of(piece))
        else:
            out.append(piece)
    return "".join(out), count

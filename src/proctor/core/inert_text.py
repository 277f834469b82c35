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

import re
import unicodedata
from collections.abc import Callable, Iterator
from functools import lru_cache

__all__ = ["NOTE", "escape_of", "is_hostile", "pieces", "replace_hostile", "visible"]

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


# Every hostile character of the Unicode version Python ships lies in these ranges (control
# characters, the format characters' blocks, separators, surrogates, tags): the scan runs in the
# regex engine and only a character in them is looked at. tests/core/test_inert_text.py checks
# every code point, so a Unicode update that adds a format character elsewhere fails loudly.
_CANDIDATE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    "\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ud800-\udfff\ufeff"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001345f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def pieces(text: str) -> Iterator[tuple[str, bool]]:
    """``text`` as runs of ``(piece, hostile)``: printable text as it is (``False``), and each
    hostile character alone (``True``), in order."""
    start = 0
    for match in _CANDIDATE.finditer(text):
        char = match[0]
        if not is_hostile(char):
            continue
        index = match.start()
        if start < index:
            yield text[start:index], False
        yield char, True
        start = index + 1
    if start < len(text):
        yield text[start:], False


def replace_hostile(text: str, how: Callable[[str], str]) -> tuple[str, int]:
    """``text`` with every hostile character replaced by ``how(char)``, and how many were."""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        char = match[0]
        if not is_hostile(char):
            return char
        count += 1
        return how(char)

    return _CANDIDATE.sub(swap, text), count


def visible(text: str) -> tuple[str, int]:
    """``text`` with every hostile character replaced by its escape, and how many were."""
    return replace_hostile(text, escape_of)

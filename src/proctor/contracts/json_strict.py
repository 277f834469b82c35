"""The one strict JSON reader for documents that cross a boundary.

Resume documents, ``--inputs`` documents, a model provider's answers (and the arguments and
final answers inside them) and MCP frames are all read here, so they are refused by the same
rules with the same codes:

==================  ==========================================================================
code                refused
==================  ==========================================================================
``not_utf8``        bytes that are not UTF-8
``not_json``        text that is not one JSON value, ``NaN``/``Infinity``, a number literal
                    longer than Python reads (4300 digits), a ``\\uD800``-style escape of
                    an unpaired surrogate (not Unicode text: nothing downstream can encode it)
``duplicate_key``   a key repeated in one object, at any depth (parsers disagree on which one
                    wins, so what one side checked need not be what the other acts on)
``too_deep``        arrays and objects nested deeper than :data:`MAX_DEPTH`
==================  ==========================================================================

Depth is measured before parsing, without recursion: escape pairs, every character but quotes
and brackets, then the strings are cut out of the text in linear C passes, and the running sum
of ``+1``/``-1`` is taken in C. So a document of 100,000 ``[`` is refused in milliseconds and
``json.loads`` never recurses deeper than :data:`MAX_DEPTH`. The same bound is checked on
values already decoded by someone else (an MCP SDK, a Python caller) by
:func:`check_value`, iteratively.

Errors name the position (line and column) and the rule, never the content: a document may
hold secrets.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from proctor.errors import ParseError

__all__ = [
    "MAX_CANDIDATES",
    "MAX_DEPTH",
    "check_value",
    "loads",
    "open_depth",
    "raw_decode_object",
]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a boundary document."""

MAX_CANDIDATES = 32
"""Most ``{`` a search for an object inside prose tries (each try may read to the end)."""

# The depth scan: escape pairs go first (only ``\\"`` could hide a quote), then everything but
# quotes and brackets, then the strings (by then only quotes around brackets, or an unterminated
# one to the end: a match from a quote never fails, so the pass is linear).
_ESCAPES = re.compile(r"\\.", re.DOTALL)
_STRUCTURE = {c: None for c in range(128) if chr(c) not in '"[]{}'}
_NOT_STRUCTURE = re.compile(r'[^"\[\]{}]+')
_STRINGS = re.compile(r'"[^"]*(?:"|\Z)')
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Duplicate(Exception):
    pass


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_refuse_constant)


def _brackets(text: str) -> str:
    """The brackets of ``text`` read as JSON, those inside strings left out."""
    if "\\" in text:
        text = _ESCAPES.sub("", text)
    # str.translate deletes in C on ASCII text; a regex pass does it on any other
    text = text.translate(_STRUCTURE) if text.isascii() else _NOT_STRUCTURE.sub("", text)
    return _STRINGS.sub("", text)


def _too_deep_text(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether ``text``, read as JSON from its start, nests deeper than ``limit``.

    Brackets inside strings do not count. For text that is not JSON the answer covers what a
    JSON parser would descend before it fails.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    return max(accumulate(map(_STEP.__getitem__, _brackets(text))), default=0) > limit


def open_depth(text: str) -> int:
    """How many arrays and objects are open at the end of ``text`` (a JSON prefix), counted
    without recursion and without brackets inside strings."""
    return sum(map(_STEP.__getitem__, _brackets(text)))


def _text(data: bytes | str, source: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(f"not UTF-8 (byte {exc.start})", file=source, code="not_utf8") from None


def _too_deep(source: str, limit: int = MAX_DEPTH) -> ParseError:
    return ParseError(
        f"nests arrays and objects deeper than {limit} levels",
        file=source,
        code="too_deep",
    )


def _decode(text: str, source: str, start: int | None) -> tuple[Any, int]:
    try:
        if start is None:
            return _DECODER.decode(text), len(text)
        value, end = _DECODER.raw_decode(text, start)
        return value, end
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"not JSON ({exc.msg})",
            file=source,
            line=exc.lineno,
            column=exc.colno,
            code="not_json",
        ) from None
    except _Duplicate:
        raise ParseError("repeats a key in one object", file=source, code="duplicate_key") from None
    except RecursionError:  # the depth check makes this unreachable; kept as a last guard
        raise _too_deep(source) from None
    except ValueError:
        raise ParseError(
            "not JSON (NaN, Infinity or a number too long to read)",
            file=source,
            code="not_json",
        ) from None


def loads(data: bytes | str, *, source: str = "document", limit: int = MAX_DEPTH) -> Any:
    """Read exactly one strict JSON value from ``data`` (bytes are UTF-8, a BOM allowed).

    ``limit`` is the deepest nesting accepted; an envelope around boundary documents (a queued
    submission holding an ``--inputs`` document) takes one level more than its contents.

    Raises:
        ParseError: ``not_utf8``, ``not_json`` (with line and column when known),
            ``duplicate_key`` or ``too_deep``; the message never repeats the content.
    """
    text = _text(data, source)
    if _too_deep_text(text, limit):
        raise _too_deep(source, limit)
    value, _ = _decode(text, source, None)
    # Only an escape can make an unpaired surrogate; most documents hold none, so the walk is
    # skipped unless the text has one that could be.
    if "\\" in text and _SURROGATE_ESCAPE.search(text):  # one character: a memchr
        check_value(value, source=source, limit=limit)
    return value


def raw_decode_object(text: str, *, source: str = "text") -> dict[str, Any] | None:
    """The first strict JSON object inside ``text`` (a model wraps answers in prose or fences).

    Candidates start at each ``{``, at most :data:`MAX_CANDIDATES` of them; one that is not
    JSON is skipped, but a candidate that parses and repeats a key, or nests too deeply,
    refuses the whole answer: an answer a reader could take two ways is not taken either way.

    Raises:
        ParseError: ``duplicate_key`` or ``too_deep``.
    """
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_CANDIDATES:
        tries += 1
        # Measured from the candidate: strings before it (prose quotes) must not shift
        # where this candidate's strings begin and end.
        if _too_deep_text(text[start:]):
            raise _too_deep(source)
        try:
            value, _ = _decode(text, source, start)
        except ParseError as exc:
            if exc.code != "not_json":
                raise
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            check_value(value, source=source)
            return value
        start = text.find("{", start + 1)
    return None


def check_value(value: Any, *, source: str = "document", limit: int = MAX_DEPTH) -> None:
    """Refuse an already-decoded value nested deeper than ``limit`` (lists, tuples and dicts),
    or holding a string (or key) with an unpaired surrogate.

    Iterative, so a value too deep for any recursive walk is refused rather than crashing one.

    Raises:
        ParseError: ``too_deep``; ``not_json`` for an unpaired surrogate.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            _unicode(node, source)
            continue
        if isinstance(node, dict):
            for key in node:
                if isinstance(key, str):
                    _unicode(key, source)
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        depth += 1
        if depth > limit:
            raise _too_deep(source, limit)
        stack.extend(
            (child, depth) for child in children if isinstance(child, str | dict | list | tuple)
        )


def _unicode(text: str, source: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ParseError(
            "not JSON text (a string holds an unpaired surrogate)", file=source, code="not_json"
        ) from None

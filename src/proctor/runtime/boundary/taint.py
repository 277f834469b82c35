"""The taint set: exact secret values proctor delivered, found again in any form a tool could
hand them back in (see :mod:`proctor.runtime.boundary.sanitize`, which applies it first, and
:mod:`proctor.runtime.boundary.echoes` for the forms)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from proctor.runtime.boundary.detect import marker
from proctor.runtime.boundary.echoes import (
    caseless_encodings,
    cut,
    encodings,
    joined,
    joined_spans,
    literal_spans,
    normal,
    normal_map,
    plain,
    spread,
    views,
)

__all__ = ["MIN_TAINT_LENGTH", "TaintSet"]

MIN_TAINT_LENGTH = 8

_SHORT_TEXT = 256


class TaintSet:
    """Exact secret values (and their echoed forms) that must never leave proctor.

    Values of :data:`MIN_TAINT_LENGTH` characters or more are matched anywhere in text, in
    every form of :mod:`proctor.runtime.boundary.echoes` (raw, reversed, base64, base64url,
    base32, hex, URL-encoded, JSON-escaped), also with HTML/XML character references decoded
    and whitespace between characters dropped; shorter ones only as a whole string. A form
    holding whitespace, a reference or a continuation mark of the value's own is also looked
    for as it is, with whitespace and line continuations between its characters (the views
    above rewrite such a form itself). Adding is cheap; matching compiles lazily.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._exact: set[str] = set()
        # Forms holding whitespace, & or ; are searched in the text as it is (and squeezed in
        # its normal view); every other form in the normal view alone; the hex and base32
        # forms, lowered, in the lowered normal view (any letter case decodes the same).
        self._raw: tuple[str, ...] = ()
        self._normal: tuple[str, ...] = ()
        self._caseless: tuple[str, ...] = ()
        self._shortest = 0
        self.longest = 0  # the longest form searched: the margin a windowed reader needs
        self._any: re.Pattern[str] | None = None
        self._any_lowered: re.Pattern[str] = re.compile("(?!)")
        for value in values:
            self.add(value)

    def add(self, value: str) -> None:
        """Taint ``value``; empty strings are ignored."""
        if not value or value in self._exact:
            return
        self._exact.add(value)
        if len(value) < MIN_TAINT_LENGTH:
            return
        forms = encodings(value)
        raw = set(self._raw) | {f for f in forms if not plain(f)}
        norm = set(self._normal) | {f for f in forms if plain(f)}
        norm |= {s for f in forms if not plain(f) and len(s := normal(f)) >= MIN_TAINT_LENGTH}
        # and as a text whose references were decoded shows it: the form's own references
        # kept (the normal view decodes a text once)
        norm |= {
            s for f in forms if not plain(f) and len(s := "".join(f.split())) >= MIN_TAINT_LENGTH
        }
        caseless = set(self._caseless) | caseless_encodings(value)
        self._raw = tuple(sorted(raw, key=len, reverse=True))
        self._normal = tuple(sorted(norm, key=len, reverse=True))
        self._caseless = tuple(sorted(caseless, key=len, reverse=True))
        self._shortest = min(len(f) for f in (*self._raw, *self._normal, *self._caseless))
        self.longest = max(len(f) for f in (*self._raw, *self._normal, *self._caseless))
        self._any = None

    def __contains__(self, value: object) -> bool:
        return value in self._exact

    def __len__(self) -> int:
        return len(self._exact)

    def __bool__(self) -> bool:
        return bool(self._exact)

    def scrub(self, text: str) -> str:
        """``text`` with every tainted form replaced by ``[REDACTED:tainted]``."""
        if text in self._exact:
            return marker("tainted")
        if not self._normal or len(text) < self._shortest:
            return text
        if self._raw:
            hits = [form for form in self._raw if form in text]
            if hits:
                pattern = re.compile("|".join(re.escape(h) for h in hits))
                text = pattern.sub(marker("tainted"), text)
        view = views(text)  # the normal view (and the squeezed one, references kept)
        lowered = view.lower()
        if len(view) <= _SHORT_TEXT:
            # One search of a short text beats an ``in`` per form; a long text is the reverse.
            if self._any is None:
                self._any = _alternation(self._normal)
                self._any_lowered = _alternation(self._caseless)
            if self._any.search(view) is None and self._any_lowered.search(lowered) is None:
                return self._scrub_joined(text)
        hits = [form for form in self._normal if form in view]
        caseless = [form for form in self._caseless if form in lowered]
        return self._scrub_joined(_cut(text, hits, caseless) if hits or caseless else text)

    def _scrub_joined(self, text: str) -> str:
        """``text`` with each form its joined lines read as replaced (a value cut by a line
        continuation); the whole text when one still reads there after the cut (fail closed)."""
        found, hits, caseless = joined_spans(text, self._normal, self._caseless)
        # a form matched as it is (holding whitespace or a reference of the value's own) is
        # also looked for as it is across gaps: the normal view rewrites the form itself
        spans, literal = literal_spans(text, self._raw)
        if not hits and not caseless and not literal:
            return text
        out = cut(text, found + spans, marker("tainted"))
        if _still_holds(joined(out), hits, caseless) or literal_spans(out, tuple(literal))[1]:
            return marker("tainted")
        return out


def _alternation(forms: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(form) for form in forms) or "(?!)")


def _cut(text: str, hits: list[str], caseless: list[str]) -> str:
    """``text`` with each stretch that reads as a hit in its normal view replaced by a marker
    (from the first character of the hit to its last, whitespace between included)."""
    references = "&" in text and ";" in text
    found: list[tuple[int, int]] = []
    # Each hit is looked for in the text itself, whitespace (and references) allowed around its
    # characters: a search in C from each hit's first character, instead of a walk in Python.
    for forms, folded in ((hits, False), (caseless, True)):
        for form in forms:
            pattern = spread(form, references=references, caseless=folded)
            found += [m.span() for m in pattern.finditer(text)]
    out = cut(text, found, marker("tainted"))
    if references and _still_holds(out, hits, caseless):
        # a reference the patterns do not list: walk the normal view with its positions
        view, starts, ends = normal_map(text)
        alternatives = [re.escape(h) for h in hits]
        if caseless:
            alternatives.append("(?i:" + "|".join(re.escape(h) for h in caseless) + ")")
        found = [
            (starts[m.start()], ends[m.end() - 1])
            for m in re.finditer("|".join(alternatives), view)
        ]
        out = cut(text, found, marker("tainted"))
    return out


def _still_holds(text: str, hits: list[str], caseless: list[str]) -> bool:
    view = normal(text)
    lowered = view.lower()
    return any(h in view for h in hits) or any(h in lowered for h in caseless)

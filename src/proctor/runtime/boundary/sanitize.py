"""The sanitizer: removes secrets from tool results, refusals, audit records and CLI output.

Three detectors, applied in this order:

1. **Taint set** (:class:`TaintSet`): the exact secret values proctor delivered to a tool, and
   the forms a tool could hand them back in (:mod:`proctor.runtime.boundary.echoes`: reversed;
   base64, base64url and base32 at every byte alignment; hex; URL encoding; JSON string
   escaping; HTML/XML character references, decimal, hex or named, in any mix; split by
   whitespace or line breaks anywhere, or by line continuations: a backslash or a
   quoted-printable ``=`` before a line break). A value shorter than :data:`MIN_TAINT_LENGTH` is too
   likely to occur by chance, so it is only replaced where it is an entire string.
2. **Credential shapes**: provider tokens whose form identifies them (AWS key ids, GitHub and
   GitLab tokens, Slack tokens and webhooks, Discord, PEM and OpenSSH private-key blocks, JWTs,
   OpenAI/Anthropic/Stripe/npm/PyPI/Hugging Face/Google/Azure keys, bearer tokens, passwords in
   URLs).
3. **Secret-named fields**: a mapping key such as ``password`` or ``api_key`` (and, in text, an
   assignment ``api_key = ...``) has its value replaced. :func:`is_secret_name` decides; counts
   and metadata (``max_tokens``, ``token_count``, ``password_length``) are not secrets.

Only the secret is replaced; the text around it is kept. The marker is
``[REDACTED:<kind>]`` with ``kind`` one of :data:`KINDS`; the marker itself never matches a
detector, so scrubbing is idempotent.

Offsets and encodings: tools scrub the WHOLE content they read before slicing, paging or
encoding it, so no argument of a tool can cut a secret into a piece the scrubber misses. The
taint matching of encoded forms is the second line of defence for a tool that encodes anyway.
A line carrying ``pragma: allowlist secret`` (the detect-secrets convention) is exempt from the
secret-name heuristic in text only; shapes and tainted values are replaced on it all the same.

Speed: the detectors run only behind cheap cues, and a few string forms that provably hold
no shape or assignment skip them (see :mod:`proctor.runtime.boundary.detect`); tainted values
are replaced in every string all the same. Without a taint set, a string the detectors left
as it was is remembered as safe (a run's notes, a long key), and a document made only of
plain keys, safe strings, numbers and exact dicts and lists is copied without the walk's
bookkeeping (the walk's own answer: tests/runtime/boundary/test_sanitize_plain.py). The taint
set lives in :mod:`proctor.runtime.boundary.taint`.

What this does not do: detect arbitrary high-entropy strings (digests are everywhere in proctor's
own output), or find a secret split across two separately scrubbed strings.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, TypeAlias

from proctor.contracts import values
from proctor.runtime.boundary.detect import (
    KINDS,
    SAFE_FORM,
    SAFE_FORM_MAX,
    detect,
    is_secret_name,
    is_shell_directory,
    marker,
)
from proctor.runtime.boundary.taint import MIN_TAINT_LENGTH, TaintSet

__all__ = [
    "KINDS",
    "MIN_TAINT_LENGTH",
    "Sanitizer",
    "TaintSet",
    "is_secret_name",
    "marker",
    "scrub_fields",
    "scrub_text",
    "scrub_value",
]

# --------------------------------------------------------------------------- text


def scrub_text(
    text: str, taint: TaintSet | None = None, *, own: Sequence[tuple[int, int]] = ()
) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``, the rest kept as it is.

    Applies the taint set (if given), then credential shapes, then secret-named assignments.
    ``own`` are the spans of ``text`` that are proctor's own words (an error's
    :attr:`proctor.errors.ProctorError.own`): a secret-named assignment whose value lies wholly
    in them is not a secret and is kept (``credentials: Input should be a valid dictionary``);
    a value in the data the message quotes is replaced as always. When a tainted value is
    found the spans no longer fit the text, and the whole of it is treated as data.
    Never raises on any ``str``.
    """
    if taint:
        scrubbed = taint.scrub(text)
        if scrubbed != text:
            text, own = scrubbed, ()
    return detect(text, own)


# --------------------------------------------------------------------------- values

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")

# A node's path is rendered only when something under it is redacted: ``(parent, key, _KEY)``,
# ``(parent, index, _INDEX)`` or ``(parent, "", _KEY_ITSELF)`` (the key was redacted).
_KEY, _INDEX, _KEY_ITSELF = 0, 1, 2
_Path: TypeAlias = "str | tuple[_Path, str | int, int]"


def _render(path: _Path) -> str:
    if isinstance(path, str):
        return path
    parent, step, how = path
    base = _render(parent)
    if how == _INDEX:
        return f"{base}[{step}]"
    if how == _KEY_ITSELF:
        return f"{base}.<key>"
    key = str(step)
    return f"{base}.{key}" if _IDENT.match(key) else f"{base}[{json.dumps(key)}]"


def _empty(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, bool)
        or (isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)) and len(value) == 0)
    )


class Sanitizer:
    """Scrubs text and JSON-like values against one taint set (see the module docstring)."""

    def __init__(self, taint: TaintSet | None = None) -> None:
        self.taint = taint if taint is not None else TaintSet()

    def text(self, text: str) -> str:
        """:func:`scrub_text` with this sanitizer's taint set."""
        return scrub_text(text, self.taint)

    def value(self, value: Any) -> tuple[Any, list[str]]:
        """:func:`scrub_value` with this sanitizer's taint set."""
        return scrub_value(value, self.taint)


def scrub_value(value: Any, taint: TaintSet | None = None) -> tuple[Any, list[str]]:
    """A scrubbed, JSON-ready copy of ``value`` and the paths (``$.a.b[0]``) that were redacted.

    Mappings, lists, tuples and sets become dicts and lists (sets sorted); bytes are decoded as
    UTF-8 with replacement; paths, enums, dates, exceptions, dataclasses, pydantic models and
    anything else become their JSON-ready form or their string. A value under a secret-named key
    (:func:`is_secret_name`) is replaced whole; strings are passed through :func:`scrub_text`.
    The input is never mutated; a reference cycle becomes ``"[CYCLE]"``.
    """
    if not taint and (type(value) is dict or type(value) is list):
        copy = _plain_copy(value, 0)
        if copy is not _WALK:
            return copy, []
    walker = _Walker(taint)
    safe = walker.walk(value, "$")
    if not walker.redacted:
        return safe, []
    return safe, sorted({_render(path) for path in walker.redacted})


def scrub_fields(fields: Mapping[str, Any], taint: TaintSet | None = None) -> tuple[Any, list[str]]:
    """:func:`scrub_value` of a mapping made for the call (keyword arguments, say) that no value
    in it can refer back to: the same result, without the cycle bookkeeping for the mapping
    itself (every container inside it is still checked)."""
    if not taint and type(fields) is dict:
        copy = _plain_copy(fields, 0)
        if copy is not _WALK:
            return copy, []
    walker = _Walker(taint)
    safe = walker.mapping(fields, "$")
    if not walker.redacted:
        return safe, []
    return safe, sorted({_render(path) for path in walker.redacted})


# Strings already shown to be safe: short ones of a SAFE_FORM (tool names, outcomes, step ids,
# paths: the same few recur in every call's result and audit line), and strings the detectors
# were run on and left as they were (a run's notes, a long snake_case key: the same in every
# envelope and audit line). Only safe strings are kept, never a secret (nor a string that a
# detector changed); the memo is used without a taint set only (a tainted value may be any
# string) and is emptied when full. A lookup costs a seventh of the regex and far less than
# the detectors; only strings of up to _SAFE_SEEN_LONGEST characters are looked up (hashing
# a read's 4 KiB content would cost more than a miss saves).
_SAFE_SEEN: dict[str, None] = {}
_SAFE_SEEN_MAX = 1024
_SAFE_SEEN_LONGEST = 512
_SAFE_FORM_KEPT = 32  # digests (71 characters) and UUIDs (36) are mostly unique: not kept


def _seen_safe(text: str) -> None:
    if len(_SAFE_SEEN) >= _SAFE_SEEN_MAX:
        _SAFE_SEEN.clear()
    _SAFE_SEEN[text] = None


def _safe_form(text: str) -> bool:
    """Whether ``text`` is a SAFE_FORM string (which no detector can change)."""
    if len(text) > SAFE_FORM_MAX or SAFE_FORM.fullmatch(text) is None:
        return False
    if len(text) <= _SAFE_FORM_KEPT:
        _seen_safe(text)
    return True


_WALK: Any = object()
""":func:`_plain_copy`'s answer when the value must be walked."""
_PLAIN_DEPTH = 64  # deeper (or a reference cycle): walked


def _plain_copy(node: dict[Any, Any] | list[Any], depth: int) -> Any:
    """The walk's copy of ``node`` (no taint) when it changes and redacts nothing there, made
    without the walk's bookkeeping; :data:`_WALK` when it might (then the walk decides).

    It is the walk's own answer: every key is one :func:`_plain_key` found plain; every
    string is a safe one (the memo, a SAFE_FORM) or one the detectors leave as it is; every
    other value is ``None``, a bool, an int, a finite float, or an exact dict or list of the
    same. Anything else (a secret, a tuple, a set, an object to convert) is left to the walk.
    """
    if depth > _PLAIN_DEPTH:
        return _WALK
    if type(node) is dict:
        if not _PLAIN_KEYS.issuperset(node):
            return _WALK
        out: Any = node.copy()
        places: Any = node.items()
    else:
        out = node.copy()
        places = enumerate(node)
    seen = _SAFE_SEEN
    for place, item in places:
        kind = type(item)
        if kind is str:
            if item in seen or _safe_form(item):
                continue
            if detect(item) != item:
                return _WALK
            if len(item) <= _SAFE_SEEN_LONGEST:
                _seen_safe(item)  # no detector changed it
        elif item is None or kind is int or kind is bool:
            continue
        elif kind is dict or kind is list:
            if not item and depth < _PLAIN_DEPTH:  # an empty one's copy (what its call gives)
                out[place] = [] if kind is list else {}
                continue
            copy = _plain_copy(item, depth + 1)
            if copy is _WALK:
                return _WALK
            out[place] = copy
        elif kind is not float or not math.isfinite(item):
            return _WALK
    return out


class _Walker:
    __slots__ = ("active", "redacted", "taint")

    def __init__(self, taint: TaintSet | None) -> None:
        self.taint = taint if taint else None  # an empty set taints nothing
        self.redacted: list[_Path] = []
        self.active: set[int] = set()

    def text(self, node: str, path: _Path) -> str:
        taint = self.taint
        if taint is None:
            if (len(node) <= _SAFE_SEEN_LONGEST and node in _SAFE_SEEN) or _safe_form(node):
                return node
        elif node in taint:
            self.redacted.append(path)
            return marker("tainted")
        out = scrub_text(node, taint)
        if out != node:
            self.redacted.append(path)
        elif taint is None and len(node) <= _SAFE_SEEN_LONGEST:
            _seen_safe(node)  # no detector changed it
        return out

    def walk(self, node: Any, path: _Path) -> Any:
        kind = type(node)
        if kind is str:
            return self.text(node, path)
        if node is None or kind is int or kind is bool:
            return node
        if kind is dict or kind is list:
            return self.container(node, path)
        if isinstance(node, (bool, int)):
            return node
        if isinstance(node, str):
            return self.text(node, path)
        if isinstance(node, float):
            return node if math.isfinite(node) else str(node)
        if isinstance(node, (bytes, bytearray, memoryview)):
            return self.text(bytes(node).decode("utf-8", errors="replace"), path)
        if isinstance(node, enum.Enum):
            return self.walk(node.value, path)
        if isinstance(node, (PurePath, _dt.date, _dt.time)):
            return self.text(
                node.isoformat() if not isinstance(node, PurePath) else str(node), path
            )
        if isinstance(node, BaseException):
            return self.text(f"{type(node).__name__}: {node}", path)
        dump = getattr(node, "model_dump", None)
        if callable(dump) and not isinstance(node, type):
            return self.walk(dump(mode="json"), path)
        if values.is_value(node):
            return self.walk(values.asdict(node), path)
        if hasattr(type(node), "__dataclass_fields__") and not isinstance(node, type):
            import dataclasses  # a value of a standard dataclass (a worker's own, say)

            return self.walk(dataclasses.asdict(node), path)
        if isinstance(node, (Mapping, list, tuple, set, frozenset)):
            return self.container(node, path)
        return self.text(str(node), path)

    def container(self, node: Any, path: _Path) -> Any:
        if id(node) in self.active:
            return "[CYCLE]"
        self.active.add(id(node))
        try:
            kind = type(node)
            if kind is dict or (kind is not list and isinstance(node, Mapping)):
                return self.mapping(node, path)
            items = [self.walk(item, (path, i, _INDEX)) for i, item in enumerate(node)]
            if isinstance(node, (set, frozenset)):
                items.sort(key=lambda v: json.dumps(v, sort_keys=True))
            return items
        finally:
            self.active.discard(id(node))

    def mapping(self, node: Mapping[Any, Any], path: _Path) -> dict[str, Any]:
        taint = self.taint
        out: dict[str, Any] = {}
        for raw_key, item in node.items():
            if (
                taint is None
                and type(raw_key) is str
                and (raw_key in _PLAIN_KEYS or _plain_key(raw_key))
            ):
                kind = type(item)
                if kind is str:
                    if (len(item) <= _SAFE_SEEN_LONGEST and item in _SAFE_SEEN) or _safe_form(item):
                        out[raw_key] = item
                    else:
                        out[raw_key] = self.text(item, (path, raw_key, _KEY))
                elif item is None or kind is int or kind is bool:
                    out[raw_key] = item
                elif (kind is list or kind is dict) and not item:
                    out[raw_key] = [] if kind is list else {}
                else:
                    out[raw_key] = self.walk(item, (path, raw_key, _KEY))
                continue
            key = raw_key if isinstance(raw_key, str) else str(self.walk(raw_key, path))
            safe_key = scrub_text(key, taint)
            if safe_key != key:
                self.redacted.append((path, "", _KEY_ITSELF))
            if is_secret_name(key) and not _empty(item) and not is_shell_directory(key, item):
                out[safe_key] = marker("secret_field")
                self.redacted.append((path, safe_key, _KEY))
            elif item is None or type(item) is int or type(item) is bool:
                out[safe_key] = item
            else:
                out[safe_key] = self.walk(item, (path, safe_key, _KEY))
        return out


# The keys _plain_key found plain, looked up before it is called (a set's lookup costs a
# fraction of a cached call; every audit line and envelope repeats the same keys).
_PLAIN_KEYS: set[str] = set()
_PLAIN_KEYS_MAX = 4096


@functools.lru_cache(maxsize=4096)
def _plain_key(key: str) -> bool:
    """A mapping key that no detector changes and that names no secret (used without taint:
    a tainted value may be any string)."""
    if is_secret_name(key) or detect(key) != key:
        return False
    if len(_PLAIN_KEYS) >= _PLAIN_KEYS_MAX:
        _PLAIN_KEYS.clear()
        _plain_key.cache_clear()  # so that a key found plain again is put back in the set
    _PLAIN_KEYS.add(key)
    return True

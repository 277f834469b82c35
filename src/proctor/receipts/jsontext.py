"""Compact JSON text from reusable encoders (no import beyond the standard library's ``json``).

Kept apart from :mod:`.canonical` so that the run store and the audit log, which only write
JSON text, do not import the RFC 8785 package with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["compact_encoder", "reusable_encoder"]


def compact_encoder(*, sort_keys: bool) -> Callable[[Any], str]:
    """A reusable ``json.dumps(separators=(",", ":"), ensure_ascii=False, sort_keys=...)``
    without its circular-reference check: the same text, from one C encoder built once.

    ``JSONEncoder.encode`` builds a new C encoder (and a Python closure) on every call, which
    costs more than encoding a small value; every governed call encodes five. For values with
    no reference cycle (every value that is JSON) the text is the same as ``json.dumps``
    gives; a cycle raises ``RecursionError`` instead of ``ValueError``.
    """
    return reusable_encoder(sort_keys=sort_keys, separators=(",", ":"))


def reusable_encoder(
    *, sort_keys: bool, separators: tuple[str, str], ascii: bool = False
) -> Callable[[Any], str]:
    """:func:`compact_encoder` with other separators: ``separators=(", ", ": ")`` gives the text
    of ``json.dumps(value, ensure_ascii=False, sort_keys=...)`` with its default spacing;
    ``ascii`` escapes every character past ASCII, as ``ensure_ascii=True`` does."""
    item, key = separators
    encoder = json.JSONEncoder(
        ensure_ascii=ascii, check_circular=False, sort_keys=sort_keys, separators=separators
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # an interpreter without the C accelerator
        return encoder.encode
    strings = json.encoder.encode_basestring_ascii if ascii else json.encoder.encode_basestring
    scan = make(None, encoder.default, strings, None, key, item, sort_keys, False, True)

    def encode(value: Any) -> str:
        return "".join(scan(value, 0))

    return encode

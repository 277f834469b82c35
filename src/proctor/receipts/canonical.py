"""Canonical JSON (RFC 8785, JCS) and the ``sha256:<hex>`` digests proctor takes over it.

:func:`canonical` is the one serialization every digest and every signature in proctor is
computed over. It is on the hot path of every governed call, so it has two routes:

* a fast route through the standard library's C JSON encoder, taken only when the value is
  built from exact ``dict`` (ASCII keys), ``list``, ``str``, ``bool``, ``None`` and ``int``
  within the IEEE-754 safe range. For exactly those values ``json.dumps(sort_keys=True,
  separators=(",", ":"), ensure_ascii=False)`` produces the RFC 8785 bytes: ASCII keys sort
  the same by code point as by UTF-16 unit, string escaping is identical (short escapes for
  ``\\b \\f \\n \\r \\t``, lowercase ``\\u00xx`` for other controls, nothing else escaped)
  and integers print the same. A property test holds the two routes byte-identical.
* the ``rfc8785`` package for everything else (floats, non-ASCII keys, subclasses, tuples)
  and for every value the fast route cannot encode, so errors are always rfc8785's.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from proctor.errors import UsageError
from proctor.receipts.jsontext import compact_encoder

__all__ = [
    "DIGEST_PREFIX",
    "canonical",
    "digest",
    "digest_and_text",
    "digest_bytes",
    "is_digest",
]

DIGEST_PREFIX = "sha256:"

_INT_MAX = 2**53 - 1
_INT_MIN = -(2**53) + 1

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

_encode = compact_encoder(sort_keys=True)


def _fast_ok(value: Any, depth: int = 0) -> bool:
    """True when ``value`` is made only of types whose stdlib encoding is exactly JCS."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if depth > 200:  # leave deep nesting to rfc8785, which bounds it by recursion
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                return False
            # a string, null or safe integer here, without a call per item
            kind = type(item)
            if kind is str or item is None:
                continue
            if kind is int and _INT_MIN <= item <= _INT_MAX:
                continue
            if (kind is list or kind is dict) and not item and depth < 200:
                continue  # an empty list or object, as _fast_ok of it answers, without a call
            if not _fast_ok(item, depth + 1):
                return False
        return True
    if kind is list:
        for item in value:  # as for a dict's values: the common leaves without a call
            kind = type(item)
            if kind is str or item is None:
                continue
            if kind is int and _INT_MIN <= item <= _INT_MAX:
                continue
            if not _fast_ok(item, depth + 1):
                return False
        return True
    return False


def canonical(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value.

    Raises:
        UsageError: (code ``not_canonicalizable``) the value is not representable in JCS:
            NaN or infinite floats, integers outside ±(2**53-1), non-string keys, lone
            surrogates, or types that are not JSON.
    """
    if _fast_ok(value):
        try:
            return _encode(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: let rfc8785 raise its own error below
    import rfc8785  # the slow route: loaded the first time a value needs it

    try:
        return bytes(rfc8785.dumps(value))
    except (rfc8785.CanonicalizationError, TypeError, RecursionError) as exc:
        raise UsageError(
            f"value cannot be written as canonical JSON: {exc}", code="not_canonicalizable"
        ) from exc


def canonical_plain(value: Any) -> bytes:
    """Canonical bytes of a value the caller has already checked holds only exact ``dict``
    (ASCII keys), ``list``, ``str``, ``bool`` and ``None``: the fast route without the walk.

    Raises:
        UnicodeEncodeError: a string holds a lone surrogate.
    """
    return _encode(value).encode("utf-8")


def canonical_text(value: Any) -> str:
    """:func:`canonical_plain` as text, before UTF-8 encoding (same precondition).

    Raises:
        UnicodeEncodeError: a string holds a lone surrogate.
    """
    text = _encode(value)
    if not text.isascii():
        text.encode("utf-8")  # refuses a lone surrogate exactly as canonical_plain does
    return text


def digest_bytes(data: bytes) -> str:
    """``sha256:<64 lowercase hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical bytes of a JSON value.

    Raises:
        UsageError: the value is not representable in canonical JSON (see :func:`canonical`).
    """
    if _fast_ok(value):  # canonical()'s fast route, inline (a seal digests a value a call)
        try:
            return DIGEST_PREFIX + hashlib.sha256(_encode(value).encode("utf-8")).hexdigest()
        except UnicodeEncodeError:
            pass  # a lone surrogate: canonical() lets rfc8785 refuse it
    return DIGEST_PREFIX + hashlib.sha256(canonical(value)).hexdigest()


def digest_and_text(value: Any) -> tuple[str, str | None]:
    """:func:`digest` of ``value``, and the canonical text it was taken over when the standard
    library's encoder wrote it (``None`` when rfc8785 did). That text is also exactly
    ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, so a
    caller that stores the value as JSON need not encode it again.

    Raises:
        UsageError: as :func:`digest`.
    """
    if _fast_ok(value):
        text = _encode(value)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: digest() lets rfc8785 refuse it
        else:
            return DIGEST_PREFIX + hashlib.sha256(data).hexdigest(), text
    return digest(value), None


def is_digest(text: object) -> bool:
    """True when ``text`` is exactly ``sha256:`` followed by 64 lowercase hex digits."""
    return type(text) is str and _DIGEST.fullmatch(text) is not None

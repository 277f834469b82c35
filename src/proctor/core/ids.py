"""Random identifiers: RFC 9562 version 4 UUIDs, without the :mod:`uuid` module.

``uuid`` builds a ``UUID`` object per id and imports :mod:`platform` (and what that compiles) at
start-up; run ids and audit event ids only need the text. The bits are those of
``uuid.uuid4()``: 122 random bits from ``os.urandom``, the version nibble 4, the variant 10.

:func:`counted_uuid4_text` is the cheaper form for ids that must be unique but need not be
unpredictable (audit event ids): the same layout, with the first 74 random bits drawn once per
process (and again in a forked child) and the last 48 bits a counter started at a random value.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["counted_uuid4_text", "uuid4_hex", "uuid4_text"]


def uuid4_hex() -> str:
    """A random version 4 UUID as 32 lower-case hex digits (``uuid.uuid4().hex``)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


def uuid4_text() -> str:
    """A random version 4 UUID in its 8-4-4-4-12 form (``str(uuid.uuid4())``)."""
    h = uuid4_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_COUNTED_BITS = 48
_COUNTED_MASK = (1 << _COUNTED_BITS) - 1
_counted: tuple[str, itertools.count[int]] = ("", itertools.count())


def _draw_counted() -> None:
    """A new random prefix and counter start (at import, and in each forked child)."""
    global _counted
    text = uuid4_text()
    _counted = (text[:24], itertools.count(int(text[24:], 16)))


def counted_uuid4_text() -> str:
    """A version 4 UUID text (the layout of :func:`uuid4_text`) unique among the ids this
    function gives in any process, without reading random bytes per id: the first 74 random
    bits (``xxxxxxxx-xxxx-4xxx-yxxx-``) are drawn once per process, and again in a forked
    child (so a parent and its child never share them), and the last 12 hex digits count on
    from a random start (a process repeats an id only after 2**48 of them). Two processes
    give the same id only if they drew the same 74 bits and their counters meet. For ids
    that must be unique, not unpredictable."""
    prefix, count = _counted
    return f"{prefix}{next(count) & _COUNTED_MASK:012x}"


_draw_counted()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_draw_counted)

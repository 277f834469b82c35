"""Random identifiers: RFC 9562 version 4 UUIDs, without the :mod:`uuid` module.

``uuid`` builds a ``UUID`` object per id and imports :mod:`platform` (and what that compiles) at
start-up; run ids and audit event ids only need the text. The bits are those of
``uuid.uuid4()``: 122 random bits from ``os.urandom``, the version nibble 4, the variant 10.
"""

from __future__ import annotations

import os

__all__ = ["uuid4_hex", "uuid4_text"]


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

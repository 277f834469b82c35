"""Where the receipts of one pack lie, by body digest, in about 52 bytes a receipt.

The seam: :class:`~.pack_window.PackWindow` holds the places of a pack's receipts while a walk
reads that pack. A dict of 64-character hex digests to offsets costs some 170 bytes a receipt
(2 MiB for a pack of 12,288 receipts, and a walk holds two packs and learns a third), which
was a quarter of what verifying a tree of a million receipts adds to the interpreter's own
memory. :class:`Places` keeps the same answers in flat arrays: the 32-byte digests in the
order they were noted, their places, and an order of the receipts by the first 8 bytes of
their digest (searched by bisection, then the whole digest compared).

:meth:`Places.get` answers exactly what ``dict.get`` on ``{hexdigest: place}`` filled by
``setdefault`` would: the place first noted for a digest, and None for any other string
(upper-case hex, spaces, a wrong length included).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left

__all__ = ["Places"]

_WIDTH = 32  # bytes of a sha256 digest


class Places:
    """Places (``offset << 32 | size``) of a pack's receipts by body digest (see the module).

    Notes are added with :meth:`note` and become searchable after :meth:`seal`; a note added
    after sealing is refused (``ValueError``), as is a digest that is not 32 bytes.
    """

    __slots__ = ("_keys", "_order", "_places", "_prefixes")

    def __init__(self) -> None:
        self._keys = bytearray()
        self._places = array("Q")
        self._order: array[int] | None = None
        self._prefixes = array("Q")

    def __len__(self) -> int:
        return len(self._places)

    def note(self, digest: bytes, place: int) -> None:
        """Note that the receipt whose body digest is ``digest`` lies at ``place`` (a later
        note of the same digest is kept, but never found: the first one is)."""
        if self._order is not None:
            raise ValueError("places are sealed")
        if len(digest) != _WIDTH:
            raise ValueError("a digest is 32 bytes")
        self._keys += digest
        self._places.append(place)

    def seal(self) -> Places:
        """Order the notes for searching (a stable sort: of equal digests the first noted
        comes first); returns ``self``."""
        if self._order is None:
            prefixes = memoryview(self._keys).cast("Q")[:: _WIDTH // 8]
            order = sorted(range(len(self._places)), key=prefixes.__getitem__)
            self._prefixes = array("Q", map(prefixes.__getitem__, order))
            prefixes.release()
            self._order = array("I", order)
        return self

    def get(self, hex_id: str) -> int | None:
        """The place first noted for the digest whose lowercase hex is ``hex_id``, else None
        (also before :meth:`seal`)."""
        order = self._order
        if order is None or len(hex_id) != 2 * _WIDTH:
            return None
        try:
            digest = bytes.fromhex(hex_id)
        except ValueError:
            return None
        if len(digest) != _WIDTH:
            return None
        prefix = int.from_bytes(digest[:8], sys.byteorder)
        prefixes, keys = self._prefixes, self._keys
        at = bisect_left(prefixes, prefix)
        while at < len(prefixes) and prefixes[at] == prefix:
            i = order[at] * _WIDTH
            if keys[i : i + _WIDTH] == digest:
                # fromhex also reads upper case and spaces: only the lowercase hex is a name
                return self._places[order[at]] if digest.hex() == hex_id else None
            at += 1
        return None

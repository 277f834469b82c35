"""Where the receipts of one pack lie, by body digest, in about 52 bytes a receipt.

The seam: :class:`~.pack_window.PackWindow` holds the places of a pack's receipts while a walk
reads that pack. A dict of 64-character hex digests to offsets costs some 170 bytes a receipt
(2 MiB for a pack of 12,288 receipts, and a walk holds two packs and learns a third), which
was a quarter of what verifying a tree of a million receipts adds to the interpreter's own
memory. :class:`Places` keeps the same answers in flat arrays: the 32-byte digests in the
order they were noted, their places, an order of the receipts by the first 8 bytes of their
digest, and where each bucket of that order starts (the top bits of those 8 bytes, about one
receipt a bucket: a look-up reads a bucket's one or two entries, then compares the whole
digest, where a bisection of the order compared some 14 numbers, each built afresh from the
array: a third of a pack read's time per receipt).

:meth:`Places.get` answers exactly what ``dict.get`` on ``{hexdigest: place}`` filled by
``setdefault`` in the same order would: the place first noted for a digest, and None for any
other string (upper-case hex, spaces, a sign, a wrong length included).
"""

from __future__ import annotations

import sys
from array import array

__all__ = ["Places"]

_WIDTH = 32  # bytes of a sha256 digest


class Places:
    """Places (``offset << 32 | size``) of a pack's receipts by body digest (see the module).

    ``digests`` holds the 32-byte digests one after another, ``places`` their places, in the
    order noted. Refused (``ValueError``): ``digests`` not 32 bytes for each place.
    """

    __slots__ = ("_keys", "_order", "_places", "_prefixes", "_shift", "_starts")

    def __init__(self, digests: bytes | bytearray = b"", places: array[int] | None = None) -> None:
        placed = array("Q") if places is None else places
        if len(digests) != _WIDTH * len(placed):
            raise ValueError("places need one 32-byte digest each")
        self._keys = digests  # held, not copied: the caller lets go of it
        self._places = placed
        # the first 8 bytes of each digest, as the big-endian number its first 16 hex
        # digits read as, in order; a stable sort keeps equal digests in the order noted
        view = memoryview(self._keys).cast("Q")
        prefixes = array("Q", view[:: _WIDTH // 8])
        view.release()
        if sys.byteorder == "little":
            prefixes.byteswap()
        # sorted as one number each, prefix then place in the order noted (one object a
        # receipt while sorting, where a sort by key holds two and a list of keys)
        ranked = [prefix << 32 | i for i, prefix in enumerate(prefixes)]
        del prefixes
        ranked.sort()
        self._prefixes = prefixes = array("Q", [r >> 32 for r in ranked])
        self._order = array("I", [r & 0xFFFFFFFF for r in ranked])
        del ranked
        # bucket b holds the ranks starts[b] up to starts[b + 1]: those whose prefix's top
        # `bits` bits are b, about one receipt a bucket
        bits = max(1, len(prefixes).bit_length())
        self._shift = shift = 64 - bits
        counts = [0] * ((1 << bits) + 1)
        for prefix in prefixes:
            counts[(prefix >> shift) + 1] += 1
        total = 0
        for b, count in enumerate(counts):
            total += count
            counts[b] = total
        self._starts = array("I", counts)

    def __len__(self) -> int:
        return len(self._places)

    def get(self, hex_id: str) -> int | None:
        """The place first noted for the digest whose lowercase hex is ``hex_id``, else None."""
        try:
            prefix = int(hex_id[:16], 16)
        except ValueError:
            return None
        if prefix < 0:  # a sign: no digest's name (nor a bucket's number)
            return None
        bucket = prefix >> self._shift
        starts = self._starts
        if bucket + 1 >= len(starts):
            return None
        at, end = starts[bucket], starts[bucket + 1]
        prefixes = self._prefixes
        # ranked by prefix then in the order noted: the first whole match is the first noted
        while at < end:
            if prefixes[at] == prefix:
                i = self._order[at]
                # the whole digest, as the lowercase hex a name is: int() also reads upper
                # case, spaces, signs and underscores, which name nothing here
                if self._keys[i * _WIDTH : i * _WIDTH + _WIDTH].hex() == hex_id:
                    return self._places[i]
            at += 1
        return None

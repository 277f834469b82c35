"""Where the receipts of one pack lie, by body digest, in about 52 bytes a receipt.

The seam: :class:`~.pack_window.PackWindow` holds the places of a pack's receipts while a walk
reads that pack. A dict of 64-character hex digests to offsets costs some 170 bytes a receipt
(2 MiB for a pack of 12,288 receipts, and a walk holds two packs and learns a third), which
was a quarter of what verifying a tree of a million receipts adds to the interpreter's own
memory. :class:`Places` keeps the same answers in flat arrays: the 32-byte digests in the
order they were noted, their places, and an order of the receipts by the first 8 bytes of
their digest (searched by bisection, then the whole digest compared). :func:`note_places`
gathers those digests and places from a pack's bytes, a chunk at a time.

:meth:`Places.get` answers exactly what ``dict.get`` on ``{hexdigest: place}`` filled by
``setdefault`` in the same order would: the place first noted for a digest, and None for any
other string (upper-case hex, spaces, a sign, a wrong length included).
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from bisect import bisect_left

__all__ = ["Places", "note_places"]

_WIDTH = 32  # bytes of a sha256 digest
# where an envelope line's body starts and ends (what receipt_packs.body_of cuts at)
_BODY_START = b'{"body":'
_BODY_END = b',"key_id":"'


class Places:
    """Places (``offset << 32 | size``) of a pack's receipts by body digest (see the module).

    ``digests`` holds the 32-byte digests one after another, ``places`` their places, in the
    order noted. Refused (``ValueError``): ``digests`` not 32 bytes for each place.
    """

    __slots__ = ("_keys", "_order", "_places", "_prefixes")

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
        self._prefixes = array("Q", (r >> 32 for r in ranked))
        self._order = array("I", (r & 0xFFFFFFFF for r in ranked))

    def __len__(self) -> int:
        return len(self._places)

    def get(self, hex_id: str) -> int | None:
        """The place first noted for the digest whose lowercase hex is ``hex_id``, else None."""
        try:
            prefix = int(hex_id[:16], 16)
        except ValueError:
            return None
        prefixes = self._prefixes
        at = bisect_left(prefixes, prefix)
        if at == len(prefixes) or prefixes[at] != prefix:
            return None
        keys, order = self._keys, self._order
        while True:
            i = order[at]
            # the whole digest, as the lowercase hex a name is: int() also reads upper case,
            # spaces, signs and underscores, which name nothing here
            if keys[i * _WIDTH : i * _WIDTH + _WIDTH].hex() == hex_id:
                return self._places[i]
            at += 1
            if at == len(prefixes) or prefixes[at] != prefix:
                return None


def note_places(data: bytes, stop: int, base: int, digests: bytearray, places: array[int]) -> None:
    """Note in ``digests`` and ``places`` where each receipt line of ``data[:stop]`` lies,
    ``data`` being read from byte ``base`` of a pack, on a line's start: by the digest of its
    body, exactly as :func:`~.receipt_packs.records_of` names lines (a line that
    :func:`~.receipt_packs.body_of` finds no body in is skipped: the header, a batch trailer),
    without copying each line and its body first (a pack has thousands)."""
    view = memoryview(data)
    find, rfind, starts = data.find, data.rfind, data.startswith
    sha256, keep, place = hashlib.sha256, digests.extend, places.append
    first, last = _BODY_START, _BODY_END
    skip = len(first)
    pos = 0
    while pos < stop:
        end = find(b"\n", pos, stop)
        if end < 0:
            break
        if starts(first, pos, end):
            body_end = rfind(last, pos, end)
            if body_end > pos + skip:
                keep(sha256(view[pos + skip : body_end]).digest())
                place((base + pos) << 32 | (end + 1 - pos))
        pos = end + 1

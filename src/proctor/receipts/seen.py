"""The receipts a tree walk has seen, in memory that stays small for a tree of millions.

The seam: :mod:`proctor.receipts.verify` must tell a receipt committed twice in one pass, and
a set of every receipt id costs some 200 bytes per receipt (200 MiB for a million).
:class:`Fingerprints` keeps about 7 bytes per receipt instead: 48 bits of the id's salted hash
(Python's ``hash`` of a string: SipHash under a key drawn per process), in open-addressed
tables at most 85% full, one per 1/256th of the fingerprints (each keeps the 40 bits its place
does not say, in 5 bytes, and grows on its own, so growing never holds two copies of the
whole). A fingerprint seen before is only a *suspect*: a true
duplicate, or two ids sharing 48 bits of a salted hash (for a million honest receipts, about
one walk in 550 has one). The walk never decides on a suspect: it walks the tree again,
tracking the suspect ids exactly, so the result is always exact (see ``verify_tree``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SMALL_SEEN", "Fingerprints"]

SMALL_SEEN = 1 << 15
"""Receipts a walk holds as a set of their hashes (about 60 bytes each, fast) before it moves
to :class:`Fingerprints`."""

_BITS = 48  # of a fingerprint: the top _SHARD_BITS choose a table, the rest are kept there
_SHARD_BITS = 8
_WIDTH = (_BITS - _SHARD_BITS) // 8
_KEPT = (1 << (_BITS - _SHARD_BITS)) - 1
_SHARDS = (1 << _SHARD_BITS) - 1
_EMPTY = bytes(_WIDTH)
_START = 64  # slots of a table at first


class Fingerprints:
    """Open-addressed tables of 48-bit fingerprints of receipt ids (see the module)."""

    __slots__ = ("_count", "_limit", "_slots", "_tables")

    def __init__(self, hashes: Iterable[int] = ()) -> None:
        shards = 1 << _SHARD_BITS
        self._tables = [bytearray(_START * _WIDTH) for _ in range(shards)]
        self._slots = [_START] * shards
        self._count = [0] * shards
        self._limit = [_START * 17 // 20] * shards
        for hashed in hashes:
            self.add(hashed)

    def __len__(self) -> int:
        return sum(self._count)

    def add(self, hashed: int) -> bool:
        """Note an id by its salted hash (``hash(rid)``); True when its fingerprint was
        already noted (a suspect)."""
        print_ = hashed
        shard = (print_ >> (_BITS - _SHARD_BITS)) & _SHARDS
        if self._count[shard] >= self._limit[shard]:
            self._grow(shard)
        return self._put(shard, print_ & _KEPT or 1)  # 0 marks an empty slot

    def _put(self, shard: int, kept: int) -> bool:
        table = self._tables[shard]
        want = kept.to_bytes(_WIDTH, "little")
        end = len(table)
        at = kept % self._slots[shard] * _WIDTH
        while True:
            held = table[at : at + _WIDTH]
            if held == want:
                return True
            if held == _EMPTY:
                table[at : at + _WIDTH] = want
                self._count[shard] += 1
                return False
            at += _WIDTH
            if at == end:
                at = 0

    def _grow(self, shard: int) -> None:
        old, width = self._tables[shard], _WIDTH
        slots = self._slots[shard] * 4 // 3
        self._slots[shard] = slots
        self._tables[shard] = bytearray(slots * width)
        self._limit[shard] = slots * 17 // 20
        self._count[shard] = 0
        for at in range(0, len(old), width):
            held = old[at : at + width]
            if held != _EMPTY:
                self._put(shard, int.from_bytes(held, "little"))

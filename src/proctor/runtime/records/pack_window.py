"""Read receipts by id out of a receipt folder's packs holding only a little at a time: the
loader behind ``proctor verify`` (:class:`~.folder_reader.FolderReader`), whose memory must not
grow with the tree it walks.

The seam with :class:`~.receipt_packs.PackShelf` (which learns every receipt it has seen, for a
store that writes and reads many runs): a verifier walks one tree, and a tree of a million
receipts spans hundreds of packs and an index of some 190 MB. A walk reads a seal's receipts
nearly in the order they were written (a parent's children were written, in order, before it),
so :class:`PackWindow` keeps what the index says of a few spans of it only: it finds the line
of a receipt it lacks (searched in windows around where the last one was found, then whole, a
chunk at a time: the index is never held), learns the places the index gives in the
:data:`_SPAN` bytes from there, and reads receipts out of blocks of a pack (one positioned
read serves the receipts lying near each other, as a walk reads them).

What the index says is never trusted: :meth:`PackWindow.get` answers the bytes at the place the
index names, unchecked, and the verifier checks them against the id (the digest of their body)
as it checks any receipt. When they do not hold up (an index that lies, or a pack changed
since), :meth:`PackWindow.again` finds the receipt by the digests of the bodies alone: in the
pack the index names, every body of it hashed (a few such packs are kept), else in every pack.
A folder whose index does not name a receipt (a copy without its index, a crash between a pack
and its index lines) falls back to :class:`~.receipt_packs.PackShelf`, which looks in every
pack.
"""

from __future__ import annotations

import os
import re
from array import array
from collections import OrderedDict
from collections.abc import Callable
from operator import itemgetter

from proctor.errors import StoreError
from proctor.runtime.records.pack_places import Places, note_places
from proctor.runtime.records.receipt_packs import (
    PACK_HEADERS,
    PACKS_DIR,
    PackShelf,
    entry_of,
)

__all__ = ["PackWindow"]

_KEEP = 2
"""Packs whose receipts' places are kept by digest (:class:`~.pack_places.Places`: about
640 KiB each for 12,288 receipts) when a receipt must be found without the index."""
_SPANS = 3
"""Spans of the index whose places are kept: a segment's and its children's (a call, then its
child run and that run's step, written together), and one more."""
_SPAN = 1 << 18  # the index is learned this much at a time from a receipt's line ...
_SPAN_BACK = 1 << 12  # ... starting this much before it (a call's child run lies just before)
_PACKS_OPEN = 8  # pack files held open for reading through the index
_MAX_SIZE = 1 << 26  # the longest receipt line read where the index says (64 MiB)
_NONE = Places()
_CHUNK = 1 << 18  # a pack is read this much at a time to learn its receipts
_PIECE = 1 << 20  # the index is read this much at a time
_NEAR = 8  # pieces searched each side of the last find before the whole index
_LINE = 1024  # read around a find to take its whole index line (a line is about 170 bytes)
_BLOCK = 1 << 17  # receipts are read out of a pack this much at a time (see _read)
_BACK = 1 << 14  # a block starts this much before the receipt it is read for (see _read)
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
# An index line as the store writes it, matched in the index's text (its bytes decoded one
# character a byte, so any byte decodes): the receipt's id, the pack's name, the offset and
# the size, as text (the numbers are parsed when a receipt is read). The pattern only finds
# places: a line of another shape is not learned (the receipt is then looked for without it),
# and what it finds is checked where it matters: the id as ``sha256:`` and 64 lowercase hex
# digits (see _span), the pack's name as 32 before it is opened, the size as at most _MAX_SIZE
_INDEX_LINE = re.compile(
    r'\{"receipt_id":"(sha256:[^"]{64})","kind":"[^"]*","outcome":"[^"]*",'
    r'"pack":"([^"]{32})","at":([0-9]{1,15}),"size":([0-9]{1,10})\}\n'
)
#: A place an index line gives: the receipt's id, the pack's name, the offset, the size.
_Place = tuple[str, str, str, str]
_ID = itemgetter(0)
_PACK_NAME = re.compile(r"[0-9a-f]{32}")
_HEX_DIGITS = b"0123456789abcdef"
# what an id of the index leaves once every hex digit is deleted: its prefix's "sh:" (a
# character of its 64 that is not a lowercase hex digit remains, and makes it longer)
_ID_LEFT = b"sh:"


class PackWindow:
    """Finds receipts by id in one folder's packs, holding a bounded window (see the module).

    Raises (from :meth:`get` and :meth:`again`):
        StoreError: ``receipt_store_io``: a pack or the index exists and cannot be read.
    """

    __slots__ = (
        "_block",
        "_fallback",
        "_folder",
        "_hint",
        "_index",
        "_last",
        "_miss",
        "_next",
        "_open",
        "_recent",
        "_spans",
        "_trustless",
    )

    def __init__(
        self, folder: str | os.PathLike[str], miss: Callable[[str], bytes | None] | None = None
    ) -> None:
        self._folder = os.fspath(folder)
        # what held answers for a receipt no span held names (see held)
        self._miss: Callable[[str], bytes | None] = _nothing if miss is None else miss
        # what the index says of its last few spans: the id's hex to the place's text, the
        # span of the last receipt found first (most reads find the next receipt there)
        self._spans: list[dict[str, _Place]] = []
        self._last: dict[str, _Place] = {}
        self._open: dict[str, int] = {}  # pack files read through the index (-1: none)
        # packs whose receipts were found by the digests of their bodies (see again)
        self._recent: OrderedDict[str, tuple[int, Places]] = OrderedDict()
        self._index: int | None = None
        self._hint = -1  # where the index named the last receipt found (-1: its end)
        self._next = -1  # where the span learned last ends (-1: none learned)
        self._fallback: PackShelf | None = None
        self._trustless: PackShelf | None = None
        # the bytes last read from a pack: its descriptor, where they start, the bytes
        self._block: tuple[int, int, bytes] = (-1, 0, b"")

    def held(self, receipt_id: str) -> bytes | None:
        """The bytes where a span of the index held names receipt ``receipt_id`` (its whole
        id, ``sha256:`` and 64 lowercase hex digits), unchecked, else what the window's
        ``miss`` answers for it (by default None: then :meth:`get` looks further). Any string
        may be asked: only an id the index lists is found. The walk's loader: one call a
        receipt for most reads (a folder's reader passes its own way on as ``miss``)."""
        place = self._last.get(receipt_id)
        if place is None:
            place = self._place(receipt_id)
            if place is None:
                return self._miss(receipt_id)
        # as _at does (written out here: this runs once per receipt of a walk)
        _, name, at_text, size_text = place
        fd = self._open.get(name)
        if fd is None:
            fd = self._open_pack(name)
        at, size = int(at_text), int(size_text)
        held_fd, start, block = self._block
        if held_fd == fd and start <= at and size > 0 and at + size <= start + len(block):
            return block[at - start : at - start + size]  # most reads: see _read
        found = self._read(fd, at, size, "")
        # a place the window cannot read (a size past any receipt, a pack not there) holds
        # nothing: the receipt is looked for as one no span names
        return self._miss(receipt_id) if found is None else found

    def _place(self, receipt_id: str) -> _Place | None:
        """The place a span held gives for ``receipt_id``, its span then the one read last."""
        for span in self._spans:
            place = span.get(receipt_id)
            if place is not None:
                self._last = span
                self._spans.remove(span)  # the least recently read is let go first
                self._spans.append(span)
                return place
        return None

    def _at(self, place: _Place) -> bytes | None:
        """The bytes at ``place`` (unchecked), as :meth:`held` reads them."""
        _, name, at_text, size_text = place
        fd = self._open.get(name)
        if fd is None:
            fd = self._open_pack(name)
        return self._read(fd, int(at_text), int(size_text), "")

    def _known(self, receipt_id: str) -> bytes | None:
        """The bytes where a span held names ``receipt_id``, else None (never ``miss``)."""
        place = self._last.get(receipt_id) or self._place(receipt_id)
        return None if place is None else self._at(place)

    def get(self, hex_id: str) -> bytes | None:
        """The bytes of receipt ``hex_id`` (64 lowercase hex digits): where the index names it,
        unchecked (the caller checks them against the id, and asks :meth:`again` when they do
        not hold up); where :class:`~.receipt_packs.PackShelf` finds it when the index does not
        name it; None when neither does."""
        receipt_id = "sha256:" + hex_id
        found = self._known(receipt_id)
        if found is not None:
            return found
        span = self._learn(hex_id)
        if span is not None:
            if len(self._spans) >= _SPANS:
                self._spans.pop(0)
            self._spans.append(span)
            self._last = span
            found = self._known(receipt_id)
            if found is not None:
                return found
        if self._fallback is None:
            self._fallback = PackShelf(self._folder)
        return self._fallback.get(hex_id)

    def again(self, hex_id: str) -> bytes | None:
        """The bytes of receipt ``hex_id`` (64 lowercase hex digits) found by the digests of
        the bodies alone, nothing the index says trusted: in a pack searched so before, else in
        the pack the index names for it, else in every pack; None when no body has that
        digest. The second look of a walk whose :meth:`get` gave bytes that did not hold up."""
        for name in reversed(self._recent):
            fd, places = self._recent[name]
            place = places.get(hex_id)
            if place is not None:
                return self._read(fd, place >> 32, place & 0xFFFFFFFF, name)
        named = self._named(hex_id)
        if named is not None and named not in self._recent:
            fd, places = self._load(named)
            place = places.get(hex_id)
            if place is not None:
                return self._read(fd, place >> 32, place & 0xFFFFFFFF, named)
        if self._trustless is None:
            self._trustless = PackShelf(self._folder, index=False)
        return self._trustless.get(hex_id)

    def close(self) -> None:
        """Close every file this window holds open."""
        for fd in self._open.values():
            if fd >= 0:
                os.close(fd)
        self._open.clear()
        for fd, _ in self._recent.values():
            os.close(fd)
        self._recent.clear()
        self._spans.clear()
        self._last = {}
        self._block = (-1, 0, b"")
        if self._index is not None:
            os.close(self._index)
            self._index = None
        for shelf in (self._fallback, self._trustless):
            if shelf is not None:
                shelf.close()

    def _open_pack(self, name: str) -> int:
        if len(self._open) >= _PACKS_OPEN:
            old = self._open.pop(next(iter(self._open)))
            if old >= 0:
                if old == self._block[0]:
                    self._block = (-1, 0, b"")
                os.close(old)
        fd = -1
        if _PACK_NAME.fullmatch(name):  # a name from the index never leaves the packs folder
            path = os.path.join(self._folder, PACKS_DIR, f"{name}.pack")
            try:
                fd = os.open(path, _FLAGS)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise _unreadable(f"{name}.pack", exc) from exc
        self._open[name] = fd
        return fd

    def _read(self, fd: int, at: int, size: int, name: str) -> bytes | None:
        """The ``size`` bytes at ``at`` of pack ``name``, open as ``fd`` (None for a size out
        of bounds, or a pack that is not there: ``fd`` -1): sliced out of the block last read
        from that pack when they lie there, else read with the :data:`_BLOCK` bytes around
        them. A walk reads a pack's receipts nearly in the order they lie (see the module), so
        one read serves many receipts; bytes past the pack's end are not there, as with a read
        of the receipt alone. A block starts :data:`_BACK` bytes before the receipt it is read
        for: a walk steps back a few lines as often as forward (a call, then its child run and
        that run's step, written before it), and a block starting on a multiple of its size
        read each block about three times over."""
        if not 0 < size <= _MAX_SIZE:
            return None
        held_fd, start, block = self._block
        if held_fd == fd and start <= at and at + size <= start + len(block):
            return block[at - start : at - start + size]
        if fd < 0:
            return None
        start = max(0, at - _BACK)
        try:
            block = os.pread(fd, max(_BLOCK, at + size - start), start)
        except OSError as exc:
            raise _unreadable(f"{name or 'a'}.pack", exc) from exc
        self._block = (fd, start, block)
        return block[at - start : at - start + size]

    def _learn(self, hex_id: str) -> dict[str, _Place] | None:
        """A span of the index that names ``hex_id``: the one right after the span learned
        last when it does (a walk reads on nearly in the index's order), else the one from its
        line on, wherever the index has it; None when the index has no line for it (or none
        of its shape)."""
        fd = self._index_fd()
        if fd is None:
            return None
        needle = _needle(hex_id.encode("ascii"))
        receipt_id = "sha256:" + hex_id
        if self._next >= 0:
            start, data = self._piece(fd, self._next)
            if needle in data:
                span = self._span(data, start)
                if receipt_id in span:
                    return span
        at = self._find(fd, needle)
        if at is None:
            return None
        start, data = self._piece(fd, at)
        span = self._span(data, start)
        return span if receipt_id in span else None

    @staticmethod
    def _piece(fd: int, at: int) -> tuple[int, bytes]:
        """The index from byte ``at`` on (:data:`_SPAN` bytes, and :data:`_SPAN_BACK` before),
        and where that starts."""
        start = max(0, at - _SPAN_BACK)
        try:
            return start, os.pread(fd, at - start + _SPAN, start)
        except OSError as exc:
            raise _unreadable("index.jsonl", exc) from exc

    def _span(self, data: bytes, start: int) -> dict[str, _Place]:
        """What a piece of the index read from byte ``start`` says: each whole, well-formed
        line's id (``sha256:`` and 64 lowercase hex digits) to its place, the first line of
        an id kept. Keyed by the whole id, so that the walk's own id string (its hash known
        already) finds its place."""
        first = 0 if start == 0 else data.find(b"\n") + 1
        last = data.rfind(b"\n") + 1
        self._next = start + last if last > first else -1
        found = _INDEX_LINE.findall(data.decode("latin-1"), first, last)
        found.reverse()  # the first line of an id is the one kept
        span = dict(zip(map(_ID, found), found, strict=True))
        if "".join(span).encode("latin-1").translate(None, _HEX_DIGITS) != _ID_LEFT * len(span):
            # an id that is not lowercase hex names no receipt: never found by one
            span = {
                k: v
                for k, v in span.items()
                if k.encode("latin-1").translate(None, _HEX_DIGITS) == _ID_LEFT
            }
        return span

    def _named(self, hex_id: str) -> str | None:
        """The pack the index names for ``hex_id``, if it names one of 32 hex digits."""
        receipt_id = "sha256:" + hex_id
        for span in self._spans:
            place = span.get(receipt_id)
            if place is not None and _PACK_NAME.fullmatch(place[1]):
                return place[1]
        fd = self._index_fd()
        at = None if fd is None else self._find(fd, _needle(hex_id.encode()))
        if fd is None or at is None:
            return None
        start = max(0, at - _LINE)
        try:
            data = os.pread(fd, 2 * _LINE, start)
        except OSError as exc:
            raise _unreadable("index.jsonl", exc) from exc
        first = data.rfind(b"\n", 0, at - start) + 1
        last = data.find(b"\n", at - start)
        found = entry_of(data[first:last]) if last >= 0 else None
        return None if found is None else found[1]

    def _load(self, name: str) -> tuple[int, Places]:
        """Open pack ``name`` and learn where each of its receipts lies (by body digest)."""
        path = os.path.join(self._folder, PACKS_DIR, f"{name}.pack")
        try:
            fd = os.open(path, _FLAGS)
        except FileNotFoundError:
            return -1, _NONE
        except OSError as exc:
            raise _unreadable(f"{name}.pack", exc) from exc
        if len(self._recent) >= _KEEP:
            # let go of the oldest pack before learning this one, so that the places of no
            # more than _KEEP packs are held at once
            _, (old, _) = self._recent.popitem(last=False)
            if old == self._block[0]:
                self._block = (-1, 0, b"")
            os.close(old)
        digests, offsets = bytearray(), array("Q")
        try:
            size = os.fstat(fd).st_size
            head = os.pread(fd, max(map(len, PACK_HEADERS)), 0)
            at, chunk = 0, _CHUNK
            while any(head.startswith(h) for h in PACK_HEADERS) and at < size:
                data = os.pread(fd, chunk, at)
                end = data.rfind(b"\n") + 1
                if end == 0:
                    if len(data) < chunk:
                        break  # a last line without its line feed
                    chunk *= 2  # one line longer than a chunk (a wide segment or step)
                    continue
                chunk = _CHUNK
                note_places(data, end, at, digests, offsets)
                at += end
                del data  # before the next chunk is read: one chunk held at a time
        except OSError as exc:
            os.close(fd)
            raise _unreadable(f"{name}.pack", exc) from exc
        places = Places(digests, offsets)
        self._recent[name] = (fd, places)
        return fd, places

    def _index_fd(self) -> int | None:
        """The index, open (None when the folder has none)."""
        if self._index is None:
            try:
                self._index = os.open(os.path.join(self._folder, "index.jsonl"), _FLAGS)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise _unreadable("index.jsonl", exc) from exc
        return self._index

    def _find(self, fd: int, needle: bytes) -> int | None:
        """Where ``needle`` (a receipt's ``"receipt_id"`` and its value) is in the index:
        looked for near the last find, then in the whole index, a piece at a time."""
        try:
            size = os.fstat(fd).st_size
            hint = size if self._hint < 0 else self._hint
            for start in _pieces(hint, size):
                data = os.pread(fd, _PIECE + len(needle), start)
                found = data.find(needle)
                del data  # before the next piece is read: one piece held at a time
                if found >= 0:
                    self._hint = start + found
                    return start + found
        except OSError as exc:
            raise _unreadable("index.jsonl", exc) from exc
        return None


def _nothing(receipt_id: str) -> None:
    """A window's ``miss`` by default: nothing found."""
    return None


def _pieces(hint: int, size: int) -> list[int]:
    """Where to read the index from, a piece at a time: the pieces around ``hint`` nearest
    first (a walk's next pack is usually its seal's next or previous batch), then the rest."""
    here = hint // _PIECE
    last = max(0, size - 1) // _PIECE
    near = [here]
    for step in range(1, _NEAR + 1):
        near += [n for n in (here + step, here - step) if 0 <= n <= last]
    rest = [n for n in range(last + 1) if abs(n - here) > _NEAR]
    return [n * _PIECE for n in near + rest]


def _unreadable(name: str, exc: OSError) -> StoreError:
    return StoreError(f"{name} could not be read: {exc.strerror or exc}", code="receipt_store_io")


def _needle(key: bytes) -> bytes:
    """What the index line of the receipt whose id's hex is ``key`` holds, as found by a search."""
    return b'"receipt_id":"sha256:' + key + b'"'

"""Read receipts by id out of a receipt folder's packs holding only a few packs at a time: the
loader behind ``proctor verify`` (:class:`~.folder_reader.FolderReader`), whose memory must not
grow with the tree it walks.

The seam with :class:`~.receipt_packs.PackShelf` (which learns every receipt it has seen, for a
store that writes and reads many runs): a verifier walks one tree, and a tree of a million
receipts spans hundreds of packs. A walk reads a seal's packs nearly in the order they were
written (a parent's children were written, in order, before it), so :class:`PackWindow` keeps
the places of the receipts of its last few packs only, finds a pack it lacks through the index
(searched in windows around where the last pack was found, then whole, a chunk at a time: the
index is never held), and reads receipts out of blocks of a pack (one positioned read serves
the receipts lying near each other, as a walk reads them). A folder whose index does not name a
receipt (a copy without its index, a crash between a pack and its index lines) falls back to
:class:`~.receipt_packs.PackShelf`, which looks in every pack.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections import OrderedDict

from proctor.errors import StoreError
from proctor.runtime.records.pack_places import Places
from proctor.runtime.records.receipt_packs import (
    PACK_HEADERS,
    PACKS_DIR,
    PackShelf,
    entry_of,
)

__all__ = ["PackWindow"]

_KEEP = 2
"""Packs whose receipts' places are kept (:class:`~.pack_places.Places`: about 640 KiB each
for 12,288 receipts): a segment's pack and its children's."""
_NONE = Places()
_CHUNK = 1 << 18  # a pack is read this much at a time to learn its receipts
_PIECE = 1 << 20  # the index is read this much at a time
_NEAR = 8  # pieces searched each side of the last find before the whole index
_LINE = 1024  # read around a find to take its whole index line (a line is about 170 bytes)
_BLOCK = 1 << 17  # receipts are read out of a pack this much at a time (see _read)
_BACK = 1 << 14  # a block starts this much before the receipt it is read for (see _read)
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
# where an envelope line's body starts and ends (what receipt_packs.body_of cuts at)
_BODY_START = b'{"body":'
_BODY_END = b',"key_id":"'


class PackWindow:
    """Finds receipts by id in one folder's packs, holding a bounded window (see the module).

    Raises (from :meth:`get`):
        StoreError: ``receipt_store_io``: a pack or the index exists and cannot be read.
    """

    __slots__ = ("_block", "_fallback", "_folder", "_hint", "_index", "_last", "_recent")

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self._folder = os.fspath(folder)
        self._recent: OrderedDict[str, tuple[int, Places]] = OrderedDict()
        self._index: int | None = None
        self._hint = -1  # where the index named the last pack found (-1: its end)
        self._fallback: PackShelf | None = None
        # the pack of the last receipt found, and where its receipts lie: most reads find
        # the next receipt there (see held)
        self._last: tuple[int, Places, str] = (-1, _NONE, "")
        # the bytes last read from a pack: its descriptor, where they start, the bytes
        self._block: tuple[int, int, bytes] = (-1, 0, b"")

    def held(self, hex_id: str) -> bytes | None:
        """The bytes of receipt ``hex_id`` when the pack of the last receipt found holds it,
        else None (then :meth:`get` looks further). Any string may be asked: only the body
        digests of that pack's receipts are found."""
        fd, places, name = self._last
        place = places.get(hex_id)
        if place is None:
            return None
        return self._read(fd, place, name)

    def get(self, hex_id: str) -> bytes | None:
        """The bytes of receipt ``hex_id`` (64 lowercase hex digits) held in a pack, or None."""
        for name in reversed(self._recent):
            fd, places = self._recent[name]
            place = places.get(hex_id)
            if place is not None:
                self._last = (fd, places, name)
                return self._read(fd, place, name)
        found = self._from_index(hex_id)
        if found is not None and found not in self._recent:
            fd, places = self._load(found)
            place = places.get(hex_id)
            if place is not None:
                self._last = (fd, places, found)
                return self._read(fd, place, found)
        if self._fallback is None:
            self._fallback = PackShelf(self._folder)
        return self._fallback.get(hex_id)

    def close(self) -> None:
        """Close every file this window holds open."""
        for fd, _ in self._recent.values():
            os.close(fd)
        self._recent.clear()
        self._last = (-1, _NONE, "")
        self._block = (-1, 0, b"")
        if self._index is not None:
            os.close(self._index)
            self._index = None
        if self._fallback is not None:
            self._fallback.close()

    def _read(self, fd: int, place: int, name: str) -> bytes | None:
        """The receipt at ``place`` (offset << 32 | size) of pack ``name``, open as ``fd``:
        sliced out of the block last read from that pack when it lies there, else read with
        the :data:`_BLOCK` bytes around it. A walk reads a pack's receipts nearly in the order
        they lie (see the module), so one read serves many receipts; bytes past the pack's end
        are not there, as with a read of the receipt alone. A block starts :data:`_BACK` bytes
        before the receipt it is read for: a walk steps back a few lines as often as forward (a
        call, then its child run and that run's step, written before it), and a block starting
        on a multiple of its size read each block about three times over."""
        at, size = place >> 32, place & 0xFFFFFFFF
        held_fd, start, block = self._block
        if held_fd == fd and start <= at and at + size <= start + len(block):
            return block[at - start : at - start + size]
        if fd < 0:
            return None
        start = max(0, at - _BACK)
        try:
            block = os.pread(fd, max(_BLOCK, at + size - start), start)
        except OSError as exc:
            raise _unreadable(f"{name}.pack", exc) from exc
        self._block = (fd, start, block)
        return block[at - start : at - start + size]

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
            if old == self._last[0]:
                self._last = (-1, _NONE, "")
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
                _learn(data, end, at, digests, offsets)
                at += end
                del data  # before the next chunk is read: one chunk held at a time
        except OSError as exc:
            os.close(fd)
            raise _unreadable(f"{name}.pack", exc) from exc
        places = Places(digests, offsets)
        self._recent[name] = (fd, places)
        return fd, places

    def _from_index(self, hex_id: str) -> str | None:
        """The pack the index names for ``hex_id``: looked for near the last find, then in
        the whole index, a chunk at a time."""
        fd = self._index
        if fd is None:
            try:
                fd = self._index = os.open(os.path.join(self._folder, "index.jsonl"), _FLAGS)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise _unreadable("index.jsonl", exc) from exc
        needle = b'"receipt_id":"sha256:' + hex_id.encode("ascii") + b'"'
        try:
            size = os.fstat(fd).st_size
            hint = size if self._hint < 0 else self._hint
            for start in _pieces(hint, size):
                data = os.pread(fd, _PIECE + len(needle), start)
                found = data.find(needle)
                del data  # before the next piece is read: one piece held at a time
                if found >= 0:
                    return self._entry_at(fd, start + found)
        except OSError as exc:
            raise _unreadable("index.jsonl", exc) from exc
        return None

    def _entry_at(self, fd: int, at: int) -> str | None:
        start = max(0, at - _LINE)
        data = os.pread(fd, 2 * _LINE, start)
        first = data.rfind(b"\n", 0, at - start) + 1
        last = data.find(b"\n", at - start)
        found = entry_of(data[first:last]) if last >= 0 else None
        if found is None:
            return None
        self._hint = at
        return found[1]


def _learn(data: bytes, stop: int, base: int, digests: bytearray, places: array[int]) -> None:
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

"""Receipt packs: the file formats a receipt store writes receipts into, and reading receipts
back out of packs by id (``docs/receipts.md`` is the public description).

Kept apart from :mod:`.receipts` (the store: marking, batching, the index, keys) because the
format is read without the store too: ``proctor verify`` of any folder (:class:`PackShelf`
behind :class:`~.folder_reader.FolderReader`) and a third party's verifier.

A pack is ``packs/<32 hex>.pack`` in the receipt folder. Two formats, told by the header line:

``proctor.receipt_pack.v2`` (written now): a file appended to, batch after batch::

    {"schema":"proctor.receipt_pack.v2"}\\n      the header line
    <receipt envelope>\\n                        the receipts of one batch, one line each,
    ...                                          byte for byte the file ``<hex>.json`` held
    {"batch":{"receipts":N,"sha256":"<hex>","size":S}}\\n
    <receipt envelope>\\n                        the next batch ...

  Each batch ends with its trailer: how many receipt lines it has, their total size in bytes
  and the SHA-256 of those bytes, so a reader tells a whole batch from the torn tail a crash
  mid-append leaves (a writer then starts its batch on a fresh line). A writer appends under
  an exclusive lock and syncs the file once a batch; the file exists (made whole, its folder
  synced) before its first batch, so an append costs no folder sync. A pack takes batches
  until it passes :data:`PACK_LIMIT` bytes; its name is the first 32 hex digits of the
  SHA-256 of ``proctor.receipt_pack.v2/<UTC day>/<n>`` (any 32 hex digits are a valid name).

``proctor.receipt_pack.v1`` (written by earlier versions, still read): one batch, written once,
named by the first 32 hex digits of the SHA-256 of its bytes, no trailer.

A receipt envelope is canonical JSON, which holds no raw line feed, so a pack is JSON Lines. The
receipt store's ``index.jsonl`` says where each receipt lies (``pack``, byte offset ``at``,
``size``); without the index a receipt is found by its id, the SHA-256 of its ``body`` bytes,
which is how a reader with nothing but the packs finds it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import mmap
import os
import re
from collections.abc import Iterator, Mapping

from proctor.errors import StoreError

__all__ = [
    "PACKS_DIR",
    "PACK_HEADER",
    "PACK_HEADERS",
    "PACK_HEADER_V2",
    "PACK_LIMIT",
    "PACK_SCHEMA",
    "PACK_SCHEMA_V2",
    "PackShelf",
    "batch_bytes",
    "batch_trailer",
    "body_of",
    "entry_of",
    "header_size",
    "pack_bytes",
    "pack_name",
    "pack_names",
    "records_of",
]

PACKS_DIR = "packs"
PACK_SCHEMA = "proctor.receipt_pack.v1"
PACK_HEADER = (json.dumps({"schema": PACK_SCHEMA}, separators=(",", ":")) + "\n").encode()
PACK_SCHEMA_V2 = "proctor.receipt_pack.v2"
PACK_HEADER_V2 = (json.dumps({"schema": PACK_SCHEMA_V2}, separators=(",", ":")) + "\n").encode()
PACK_HEADERS = (PACK_HEADER_V2, PACK_HEADER)
PACK_LIMIT = 8 << 20
"""A v2 pack takes no new batch once it holds this many bytes (the next pack is made): a
reader that learns a whole pack's receipts (``proctor verify``) holds at most this much."""
PACK_NAME = re.compile(r"[0-9a-f]{32}")
RECEIPT_HEX = re.compile(r"[0-9a-f]{64}")
_KNOWN_MAX = 1 << 14
"""Receipt places a writer's shelf keeps (a few MiB at most)."""
_MAPPED_PACKS = 64
"""Packs a shelf keeps mapped at once (their places stay known)."""
_BODY_START = b'{"body":'
_BODY_END = b',"key_id":"'


def pack_bytes(records: list[bytes]) -> tuple[str, bytes, list[int]]:
    """The name, bytes and record offsets of a v1 pack holding ``records`` (each one line):
    the format earlier versions wrote, kept to make such packs for tests of reading them."""
    data = PACK_HEADER + b"".join(records)
    offsets = []
    at = len(PACK_HEADER)
    for record in records:
        offsets.append(at)
        at += len(record)
    return hashlib.sha256(data).hexdigest()[:32], data, offsets


def pack_name(day: str, n: int) -> str:
    """The name of the ``n``-th v2 pack of UTC day ``day`` (``YYYY-MM-DD``): every writer of a
    store appends to the same file without a pointer to keep in step."""
    return hashlib.sha256(f"{PACK_SCHEMA_V2}/{day}/{n}".encode()).hexdigest()[:32]


def batch_trailer(records: bytes, count: int) -> bytes:
    """The trailer line that ends a v2 batch of ``count`` receipt lines ``records``."""
    digest = hashlib.sha256(records).hexdigest()
    return (
        f'{{"batch":{{"receipts":{count},"sha256":"{digest}","size":{len(records)}}}}}\n'.encode()
    )


def batch_bytes(records: list[bytes]) -> tuple[bytes, list[int]]:
    """The bytes of a v2 batch holding ``records`` (each one line, its trailer last) and each
    record's offset from the batch's start."""
    joined = b"".join(records)
    offsets = []
    at = 0
    for record in records:
        offsets.append(at)
        at += len(record)
    return joined + batch_trailer(joined, len(records)), offsets


def header_size(data: mmap.mmap | bytes) -> int:
    """The length of the pack header ``data`` starts with (either format), 0 for none."""
    for header in PACK_HEADERS:
        if data[: len(header)] == header:
            return len(header)
    return 0


def body_of(raw: bytes) -> bytes | None:
    """The ``body`` bytes of one envelope line (what its receipt id is the digest of), or
    ``None`` for a line that is not shaped as an envelope."""
    if not raw.startswith(_BODY_START):
        return None
    end = raw.rfind(_BODY_END)
    return raw[len(_BODY_START) : end] if end > len(_BODY_START) else None


class PackShelf:
    """Finds receipts by id in the packs of one receipt folder (a loader for the verifier).

    A lookup goes to the index first (``index.jsonl``: one search of its bytes for the id, then
    the lines of the same pack around it, which a batch appends together) and maps that pack
    once; every receipt of the pack is then found without another search. An id the index does
    not name (a folder copied without its index, or a pack whose index lines a crash cut off) is
    looked for by reading every pack not yet read, once, and taking each line's id from its
    body. Reads are of whole mapped files; the first copy of an id found is the one returned.
    With ``index=False`` the index is never read: every receipt is found by the digest of its
    body (what :meth:`~.pack_window.PackWindow.again` asks when what the index said did not
    hold up).

    Raises (from :meth:`get`):
        StoreError: ``receipt_store_io``: a pack or the index exists and cannot be read.
    """

    def __init__(self, folder: str | os.PathLike[str], *, index: bool = True) -> None:
        self._folder = os.fspath(folder)
        self._use_index = index
        self._packs = os.path.join(self._folder, PACKS_DIR)
        self._known: dict[str, tuple[str, int, int]] = {}
        self._maps: dict[str, mmap.mmap | bytes] = {}
        self._scanned: set[str] = set()
        self._all_scanned = False
        self._index: mmap.mmap | bytes | None = None

    def get(self, hex_id: str) -> bytes | None:
        """The bytes of receipt ``hex_id`` (64 lowercase hex digits) held in a pack, or None."""
        hit = self._known.get(hex_id)
        if hit is None and self._use_index:
            pack = self._from_index(hex_id)
            if pack is not None and pack not in self._maps:
                self._map(pack)
            hit = self._known.get(hex_id)
        if hit is None and not self._all_scanned:
            self._scan_all()
            hit = self._known.get(hex_id)
        if hit is None:
            return None
        pack, at, size = hit
        data = self._map(pack)
        if at + size > len(data):  # a v2 pack appended to since it was mapped
            self._maps.pop(pack, None)
            data = self._map(pack)
        return bytes(data[at : at + size])

    def located(self, hex_id: str) -> tuple[str, int, int] | None:
        """Where ``hex_id`` lies (``pack``, ``at``, ``size``) if it was already found."""
        return self._known.get(hex_id)

    def learn(self, hex_id: str, pack: str, at: int, size: int) -> None:
        """Note where a receipt written by this process lies (no lookup needed later). The
        shelf keeps the places of the newest :data:`_KNOWN_MAX` receipts it learnt this way,
        so a long-lived writer (a day-long agent, a server) holds a bounded number; an older
        one is found again through the index when read."""
        known = self._known
        if hex_id not in known:
            if len(known) >= _KNOWN_MAX:
                self._forget_oldest()
            known[hex_id] = (pack, at, size)

    def _forget_oldest(self) -> None:
        known = self._known
        for old in list(itertools.islice(known, _KNOWN_MAX // 2)):
            del known[old]
        # places found by reading packs may be among those dropped: read them again
        self._scanned.clear()
        self._all_scanned = False

    def learn_many(self, pack: str, hex_ids: list[str], ats: list[int], sizes: list[int]) -> None:
        """:meth:`learn` each of a batch's receipts (``hex_ids[i]`` at ``ats[i]``, ``sizes[i]``
        bytes): when none of them is known, as many at once as fit before the oldest half
        is forgotten (where :meth:`learn` would forget it)."""
        known = self._known
        count = len(hex_ids)
        if len(ats) != count or len(sizes) != count:
            raise ValueError("a place for each receipt")
        if not known.keys().isdisjoint(hex_ids):
            for hex_id, at, size in zip(hex_ids, ats, sizes, strict=True):
                self.learn(hex_id, pack, at, size)
            return
        places = zip(
            hex_ids, zip(itertools.repeat(pack, count), ats, sizes, strict=True), strict=True
        )
        while count:
            if len(known) >= _KNOWN_MAX:  # (a read may have learnt past the bound)
                self._forget_oldest()
            room = min(max(1, _KNOWN_MAX - len(known)), count)  # one, as learn adds it anyway
            known.update(itertools.islice(places, room))
            count -= room

    def knows_none(self, hex_ids: list[str]) -> bool:
        """Whether none of ``hex_ids`` is a receipt this shelf has found (see :meth:`located`)."""
        return self._known.keys().isdisjoint(hex_ids)

    def learn_entry(self, entry: Mapping[str, object]) -> None:
        """Note where an index entry (a parsed ``index.jsonl`` line) says its receipt lies."""
        found = _checked(entry)
        if found is not None:
            self.learn(*found)

    def close(self) -> None:
        """Unmap every file this shelf mapped."""
        for data in [*self._maps.values(), self._index]:
            if isinstance(data, mmap.mmap):
                data.close()
        self._maps.clear()
        self._index = None

    # -- the index -----------------------------------------------------------------------

    def _index_bytes(self) -> mmap.mmap | bytes:
        if self._index is None:
            self._index = _mapped(os.path.join(self._folder, "index.jsonl")) or b""
        return self._index

    def _from_index(self, hex_id: str) -> str | None:
        """The pack the index names for ``hex_id`` (its batch's lines learnt on the way)."""
        index = self._index_bytes()
        hit = index.find(b'"receipt_id":"sha256:' + hex_id.encode("ascii") + b'"')
        if hit < 0:
            self._index = None  # read again next time: another writer may have appended
            return None
        start = index.rfind(b"\n", 0, hit) + 1
        line = _line_at(index, start)
        entry = entry_of(line)
        if entry is None:
            return None
        pack = entry[1]
        self._known.setdefault(entry[0], entry[1:])
        # the batch's other lines: before and after this one, while they name the next
        # receipts of the same pack (a v2 pack holds many batches: the walk stops at the
        # batch's ends, where the pack's bytes are not contiguous)
        at, edge = start, entry[2]
        while at > 0:
            before = index.rfind(b"\n", 0, at - 1) + 1
            found = entry_of(_line_at(index, before))
            if found is None or found[1] != pack or found[2] + found[3] != edge:
                break
            self._known.setdefault(found[0], found[1:])
            at, edge = before, found[2]
        at, edge = start + len(line) + 1, entry[2] + entry[3]
        while True:
            line = _line_at(index, at)
            if not line:
                break
            found = entry_of(line)
            if found is None or found[1] != pack or found[2] != edge:
                break
            self._known.setdefault(found[0], found[1:])
            at, edge = at + len(line) + 1, found[2] + found[3]
        return pack

    # -- the packs -----------------------------------------------------------------------

    def _map(self, pack: str) -> mmap.mmap | bytes:
        data = self._maps.get(pack)
        if data is None:
            data = _mapped(os.path.join(self._packs, f"{pack}.pack")) or b""
            if len(self._maps) >= _MAPPED_PACKS:
                # a long-lived store (the console, an MCP server) reads many runs' packs: keep
                # the newest mapped; an older one is unmapped once no reader holds it (never
                # closed here, so a reader in another thread is never cut short)
                del self._maps[next(iter(self._maps))]
            self._maps[pack] = data
        return data

    def _scan_all(self) -> None:
        self._all_scanned = True
        for name in pack_names(self._folder):
            if name not in self._scanned:
                self._scan(name)

    def _scan(self, pack: str) -> None:
        """Learn every receipt of ``pack`` by the digest of its body."""
        self._scanned.add(pack)
        for hex_id, at, size in records_of(self._map(pack)):
            self._known.setdefault(hex_id, (pack, at, size))


def records_of(data: mmap.mmap | bytes, *, at: int | None = None) -> Iterator[tuple[str, int, int]]:
    """``(hex id, at, size)`` of each receipt line of a pack's bytes, the id being the digest
    of its body; nothing for bytes that do not start with the pack header, nor for a line
    that is not an envelope (a v2 batch trailer) or a last line without its line feed. A
    receipt line of a torn v2 batch is yielded too: it is a whole line, and a receipt is
    checked against its id wherever it is read from. With ``at``, ``data`` is a
    piece of a pack that starts at byte ``at`` on a line's start (no header to check there)."""
    if at is None or at == 0:
        start, base = header_size(data), 0
        if not start:
            return
    else:
        start, base = 0, at
    pos = start
    find, sha256, size = data.find, hashlib.sha256, len(data)
    while pos < size:
        end = find(b"\n", pos)
        if end < 0:
            return
        body = body_of(data[pos:end])
        if body is not None:
            yield sha256(body).hexdigest(), base + pos, end + 1 - pos
        pos = end + 1


def pack_names(folder: str | os.PathLike[str]) -> list[str]:
    """The names (32 hex) of the packs in a receipt folder's ``packs``, sorted; none when it
    has no such folder.

    Raises:
        StoreError: ``receipt_store_io``: the folder exists and cannot be listed.
    """
    try:
        names = os.listdir(os.path.join(os.fspath(folder), PACKS_DIR))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise _unreadable(PACKS_DIR, exc) from exc
    stems = (n[:-5] for n in names if n.endswith(".pack"))
    return sorted(stem for stem in stems if PACK_NAME.fullmatch(stem))


def _line_at(data: mmap.mmap | bytes, start: int) -> bytes:
    end = data.find(b"\n", start)
    return bytes(data[start:end]) if end >= 0 else b""


def entry_of(line: bytes) -> tuple[str, str, int, int] | None:
    """``(hex id, pack, at, size)`` of an index line naming a pack; None for any other line."""
    if b'"pack"' not in line:
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return _checked(doc) if isinstance(doc, dict) else None


def _checked(doc: Mapping[str, object]) -> tuple[str, str, int, int] | None:
    rid, pack, at, size = (doc.get(k) for k in ("receipt_id", "pack", "at", "size"))
    if not (
        isinstance(rid, str)
        and rid.startswith("sha256:")
        and isinstance(pack, str)
        and PACK_NAME.fullmatch(pack)  # a name from the index never leaves the packs folder
        and isinstance(at, int)
        and isinstance(size, int)
        and type(at) is type(size) is int
        and at >= 0
        and size > 0
        and RECEIPT_HEX.fullmatch(rid[7:])
    ):
        return None
    return rid[7:], pack, at, size


def _mapped(path: str) -> mmap.mmap | bytes | None:
    """The bytes of ``path``, mapped (an empty file is ``b""``); None when it does not exist.

    Raises:
        StoreError: ``receipt_store_io``: it exists and cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unreadable(os.path.basename(path), exc) from exc
    try:
        size = os.fstat(fd).st_size
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
    except (OSError, ValueError) as exc:
        raise _unreadable(os.path.basename(path), exc) from exc
    finally:
        os.close(fd)


def _unreadable(name: str, exc: Exception) -> StoreError:
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StoreError(f"{name} could not be read: {why}", code="receipt_store_io")

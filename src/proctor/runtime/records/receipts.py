"""The receipt store: receipts written once, in packs, in a folder proctor marks as its own.

Layout (``PROCTOR_RECEIPT_DIR``, else ``<workspace>/.proctor/receipts``)::

    index.jsonl          first line {"schema": "proctor.receipt_index.v1"}; then one line per
                         receipt written: {"receipt_id", "kind", "outcome", "pack", "at",
                         "size"} (lines of earlier versions have no pack: a loose file holds it)
    packs/<32 hex>.pack  batches of receipts (see :mod:`.receipt_packs`, docs/receipts.md): v2
                         packs appended to now, v1 packs (one batch each) of earlier versions
    <64 hex>.json        a receipt written by an earlier version: one file per receipt, still
                         read, never written now

Rules:

* a batch (``put_many``: a step's receipts, or a whole run's when it seals at once) is appended
  to the day's current pack under the pack's lock, with its trailer, and the pack synced: when
  ``put``/``put_many`` returns, every receipt of the batch is on disk, at the cost of one sync
  a batch whatever its size. A new pack is made whole aside (header only), synced and linked
  into ``packs/`` with the folder synced before its first batch, so an append never needs a
  folder sync (two more syncs once per pack of :data:`~.receipt_packs.PACK_LIMIT` bytes);
* the batch's index lines are appended after the pack's sync and are not synced themselves:
  the index is a finding aid, not the record. A line is only written once the bytes it names
  are on disk, and a reader checks what it reads through the index against the receipt's id;
  a crash (or power cut) that loses index lines leaves receipts the index does not list, which
  a reader finds by the digest of their bodies (as it did for a crash between a v1 pack and
  its index lines);
* a reader never takes half a receipt: a torn tail of a pack (a crash mid-append) is a last
  line without its line feed, or whole lines no trailer covers; the next batch starts on a
  fresh line after it. A write the disk took only part of is cut off before the error is
  raised;
* a receipt is never rewritten: the same bytes under an id this store holds are a no-op,
  different bytes are refused (``receipt_conflict``; see :meth:`ReceiptStore._plan` for what
  "holds" covers);
* ``index.jsonl`` marks the folder as ours. A folder that exists, is not empty and has no
  index is refused by every read and write (``receipt_store_foreign``); nothing in it is read.
  An empty folder (e.g. a fresh ``mktemp -d``) becomes a store on the first write.
* ``keys.jsonl`` lists the keys that signed receipts here, one ``{"key_id", "source"}`` per
  line (``source``: ``home``, ``named`` by ``PROCTOR_SIGNING_KEY``, or ``given`` through the
  Python API), written and synced before a key's first receipt: a missing home key where
  receipts of a home key exist is refused rather than silently replaced (``proctor key rotate``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from itertools import repeat
from pathlib import Path

from proctor.errors import ReceiptInvalid, StoreError, UsageError
from proctor.receipts.parts import RECEIPT_ID
from proctor.runtime.records.receipt_packs import (
    PACK_HEADER_V2,
    PACK_LIMIT,
    PACKS_DIR,
    PackShelf,
    batch_trailer,
    pack_name,
)
from proctor.runtime.testhooks import kill_point

__all__ = [
    "INDEX_NAME",
    "INDEX_SCHEMA",
    "ReceiptStore",
    "default_receipt_dir",
    "receipt_dir",
    "receipt_hex",
]

INDEX_NAME = "index.jsonl"
KEYS_NAME = "keys.jsonl"
INDEX_SCHEMA = "proctor.receipt_index.v1"
_HEADER = (json.dumps({"schema": INDEX_SCHEMA}, separators=(",", ":")) + "\n").encode()
_LOOSE = re.compile(r"[0-9a-f]{64}\.json")
_EXACT_ID = re.compile(r"sha256:[0-9a-f]{64}")
_PREFIX = "sha256:"
_ID_LENGTH = len(_PREFIX) + 64
_HEX_DIGITS = b"0123456789abcdef"
_STAGING = ".tmp-"  # files being written; never a sign that a folder is someone else's
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DAY_NS = 86_400 * 10**9  # a UTC day of POSIX time (which has no leap seconds)


def receipt_hex(receipt_id: str) -> str:
    """The 64 hex digits of a receipt id given as ``sha256:<hex>`` or bare hex.

    Raises:
        UsageError: (code ``receipt_id_invalid``) not a receipt id.
    """
    match = RECEIPT_ID.match(receipt_id.strip().lower())
    if match is None:
        raise UsageError(
            "a receipt id is sha256: followed by 64 hex digits", code="receipt_id_invalid"
        )
    return match.group(1)


def receipt_dir(state_dir: Path, environ: Mapping[str, str]) -> Path:
    """``PROCTOR_RECEIPT_DIR``, else ``receipts`` in the workspace's state folder."""
    named = environ.get("PROCTOR_RECEIPT_DIR")
    return Path(named) if named else state_dir / "receipts"


def default_receipt_dir(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """:func:`receipt_dir` of the workspace around ``cwd`` (see ``Workspace.discover``)."""
    from proctor.runtime.boundary.workspace import Workspace

    env = os.environ if environ is None else environ
    return receipt_dir(Workspace.discover(cwd or Path.cwd()).state_dir, env)


class ReceiptStore:
    """A folder of receipts marked by our ``index.jsonl``.

    Raises (from every read and write):
        ReceiptInvalid: (code ``receipt_store_foreign``) the folder exists without our index.
        StoreError: (code ``receipt_store_io``) the disk refused a read or write.
    """

    def __init__(self, directory: Path, *, durable: bool = True) -> None:
        self.directory = Path(directory)
        # the index's and packs' places, built once: every batch appends to both
        self._index_path = str(self.directory / INDEX_NAME)
        self._packs_dir = self.directory / PACKS_DIR
        self._durable = durable
        self._checked = False
        self._noted: set[str] = set()
        self._threads = threading.RLock()
        self._shelf = PackShelf(self.directory)
        self._packs_made = False
        self._pack_at: tuple[str, int] = ("", 0)  # the UTC day and number of the last pack
        self._day: tuple[int, str] = (-1, "")  # the last UTC day asked: days since 1970, text
        self._pack_named: tuple[tuple[str, int], str, str] = (("", -1), "", "")
        # the pack and index files this store appended to last, each as (device, inode, size
        # after the append): the same file at that size ends with the batch this store wrote
        # (a line feed, its header checked), so neither is read again before the next append
        self._pack_end: tuple[int, int, int] = (-1, -1, -1)
        self._index_end: tuple[int, int, int] = (-1, -1, -1)
        self._loose: bool | None = None

    # -- the mark ----------------------------------------------------------------------------

    def _check(self, *, create: bool) -> bool:
        """True when the store exists and is ours; creates it when ``create``."""
        if self._checked:
            return True
        if not create:  # no store yet (a session's run before its seal): one look, not three
            try:
                os.stat(self.directory)
            except FileNotFoundError:
                return False
            except OSError:
                pass  # looked at again below, and refused as it would be there
        index = self.directory / INDEX_NAME
        try:
            if index.is_file():
                with index.open("rb") as handle:
                    first = handle.readline()
                if first != _HEADER:
                    raise self._foreign("its index.jsonl was not written by proctor")
                self._checked = True
                return True
            # one look at what stands there: a folder another writer makes between two looks
            # (is_dir, then exists) would be taken for something that is not a folder
            try:
                kind: int | None = os.stat(self.directory).st_mode
            except FileNotFoundError:
                kind = None
            if kind is not None and stat.S_ISDIR(kind):
                names = [n for n in os.listdir(self.directory) if not n.startswith(_STAGING)]
                if INDEX_NAME in names:
                    return self._check(create=create)  # another writer has just made it ours
                if names:
                    raise self._foreign("it holds files but no proctor index.jsonl")
            elif kind is not None:
                raise self._foreign("it is not a folder")
            if not create:
                return False
            from proctor.runtime.records.store_file import private_folders  # loads sqlite3

            private_folders(self.directory)
            self._write_index_header(index)
        except OSError as exc:
            raise StoreError(
                f"the receipt store could not be opened: {exc.strerror}", code="receipt_store_io"
            ) from exc
        self._checked = True
        return True

    def _write_index_header(self, index: Path) -> None:
        # written aside and linked into place, so that a writer racing to open the new store
        # never reads an index without its header (and takes the folder for a foreign one);
        # another writer creating it first is as good
        self._link_whole(index, _HEADER, "index")
        self._fsync_dir()

    def _link_whole(self, path: Path, data: bytes, tag: str, *, folder: Path | None = None) -> bool:
        """Write ``data`` to a fresh temporary file in ``folder`` (default the store's; synced
        when durable), then give it the name ``path`` by a hard link, which never replaces a
        file. False when ``path`` already existed (its bytes are the caller's to judge)."""
        where = self.directory if folder is None else folder
        tmp = where / f"{_STAGING}{tag}-{os.getpid()}-{os.urandom(4).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                os.write(fd, data)
                if self._durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def _foreign(self, why: str) -> ReceiptInvalid:
        return ReceiptInvalid(
            f"the receipt folder {self.directory.name!r} is not a proctor receipt store ({why}); "
            "nothing in it was read. Move it aside (or set PROCTOR_RECEIPT_DIR) to start a "
            "new store.",
            code="receipt_store_foreign",
        )

    def _fsync_dir(self, folder: Path | None = None) -> None:
        if not self._durable or os.name != "posix":
            return
        fd = os.open(self.directory if folder is None else folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- reads -------------------------------------------------------------------------------

    def get(self, receipt_id: str) -> bytes | None:
        """The bytes of a receipt, or ``None`` when the store does not hold it.

        Raises:
            ReceiptInvalid: the folder is not ours. UsageError: not a receipt id.
            StoreError: the disk refused a read.
        """
        hex_id = receipt_hex(receipt_id)
        if not self._check(create=False):
            return None
        try:
            return (self.directory / f"{hex_id}.json").read_bytes()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(
                f"receipt {receipt_id} could not be read: {exc.strerror}", code="receipt_store_io"
            ) from exc
        return self._shelf.get(hex_id)

    def index(self) -> Iterator[dict[str, object]]:
        """The index lines after the header, oldest first (nothing when there is no store).

        A line that does not parse (the tail of an append a full disk cut short) is skipped:
        the index lists receipts, and the receipt files are the record.
        """
        if not self._check(create=False):
            return
        with (self.directory / INDEX_NAME).open("rb") as handle:
            handle.readline()
            for line in handle:
                try:
                    entry = json.loads(line) if line.strip() else None
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    self._shelf.learn_entry(entry)  # a get of it after needs no search
                    yield entry

    # -- the keys that signed here ---------------------------------------------------------

    def check(self) -> None:
        """Refuse a folder that is not ours (creates nothing).

        Raises:
            ReceiptInvalid: ``receipt_store_foreign``. StoreError: the disk refused a read.
        """
        self._check(create=False)

    def key_ids(self, *, source: str | None = None) -> frozenset[str]:
        """The ids of the keys that signed receipts here (``keys.jsonl``; for a store written
        before that file existed, the signers of its run receipts, taken as ``home`` keys).
        ``source`` keeps only keys noted from there (``home``, ``named`` or ``given``).

        Raises:
            ReceiptInvalid: the folder is not ours. StoreError: the disk refused a read.
        """
        if not self._check(create=False):
            return frozenset()
        found: set[str] = set()
        try:
            with (self.directory / KEYS_NAME).open("rb") as handle:
                for line in handle:
                    try:  # a line torn by a power cut named a key that signed nothing yet
                        entry = json.loads(line)
                        if source is None or entry.get("source", "home") == source:
                            found.add(str(entry["key_id"]))
                    except (ValueError, KeyError, TypeError, AttributeError):
                        continue
            return frozenset(found)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(
                f"{KEYS_NAME} could not be read: {exc.strerror}", code="receipt_store_io"
            ) from exc
        if source not in (None, "home"):
            return frozenset()
        for entry in self.index():
            data = self.get(str(entry["receipt_id"])) if entry.get("kind") == "run" else None
            key_id = json.loads(data).get("key_id") if data else None
            if isinstance(key_id, str):
                found.add(key_id)
        return frozenset(found)

    def note_key(self, key_id: str, *, source: str) -> None:
        """Record that ``key_id`` (loaded from ``source``: ``home``, ``named`` or ``given``)
        signs receipts here; on disk when it returns. Call it before the key's first receipt.

        Raises:
            ReceiptInvalid: the folder is not ours. StoreError: the disk refused the write.
        """
        if key_id in self._noted:
            return
        path = self.directory / KEYS_NAME
        if path.exists():
            if key_id in self.key_ids():
                self._noted.add(key_id)
                return
            lines = [(key_id, source)]
        else:  # a store from before keys.jsonl: the signers of its run receipts come first
            lines = [(k, "home") for k in sorted(self.key_ids()) if k != key_id]
            lines.append((key_id, source))
        self._check(create=True)
        data = "".join(json.dumps({"key_id": k, "source": v}) + "\n" for k, v in lines)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data.encode())
                if self._durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self._fsync_dir()
        except OSError as exc:
            raise StoreError(
                f"{KEYS_NAME} could not be written: {exc.strerror}", code="receipt_store_io"
            ) from exc
        self._noted.add(key_id)

    # -- writes ------------------------------------------------------------------------------

    def put(self, receipt_id: str, data: bytes, *, kind: str, outcome: str) -> None:
        """Write a receipt once, atomically, and append its index line.

        Raises:
            ReceiptInvalid: (code ``receipt_conflict``) different bytes already stored under
                this id; the stored receipt is left untouched. Or the folder is not ours, or
                ``data`` is not one line ending in a line feed (``malformed``).
            StoreError: the disk refused the write.
        """
        self.put_many([(receipt_id, data, kind, outcome)])

    def put_many(self, items: Sequence[tuple[str, bytes, str, str]]) -> None:
        """Write several receipts ``(receipt_id, data, kind, outcome)`` as :meth:`put` does,
        in one batch: appended to the current pack and synced, then its index lines.

        Raises:
            ReceiptInvalid, StoreError: as :meth:`put`; receipts before a conflict are written,
                none from the conflict on.
        """
        if not items:
            return
        with self._threads:  # child runs seal in threads of one process
            try:
                self._put_many(items)
            except OSError as exc:
                raise StoreError(
                    f"receipts could not be written: {exc.strerror}", code="receipt_store_io"
                ) from exc

    def _put_many(self, items: Sequence[tuple[str, bytes, str, str]]) -> None:
        self._check(create=True)
        fresh = self._fresh(items)
        if fresh is not None:  # the usual batch: every receipt new, nothing to compare
            self._append(items, *fresh)
            return
        todo, conflict = self._plan(items)
        if todo:
            self._append(todo, None, None)
        if conflict is not None:
            raise conflict

    def _fresh(
        self, items: Sequence[tuple[str, bytes, str, str]]
    ) -> tuple[bytes, list[str]] | None:
        """The batch's receipt lines joined and its ids' hex digits, when :meth:`_plan` would
        take every item as it is (exact, distinct ids this store has not seen, each receipt
        one line, no loose files to look in), checked a batch at a time; else ``None`` and
        :meth:`_plan` decides item by item."""
        ids = [item[0] for item in items]
        records = [item[1] for item in items]
        try:
            if set(map(len, ids)) != {_ID_LENGTH} or not all(
                map(str.startswith, ids, repeat(_PREFIX))
            ):
                return None
            # ids of one length and prefix: distinct exactly when their hex digits are (whose
            # hashes the shelf's lookups below then reuse)
            hexes = [receipt_id[7:] for receipt_id in ids]
            if (
                "".join(hexes).encode("ascii").translate(None, _HEX_DIGITS)
                or len(set(hexes)) != len(hexes)
                # one line each: the first line feed is the last byte
                or list(map(bytes.find, records, repeat(b"\n")))
                != [len(record) - 1 for record in records]
            ):
                return None
        except (TypeError, UnicodeEncodeError):  # not str ids or not bytes records
            return None
        if self._has_loose() or not self._shelf.knows_none(hexes):
            return None
        return b"".join(records), hexes

    def _append(
        self,
        todo: Sequence[tuple[str, bytes, str, str]],
        records: bytes | None,
        hexes: list[str] | None,
    ) -> None:
        """Append ``todo`` as one batch to the current pack (one sync), then its index lines
        (not synced: the index is a finding aid, see the module), both under the pack's lock
        so that the index lists batches in the order the pack holds them. ``records`` are
        ``todo``'s receipt lines joined and ``hexes`` its ids' hex digits, when the caller
        has them."""
        lines_of = [item[1] for item in todo]
        joined = b"".join(lines_of) if records is None else records
        trailer = batch_trailer(joined, len(lines_of))
        fd, name, place = self._current_pack()
        size = place[2]
        try:
            lead = b""
            if place != self._pack_end and os.pread(fd, 1, size - 1) != b"\n":
                lead = b"\n"  # after a torn tail
            self._pack_end = (-1, -1, -1)
            _write_at_end(fd, size, [lead, joined, trailer], durable=self._durable)
            self._pack_end = (place[0], place[1], size + len(lead) + len(joined) + len(trailer))
            kill_point("receipts.batch_synced")  # on disk, not yet in the index
            sizes = list(map(len, lines_of))
            ats = list(itertools.accumulate(sizes, initial=size + len(lead)))
            ats.pop()
            index = os.open(self._index_path, os.O_RDWR | os.O_APPEND)
            try:
                known, self._index_end = self._index_end, (-1, -1, -1)
                lines = _index_lines(todo, name, ats, sizes)
                self._index_end = _append_whole(index, lines, durable=False, known=known)
            finally:
                os.close(index)
            if hexes is None:
                hexes = [item[0][7:] for item in todo]
            self._shelf.learn_many(name, hexes, ats, sizes)
        finally:
            os.close(fd)  # releases the pack's lock

    def _current_pack(self) -> tuple[int, str, tuple[int, int, int]]:
        """The pack this batch goes to, open for appending and locked: its descriptor, name
        and place (device, inode, size). Today's packs in turn (the one this store last used
        first), past each that holds :data:`PACK_LIMIT` bytes; one that does not exist is made
        whole first. A pack's header is read unless it is the file this store appended to
        last, at the size it left (:attr:`_pack_end`)."""
        packs = self._packs_dir
        if not self._packs_made:
            try:
                packs.mkdir(mode=0o755)
                self._fsync_dir()
            except FileExistsError:
                if not packs.is_dir() or packs.is_symlink():
                    raise self._foreign(f"its {PACKS_DIR} is not a folder") from None
            self._packs_made = True
        day = self._today()
        n = self._pack_at[1] if self._pack_at[0] == day else 0
        while True:
            name, path = self._pack_path(packs, day, n)
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND | _NOFOLLOW)
            except FileNotFoundError:
                # made whole aside and linked (a reader never sees it without its header),
                # the folder synced once: every later batch of the pack is one file sync
                if self._link_whole(Path(path), PACK_HEADER_V2, name[:16], folder=packs):
                    self._fsync_dir(packs)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                st = os.fstat(fd)
                size = st.st_size
                place = (st.st_dev, st.st_ino, size)
                ours = place == self._pack_end or (
                    os.pread(fd, len(PACK_HEADER_V2), 0) == PACK_HEADER_V2
                )
            except BaseException:
                os.close(fd)
                raise
            # a pack takes batches while under the limit, and a new one its first whatever
            # the limit (so a limit below a header's size still moves on)
            if ours and (size < PACK_LIMIT or size == len(PACK_HEADER_V2)):
                self._pack_at = (day, n)
                return fd, name, place
            os.close(fd)  # full (or not a pack of ours under that name): the next one
            n += 1

    def _today(self) -> str:
        """The UTC day now as ``YYYY-MM-DD`` (``datetime.now(UTC).date().isoformat()``), written
        once per day: POSIX time counts a day as 86,400 seconds."""
        days = time.time_ns() // _DAY_NS
        known = self._day
        if known[0] == days:
            return known[1]
        text = datetime.fromtimestamp(days * 86_400, UTC).date().isoformat()
        self._day = (days, text)
        return text

    def _pack_path(self, packs: Path, day: str, n: int) -> tuple[str, str]:
        """The name and path of the ``n``-th pack of ``day`` (a pure function of both, kept
        for the last one asked: every batch of a day asks for the same)."""
        held = self._pack_named
        if held[0] == (day, n):
            return held[1], held[2]
        name = pack_name(day, n)
        path = os.path.join(packs, f"{name}.pack")
        self._pack_named = ((day, n), name, path)
        return name, path

    def _plan(
        self, items: Sequence[tuple[str, bytes, str, str]]
    ) -> tuple[list[tuple[str, bytes, str, str]], ReceiptInvalid | None]:
        """The receipts of the batch to write, in order, up to the first conflict with one
        already stored (or earlier in the batch); a receipt stored with the same bytes is
        skipped.

        "Stored" means: a loose file of an earlier version, a receipt this store object wrote
        or read, or one earlier in the batch. A receipt id is the digest of its body, so two
        copies of one id differ at most in their signature; a pack written by another process
        is not searched here (that would cost a search of the whole index per batch), and a
        reader returns the first copy the index lists.
        """
        todo: list[tuple[str, bytes, str, str]] = []
        seen: dict[str, bytes] = {}
        exact, located = _EXACT_ID.fullmatch, self._shelf.located
        for item in items:
            receipt_id, data = item[0], item[1]
            if data.find(b"\n") != len(data) - 1:
                return todo, ReceiptInvalid(
                    f"receipt {receipt_id} is not one line ending in a line feed",
                    code="malformed",
                )
            known = seen.get(receipt_id)
            if known is None:
                # the writer's ids are exact already: the lenient parse only for others
                hex_id = receipt_id[7:] if exact(receipt_id) else receipt_hex(receipt_id)
                if located(hex_id) is not None:
                    known = self._shelf.get(hex_id)
                elif self._has_loose():
                    path = self.directory / f"{hex_id}.json"
                    known = path.read_bytes() if path.exists() else None
            if known is not None:
                if known != data:
                    return todo, self._conflict(receipt_id)
                continue
            seen[receipt_id] = data
            todo.append(item)
        return todo, None

    def _has_loose(self) -> bool:
        """Whether the folder holds receipt files of an earlier version (looked at once: this
        version never writes one), so that a store without any costs no look per receipt."""
        if self._loose is None:
            self._loose = any(_LOOSE.fullmatch(name) for name in os.listdir(self.directory))
        return self._loose

    def _conflict(self, receipt_id: str) -> ReceiptInvalid:
        return ReceiptInvalid(
            f"a different receipt is already stored as {receipt_id}; receipts are never rewritten",
            code="receipt_conflict",
        )


_PLAIN_KINDS: set[tuple[str, str]] = set()
"""(kind, outcome) pairs of exact strings found plain letters (a store writes a few)."""


def _plain_kinds(kinds: set[tuple[str, str]]) -> bool:
    """Whether every kind and outcome is plain ASCII letters (kept in :data:`_PLAIN_KINDS`
    when they are exact strings)."""
    if not all(
        kind.isalpha() and kind.isascii() and outcome.isalpha() and outcome.isascii()
        for kind, outcome in kinds
    ):
        return False
    if len(_PLAIN_KINDS) < 256 and all(type(k) is str and type(o) is str for k, o in kinds):
        _PLAIN_KINDS.update(kinds)
    return True


def _index_lines(
    todo: Sequence[tuple[str, bytes, str, str]], pack: str, ats: list[int], sizes: list[int]
) -> bytes:
    """The index lines of a batch: ``json.dumps`` of each entry, compact, one a line."""
    kinds = {(item[2], item[3]) for item in todo}
    if kinds <= _PLAIN_KINDS or _plain_kinds(kinds):
        # what json.dumps writes for these values (ids are checked hex, names plain
        # letters), without building a dict per receipt
        return "".join(
            [
                f'{{"receipt_id":"{receipt_id}","kind":"{kind}","outcome":"{outcome}",'
                f'"pack":"{pack}","at":{at},"size":{size}}}\n'
                for (receipt_id, _, kind, outcome), at, size in zip(todo, ats, sizes, strict=True)
            ]
        ).encode()
    lines = []
    for (receipt_id, _, kind, outcome), at, size in zip(todo, ats, sizes, strict=True):
        entry: dict[str, object] = {"receipt_id": receipt_id, "kind": kind}
        entry.update(outcome=outcome, pack=pack, at=at, size=size)
        lines.append(json.dumps(entry, separators=(",", ":")) + "\n")
    return "".join(lines).encode()


def _append_whole(
    fd: int, data: bytes, *, durable: bool, known: tuple[int, int, int] = (-1, -1, -1)
) -> tuple[int, int, int]:
    """Append ``data`` whole or not at all (see :func:`_write_at_end`), under an exclusive
    lock of ``fd``; a file whose last line a crash cut short gets a line feed first, so the
    new lines are never glued to the torn one (not looked for when the file is ``known``:
    the device, inode and size an append of this process left, ending in a line feed).
    Returns the file's device, inode and size after the append.

    Raises:
        OSError: the write (or its sync) failed.
    """
    fcntl.flock(fd, fcntl.LOCK_EX)  # so that the cut never takes another writer's line
    try:
        st = os.fstat(fd)
        size = st.st_size
        place = (st.st_dev, st.st_ino, size)
        if size and place != known and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        _write_at_end(fd, size, [data], durable=durable)
        return place[0], place[1], size + len(data)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _write_at_end(fd: int, size: int, data: list[bytes], *, durable: bool) -> None:
    """Append the parts of ``data`` in one write to ``fd`` (opened for appending, locked,
    ``size`` bytes long) and sync it when ``durable``; a write the disk took only part of is
    cut off, so the next append never lands after half a line.

    Raises:
        OSError: the write (or its sync) failed; the file is as it was.
    """
    try:
        if os.writev(fd, data) != sum(map(len, data)):
            raise OSError(errno.ENOSPC, "No space left on device")
        if durable:
            os.fdatasync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise

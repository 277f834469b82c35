"""The receipt store: one file per receipt, written once, in a folder proctor marks as its own.

Layout (``PROCTOR_RECEIPT_DIR``, else ``<workspace>/.proctor/receipts``)::

    index.jsonl          first line {"schema": "proctor.receipt_index.v1"}; then one line per
                         receipt written: {"receipt_id", "kind", "outcome"}
    <64 hex>.json        the receipt envelope (see proctor.receipts.model)

Rules:

* a receipt is written atomically (a temporary file in the folder, fsync, then a hard link
  to its final name, which fails if the name exists, then an fsync of the folder), so a
  reader never sees half a receipt and two writers can never replace each other's file;
* durability, exactly: when ``put``/``put_many`` returns, every receipt of the batch, its
  name in the folder and its index line are on disk. Each new file is fsynced before it
  gets its name; then the folder is fsynced once for the batch, then the index lines are
  appended and the index fsynced once. A batch's files are written from a few threads at
  once, so a journalling file system commits them in a handful of transactions rather than
  one per file (a whole run's receipts are one batch, see ``ReceiptWriter(batch=...)``);
* a receipt is never rewritten: the same bytes under an existing id are a no-op, different
  bytes are refused (``receipt_conflict``);
* ``index.jsonl`` marks the folder as ours. A folder that exists, is not empty and has no
  index is refused by every read and write (``receipt_store_foreign``); nothing in it is read.
  An empty folder (e.g. a fresh ``mktemp -d``) becomes a store on the first write.
* the receipt file is written before its index line; a crash between the two leaves a
  receipt the index does not list, never an index line without its receipt.
* ``keys.jsonl`` lists the keys that signed receipts here, one ``{"key_id", "source"}`` per
  line (``source``: ``home``, ``named`` by ``PROCTOR_SIGNING_KEY``, or ``given`` through the
  Python API), written and synced before a key's first receipt: a missing home key where
  receipts of a home key exist is refused rather than silently replaced (``proctor key rotate``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from proctor.errors import ReceiptInvalid, StoreError, UsageError
from proctor.receipts.parts import RECEIPT_ID

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

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
_STAGING = ".tmp-"  # files being written; never a sign that a folder is someone else's


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
        self._durable = durable
        self._checked = False
        self._noted: set[str] = set()
        self._threads = threading.RLock()

    # -- the mark ----------------------------------------------------------------------------

    def _check(self, *, create: bool) -> bool:
        """True when the store exists and is ours; creates it when ``create``."""
        if self._checked:
            return True
        index = self.directory / INDEX_NAME
        try:
            if index.is_file():
                with index.open("rb") as handle:
                    first = handle.readline()
                if first != _HEADER:
                    raise self._foreign("its index.jsonl was not written by proctor")
                self._checked = True
                return True
            if self.directory.is_dir():
                names = [n for n in os.listdir(self.directory) if not n.startswith(_STAGING)]
                if INDEX_NAME in names:
                    return self._check(create=create)  # another writer has just made it ours
                if names:
                    raise self._foreign("it holds files but no proctor index.jsonl")
            elif self.directory.exists():
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

    def _link_whole(self, path: Path, data: bytes, tag: str) -> bool:
        """Write ``data`` to a fresh temporary file (synced when durable), then give it the
        name ``path`` by a hard link, which never replaces a file. False when ``path`` already
        existed (its bytes are the caller's to judge)."""
        tmp = self.directory / f"{_STAGING}{tag}-{os.getpid()}-{os.urandom(4).hex()}"
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

    def _fsync_dir(self) -> None:
        if not self._durable or os.name != "posix":
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- reads -------------------------------------------------------------------------------

    def path_of(self, receipt_id: str) -> Path:
        """Where the receipt ``receipt_id`` lives (whether or not it exists)."""
        return self.directory / f"{receipt_hex(receipt_id)}.json"

    def get(self, receipt_id: str) -> bytes | None:
        """The file bytes of a receipt, or ``None`` when the store does not hold it.

        Raises:
            ReceiptInvalid: the folder is not ours. UsageError: not a receipt id.
        """
        path = self.path_of(receipt_id)
        if not self._check(create=False):
            return None
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(
                f"receipt {receipt_id} could not be read: {exc.strerror}", code="receipt_store_io"
            ) from exc

    def index(self) -> Iterator[dict[str, str]]:
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
            data = self.get(entry["receipt_id"]) if entry.get("kind") == "run" else None
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
                this id; the stored file is left untouched. Or the folder is not ours.
            StoreError: the disk refused the write.
        """
        self.put_many([(receipt_id, data, kind, outcome)])

    def put_many(self, items: Sequence[tuple[str, bytes, str, str]]) -> None:
        """Write several receipts ``(receipt_id, data, kind, outcome)`` as :meth:`put` does,
        in one batch: every new file written, fsynced and named (many at once), then one
        folder fsync, then one index append and fsync.

        Raises:
            ReceiptInvalid, StoreError: as :meth:`put`; receipts before the failing one stay,
                and none after a conflict already on disk is written.
        """
        if not items:
            return
        with self._threads:  # child runs seal in threads of one process
            self._put_many(items)

    def _put_many(self, items: Sequence[tuple[str, bytes, str, str]]) -> None:
        try:
            self._check(create=True)
            todo, conflict = self._plan(items)
            results: list[bool | Exception] = []
            try:
                results = self._write_all(todo)
            finally:
                lines = [
                    json.dumps(
                        {"receipt_id": item[0], "kind": item[2], "outcome": item[3]},
                        separators=(",", ":"),
                    ).encode()
                    + b"\n"
                    for item, named in zip(todo, results, strict=False)
                    if named is True
                ]
                if lines:
                    self._fsync_dir()
                    fd = os.open(self.directory / INDEX_NAME, os.O_WRONLY | os.O_APPEND)
                    try:
                        _append_whole(fd, b"".join(lines), durable=self._durable)
                    finally:
                        os.close(fd)
            failed = next((r for r in results if isinstance(r, Exception)), conflict)
            if failed is not None:
                raise failed
        except OSError as exc:
            raise StoreError(
                f"receipts could not be written: {exc.strerror}", code="receipt_store_io"
            ) from exc

    def _plan(
        self, items: Sequence[tuple[str, bytes, str, str]]
    ) -> tuple[list[tuple[str, bytes, str, str]], ReceiptInvalid | None]:
        """The receipts of the batch to write, in order, up to the first conflict with one
        already stored (or earlier in the batch); a receipt stored with the same bytes is
        skipped."""
        todo: list[tuple[str, bytes, str, str]] = []
        seen: dict[str, bytes] = {}
        for item in items:
            receipt_id, data = item[0], item[1]
            path = self.path_of(receipt_id)
            known = seen.get(receipt_id)
            if known is None and path.exists():
                known = path.read_bytes()
            if known is not None:
                if known != data:
                    return todo, self._conflict(path)
                continue
            seen[receipt_id] = data
            todo.append(item)
        return todo, None

    def _write_all(self, todo: list[tuple[str, bytes, str, str]]) -> list[bool | Exception]:
        """:meth:`_write_one` for each receipt, several at once: their file creations and
        fsyncs then share the file system's journal commits, so a batch of thousands costs a
        handful of commits, not one per file. Each result is whether the receipt was named,
        or what its write raised."""

        def attempt(item: tuple[str, bytes, str, str]) -> bool | Exception:
            try:
                return self._write_one(item[0], item[1])
            except (OSError, ReceiptInvalid) as exc:
                return exc

        def run(chunk: list[tuple[str, bytes, str, str]]) -> list[bool | Exception]:
            return [attempt(item) for item in chunk]

        if len(todo) <= 2:
            return run(todo)
        # one contiguous share per thread: a task per file would cost more in handing it
        # over than in writing it
        writers = min(_WRITERS, len(todo))
        size = -(-len(todo) // writers)
        shares = [todo[i : i + size] for i in range(0, len(todo), size)]
        if not _pool and not _batches and len(todo) <= _WRITERS:  # a CLI run's only seal
            _batches.append(True)
            return _in_threads(run, shares)
        return [result for share in _writer_pool().map(run, shares) for result in share]

    def _write_one(self, receipt_id: str, data: bytes) -> bool:
        """Store one receipt whole under its name; False when another writer stored the same
        bytes there first.

        Raises:
            ReceiptInvalid: ``receipt_conflict``: different bytes already hold that name.
        """
        path = self.path_of(receipt_id)
        if self._link_whole(path, data, path.stem[:16]):
            return True
        if path.read_bytes() != data:
            raise self._conflict(path)
        return False

    def _conflict(self, path: Path) -> ReceiptInvalid:
        return ReceiptInvalid(
            f"a different receipt is already stored as {path.name}; receipts are never rewritten",
            code="receipt_conflict",
        )


_Item = tuple[str, bytes, str, str]
_WRITERS = 16
"""Receipt files a batch writes at once (each thread holds one file open at a time)."""

_pool: list[ThreadPoolExecutor] = []
_pool_lock = threading.Lock()
_batches: list[bool] = []  # holds one item once a batch ran on threads of its own


def _in_threads(
    run: Callable[[list[_Item]], list[bool | Exception]], shares: list[list[_Item]]
) -> list[bool | Exception]:
    """``run`` of each share on a thread of its own, in order; raises what a thread raised."""
    results: list[list[bool | Exception]] = [[] for _ in shares]
    raised: list[BaseException] = []

    def work(index: int) -> None:
        try:
            results[index] = run(shares[index])
        except BaseException as exc:
            raised.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, len(shares))]
    for thread in threads:
        thread.start()
    work(0)
    for thread in threads:
        thread.join()
    if raised:
        raise raised[0]
    return [result for share in results for result in share]


def _writer_pool() -> ThreadPoolExecutor:
    """The process's receipt writers, started once: a run's seal used to start (and join) a
    thread per receipt file, which cost more than writing the files. Concurrent seals share
    it; a batch never waits on work of its own, so sharing cannot deadlock."""
    with _pool_lock:
        if not _pool:
            from concurrent.futures import ThreadPoolExecutor

            _pool.append(
                ThreadPoolExecutor(max_workers=_WRITERS, thread_name_prefix="proctor-receipts")
            )
        return _pool[0]


def _append_whole(fd: int, data: bytes, *, durable: bool) -> None:
    """Append ``data`` whole or not at all: a write the disk took only part of is cut off,
    so the next append never lands after half a line.

    Raises:
        OSError: the write (or its fsync) failed.
    """
    fcntl.flock(fd, fcntl.LOCK_EX)  # so that the cut never takes another writer's line
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "No space left on device")
            if durable:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)

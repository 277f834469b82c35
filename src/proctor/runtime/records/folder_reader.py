"""Read the receipts of one folder, fast, for `proctor verify` (see FolderReader): loose
``<hex>.json`` files, and receipt packs (:mod:`.receipt_packs`)."""

from __future__ import annotations

import os
from collections.abc import Callable

from proctor.errors import StoreError
from proctor.receipts.parts import RECEIPT_ID
from proctor.runtime.records.pack_window import PackWindow

__all__ = ["FolderReader"]

_READ = 1 << 16


class FolderReader:
    """Reads the receipts of one folder for the verifier (a loader callable): the file
    ``<hex>.json`` where there is one (an earlier version's store, or an auditor's folder of
    files), else the receipt from the folder's packs (:class:`~.pack_window.PackWindow`, which
    holds a few spans of the index at a time, so that memory stays flat in the tree's size).
    A pack's receipt is read where the index says, unchecked: the verifier checks every
    receipt against its id, and asks :meth:`again` for one that does not hold up.

    os.open/os.read rather than Path.read_bytes: a tree of loose files has many small ones, and the
    plain calls take less than half the time per file. Names are opened relative to a
    descriptor of the folder (held open while verifying), which spares the kernel walking the
    folder's path again for every file; a folder that cannot be opened is read by full paths,
    so a missing one still reads as "no such receipt".

    Files are opened with ``O_NOATIME`` where the system allows it (the owner's files): reading
    a receipt then writes nothing, where updating the access time of a file read for the first
    time is a journaled inode write. A file whose first read ends in a line feed short of the
    buffer is taken as read whole (a regular file reads short only at its end, and a receipt
    ends with its one line feed); any other file is read on to its end.
    """

    __slots__ = ("_dir", "_flags", "_loose", "_prefix", "_shelf", "read")

    _FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    _NOATIME = getattr(os, "O_NOATIME", 0)

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._prefix = os.path.join(os.fspath(directory), "")
        self._flags = self._FLAGS | self._NOATIME
        self._dir: int | None = None
        self._shelf = PackWindow(directory, miss=self._unheld)
        self._loose = _has_loose(self._prefix)
        #: The loader to hand a walk: this reader, called the cheapest way (for a folder of
        #: packs, the window's own look-up, which passes a receipt it does not hold back here)
        self.read: Callable[[str], bytes | None] = self._unheld if self._loose else self._shelf.held
        if os.open in os.supports_dir_fd:
            try:
                self._dir = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            except OSError:
                self._dir = None

    def __call__(self, receipt_id: str) -> bytes | None:
        # most reads of a walk: the receipt lies where a span of the index held names it.
        # Only ``sha256:`` and 64 lowercase hex digits are found there, so the id is well
        # formed whenever it is found; anything else takes the way below (see _unheld)
        return self.read(receipt_id)

    def _unheld(self, receipt_id: str) -> bytes | None:
        """The receipt read any way but where a span of the index held names it (see
        :meth:`__call__`)."""
        match = RECEIPT_ID.match(receipt_id)
        if match is None:
            return None
        if not self._loose:  # a store of packs: no file to try first for each receipt
            found = self._shelf.get(match[1])
            if found is not None:
                return found  # else a file may have been put there since: looked for below
        name = match[1] + ".json"
        try:
            try:
                if self._dir is None:
                    fd = os.open(self._prefix + name, self._flags)
                else:
                    fd = os.open(name, self._flags, dir_fd=self._dir)
            except PermissionError:
                if not self._flags & self._NOATIME:
                    raise
                fd = self._open(name, self._FLAGS)  # not the owner: O_NOATIME is refused
                self._flags = self._FLAGS
        except FileNotFoundError:
            return self._shelf.get(match[1]) if self._loose else None
        except OSError as exc:
            raise StoreError(
                f"receipt {receipt_id} could not be read: {exc.strerror}", code="receipt_store_io"
            ) from exc
        try:
            data = os.read(fd, _READ)
            if len(data) < _READ and data.endswith(b"\n"):
                return data  # the whole file (see the class docstring)
            if len(data) == _READ:
                # a large receipt (a wide step): read again whole, in one read of the size
                # it has, rather than in pieces joined after (each piece and the join are
                # fresh memory the kernel must map, a third of such a file's reading time)
                data = os.pread(fd, os.fstat(fd).st_size + 1, 0)
                os.lseek(fd, len(data), os.SEEK_SET)
            if data:  # read on to the end: a file may have grown, or read short
                parts = [data]
                while chunk := os.read(fd, _READ):
                    parts.append(chunk)
                if len(parts) > 1:
                    data = b"".join(parts)
        except OSError as exc:
            raise StoreError(
                f"receipt {receipt_id} could not be read: {exc.strerror}", code="receipt_store_io"
            ) from exc
        finally:
            os.close(fd)
        return data

    def again(self, receipt_id: str) -> bytes | None:
        """The receipt's bytes found by the digests of the packs' bodies alone, or None (see
        :meth:`~.pack_window.PackWindow.again`): the verifier's second look when what this
        reader gave for ``receipt_id`` did not hold up (a pack's bytes are read where the
        index says, and the index is only a finding aid; a loose file is its own name's and
        has no second place)."""
        match = RECEIPT_ID.match(receipt_id)
        if match is None:
            return None
        if self._loose and os.path.lexists(f"{self._prefix}{match[1]}.json"):
            return None  # what was read is that file's: a pack's copy never stands in for it
        return self._shelf.again(match[1])

    def _open(self, name: str, flags: int) -> int:
        if self._dir is None:
            return os.open(f"{self._prefix}{name}", flags)
        return os.open(name, flags, dir_fd=self._dir)

    def close(self) -> None:
        """Close the folder's descriptor (reads after it go by full paths) and unmap packs."""
        self._shelf.close()
        if self._dir is not None:
            os.close(self._dir)
            self._dir = None


def _has_loose(folder: str) -> bool:
    """Whether ``folder`` holds a receipt file ``<hex>.json`` (looked for until the first one:
    a store of packs holds a handful of names, a folder of loose files has one at once). A
    folder that cannot be listed is taken to hold some, so each read says why it fails."""
    try:
        with os.scandir(folder or ".") as entries:
            for entry in entries:
                name = entry.name
                if len(name) == 69 and name.endswith(".json") and RECEIPT_ID.match(name[:64]):
                    return True
    except OSError:
        return True
    return False

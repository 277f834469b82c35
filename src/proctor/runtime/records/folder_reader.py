"""Read the receipt files of one folder, fast, for `proctor verify` (see FolderReader)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from proctor.errors import StoreError

__all__ = ["FolderReader"]

_ID = re.compile(r"\A(?:sha256:)?([0-9a-f]{64})\Z")


class FolderReader:
    """Reads ``<hex>.json`` files of one folder for the verifier (a loader callable).

    os.open/os.read rather than Path.read_bytes: a tree is up to 30,002 small files, and the
    plain calls take less than half the time per file. Names are opened relative to a
    descriptor of the folder (held open while verifying), which spares the kernel walking the
    folder's path again for every file; a folder that cannot be opened is read by full paths,
    so a missing one still reads as "no such receipt".
    """

    __slots__ = ("_dir", "_prefix")

    _FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)

    def __init__(self, directory: Path) -> None:
        self._prefix = os.path.join(os.fspath(directory), "")
        self._dir: int | None = None
        if os.open in os.supports_dir_fd:
            try:
                self._dir = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            except OSError:
                self._dir = None

    def __call__(self, receipt_id: str) -> bytes | None:
        match = _ID.match(receipt_id)
        if match is None:
            return None
        try:
            if self._dir is None:
                fd = os.open(f"{self._prefix}{match.group(1)}.json", self._FLAGS)
            else:
                fd = os.open(f"{match.group(1)}.json", self._FLAGS, dir_fd=self._dir)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(
                f"receipt {receipt_id} could not be read: {exc.strerror}", code="receipt_store_io"
            ) from exc
        try:
            data = os.read(fd, 1 << 16)
            if data:  # read on to the end: a receipt may be larger than one read
                parts = [data]
                while chunk := os.read(fd, 1 << 16):
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

    def close(self) -> None:
        """Close the folder's descriptor (reads after it go by full paths)."""
        if self._dir is not None:
            os.close(self._dir)
            self._dir = None

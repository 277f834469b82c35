"""The package files :func:`proctor.runtime.skills.read_package` read before, kept by identity.

Every run reads its package to record its digest; a file whose stat identity (device, inode,
size, modification and change times in nanoseconds) is the one it had when it was read, and
whose last change came at least :data:`RACY_NS` before that read began, is not read again:
its digest (and, for SKILL.md and run.yaml, its text) is the one kept.

Why that is safe (git's rule for "racily clean" index entries is the precedent): a write to a
file sets its change time (``ctime``), which no call can set back, to the file system's clock
at the write. A write after the read began is stamped at or after that moment, less at most
one tick of the file system's clock, so it is stamped later than a change that came
:data:`RACY_NS` before the read, and the identity differs. A file changed within
:data:`RACY_NS` of its read (the write might share its tick) is read again on every load
until its entry is made later than that. A file replaced by a rename is another inode.

What it rests on: the file system's clock ticks, and lags this host's clock, by less than
:data:`RACY_NS` (3 s: coarse kernel ticks, and one-second and two-second time stamps, are
covered; a network file system whose server's clock runs behind is not).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

__all__ = ["RACY_NS", "SeenFiles"]

RACY_NS = 3_000_000_000
"""How long before a read a file's last change must be for the read to be kept."""


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class SeenFiles:
    """Digests (and texts) of files read before, by path, the most recent ``limit`` kept."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._entries: OrderedDict[str, tuple[tuple[int, ...], int, str, str | None]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, path: str, st: os.stat_result, *, text: bool) -> tuple[str, str | None] | None:
        """The ``(digest, text)`` kept for ``path`` when ``st`` (its ``lstat`` now) is the
        identity it was read with and its last change came :data:`RACY_NS` before that read;
        ``None`` otherwise (and when ``text`` is wanted but none was kept)."""
        with self._lock:
            entry = self._entries.get(path)
        if entry is None or entry[0] != _identity(st) or (text and entry[3] is None):
            return None
        if max(st.st_mtime_ns, st.st_ctime_ns) >= entry[1] - RACY_NS:
            return None  # changed too close to its read: the read may have missed a write
        return entry[2], entry[3]

    def put(
        self, path: str, st: os.stat_result, made_ns: int, digest: str, text: str | None
    ) -> None:
        """Keep what a read begun at ``made_ns`` (this host's clock, taken before the file was
        opened) found in the file ``st`` describes (its ``fstat`` before it was read)."""
        with self._lock:
            self._entries[path] = (_identity(st), made_ns, digest, text)
            self._entries.move_to_end(path)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)

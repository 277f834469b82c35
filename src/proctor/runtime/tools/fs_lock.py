"""Write locks: one exclusive ``flock`` per resolved path, so a digest check and the replace it
guards are one step for every proctor process writing that file.

A change that checks a digest (``fs.write``, ``fs.edit``, ``fs.apply_bundle``, ``fs.delete``,
``fs.restore``, and a crashed bundle's rollback) takes the lock of every path it changes, reads
the file's current digest under it, and replaces the file before letting go. Two runs racing to
change one version of a file therefore never both succeed: the second one reads the first
one's result under the lock and is refused ``stale_digest`` with that current digest.

The lock files live in ``.proctor/locks/`` of the workspace, named by the SHA-256 of the real
path they guard (so every spelling of one file, and every root holding it, share one lock); a
bundle takes its locks in the order of those names, so two bundles never wait on each other.
Lock files are empty, left in place (removing one while another process waits on it would let
a third take a fresh lock beside it), and released by the kernel when their holder dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterable, Iterator

from proctor.runtime.boundary.fds import DIR_FLAGS, open_below
from proctor.runtime.boundary.workspace import Resolved, Workspace
from proctor.runtime.tools.fsutil import io_refusal

__all__ = ["LOCK_DIR", "lock_name", "locked"]

LOCK_DIR = "locks"
"""The folder under ``.proctor/`` that holds the lock files."""

_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def lock_name(target: Resolved) -> str:
    """The lock file name of ``target``: the SHA-256 of its real absolute path."""
    return hashlib.sha256(os.fsencode(str(target.abs))).hexdigest() + ".lock"


@contextlib.contextmanager
def locked(ws: Workspace, targets: Iterable[Resolved]) -> Iterator[None]:
    """Hold the exclusive lock of every path in ``targets`` (taken in the order of the lock
    names, each once) until the block ends.

    Raises:
        RefusedCall: ``state_dir_unsafe`` (``.proctor/locks`` is not a real folder),
            ``path_changed`` / ``io_error`` when a lock file cannot be opened.
    """
    names = sorted({lock_name(t) for t in targets})
    ws.private_dir(LOCK_DIR)
    held: list[int] = []
    try:
        folder = open_below(str(ws.root), f".proctor/{LOCK_DIR}", DIR_FLAGS)
    except OSError as exc:
        raise io_refusal(exc, f".proctor/{LOCK_DIR}") from exc
    try:
        try:
            for name in names:
                fd = os.open(name, _LOCK_FLAGS, 0o600, dir_fd=folder)
                held.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            raise io_refusal(exc, f".proctor/{LOCK_DIR}") from exc
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)  # closing the last descriptor of the file releases its lock
        os.close(folder)

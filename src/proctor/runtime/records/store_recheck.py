"""The full check of a large run store, in a process of its own (:mod:`.store_check` starts
it): ``python -m proctor.runtime.records.store_recheck STORE``."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path

from proctor.errors import StoreError
from proctor.runtime.records import store_check, store_file

__all__ = ["full_check"]


def full_check(path: Path) -> int:
    """``PRAGMA quick_check`` of the whole store under its check lock, then the mark (a pass,
    the file unchanged meanwhile: :func:`.store_file.check_now`) or a damage record
    (:func:`.store_check.record_damage`). Exit status 0 for a pass, or when another process is
    making the check; 1 for damage."""
    lock = path.with_name(path.name + store_check.LOCK_SUFFIX)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0
        try:
            store_file.check_now(path, path.name)
        except StoreError as exc:
            if exc.code == "store_corrupt" and os.path.exists(path):
                store_check.record_damage(path, exc.message)
                return 1
        return 0
    finally:
        os.close(fd)


if __name__ == "__main__":
    with contextlib.suppress(OSError):
        os.setsid()  # a Ctrl-C of the command that started it does not stop the check
    raise SystemExit(full_check(Path(sys.argv[1])))

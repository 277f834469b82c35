"""The run store's check when its file changed outside proctor: bounded on the command's path.

A store whose file no longer matches the mark of its last passing check (:mod:`.store_file`)
is checked before it is used. ``PRAGMA quick_check`` reads the whole file (12 s for a store of
1,000,000 runs), so a command runs it only on a file of at most :data:`INLINE_MAX` bytes
(about 20 ms). A larger file gets :func:`bounded_check` on the command's path, which reads a
fixed number of pages whatever the file's size, and a full ``quick_check`` in a process of its
own (:func:`start_full_check`, one at a time per store): a pass marks the file as a check
made on the command's path does; damage found is recorded beside the store
(``runs.sqlite-damaged``) and every later opener refuses the store ``store_corrupt`` until
it is moved aside or restored (another file) or ``proctor check`` passes it.

What the bounded check finds at once: a file that is not an SQLite database or is empty (as
every opener), a store cut short or grown (the size its header records, against the file's),
a damaged header or schema page, a page size SQLite would not write, and damage on the pages
a command reads first (the path to the newest run). Damage inside older pages is found by the
full check, in the background or by ``proctor check``; a command that reads such a page
before then is refused ``store_corrupt`` by SQLite itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from proctor.errors import StoreError

__all__ = [
    "DAMAGE_SUFFIX",
    "INLINE_MAX",
    "LOCK_SUFFIX",
    "bounded_problem",
    "clear_damage",
    "record_damage",
    "refuse_recorded_damage",
    "start_full_check",
]

INLINE_MAX = 32 * 2**20
"""A changed store up to this size is checked whole on the command's path (~20 ms)."""
DAMAGE_SUFFIX = "-damaged"
"""Damage a full check found is recorded beside the store under its name and this suffix."""
LOCK_SUFFIX = "-checking"
"""The lock a full check holds, beside the store under its name and this suffix."""
_RECORD_MAX = 4096


def _damage_path(path: Path) -> Path:
    return path.with_name(path.name + DAMAGE_SUFFIX)


def refuse_recorded_damage(path: Path, shown: str) -> None:
    """Refuse a store whose file a full check found damaged (the same file: device and inode).

    Raises:
        StoreError: ``store_corrupt`` with what the check found.
    """
    try:
        with open(_damage_path(path), "rb") as handle:
            data = handle.read(_RECORD_MAX + 1)
        doc = json.loads(data) if len(data) <= _RECORD_MAX else {}
        info = os.stat(path)
    except (OSError, ValueError, RecursionError):
        return
    if not isinstance(doc, dict) or doc.get("file") != [info.st_dev, info.st_ino]:
        return  # another file now stands there (moved aside, restored): it is checked anew
    found = str(doc.get("problems") or "")
    raise StoreError(
        found or f"the run store {shown} cannot be used: a full check found damage",
        code="store_corrupt",
    )


def record_damage(path: Path, problems: str) -> None:
    """Record that a full check of the file at ``path`` found ``problems`` (the refusal's
    message), whole or not at all: a temporary file renamed over the record."""
    info = os.stat(path)
    record = _damage_path(path)
    tmp = record.with_name(f".{record.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    body = json.dumps({"file": [info.st_dev, info.st_ino], "problems": problems[:1000]})
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, body.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, record)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def clear_damage(path: Path) -> None:
    """Forget recorded damage (a full check just passed the file)."""
    with contextlib.suppress(OSError):
        os.unlink(_damage_path(path))


def bounded_problem(conn: sqlite3.Connection, path: Path) -> str | None:
    """What the bounded check of a large changed store finds wrong (``None``: nothing), a
    fixed number of pages read whatever the file's size.

    Raises:
        sqlite3.Error: SQLite refused a page it read (the caller translates it).
    """
    size = os.stat(path).st_size
    with open(path, "rb") as handle:
        header = handle.read(100)
    if len(header) < 100:
        return "its header is cut short"
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        return f"its header names a page size SQLite never writes ({page})"
    pages = int.from_bytes(header[28:32], "big")
    # the page count in the header holds when the change counter matches its version stamp
    if header[24:28] == header[92:96] and pages and pages * page != size:
        return (
            f"its header records {pages * page} bytes but the file has {size}: it was cut"
            " short or grown outside SQLite"
        )
    if size % page:
        return f"its size ({size} bytes) is not a whole number of pages"
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = {"runs", "calls", "steps", "events", "requests"} - names
    if missing:
        return f"its schema lacks the tables {sorted(missing)}"
    conn.execute("SELECT max(cursor) FROM runs").fetchall()  # the path to the newest run
    conn.execute("SELECT * FROM runs ORDER BY cursor DESC LIMIT 1").fetchall()
    return None


def start_full_check(path: Path) -> None:
    """Run the full check of ``path`` in a process of its own, unless one is running already
    (its lock held); the command goes on without waiting."""
    lock = path.with_name(path.name + LOCK_SUFFIX)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a check of this store is under way
        os.close(fd)
        return
    fcntl.flock(fd, fcntl.LOCK_UN)  # the checker takes it (a gap another opener may win)
    os.close(fd)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proctor.runtime.records.store_recheck", os.fspath(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )  # no start_new_session: it costs the vfork (~20 ms); the checker calls setsid
    except OSError:
        return  # the next opener starts it; proctor check runs it in any case
    threading.Thread(target=proc.wait, name="store-check-reaper", daemon=True).start()

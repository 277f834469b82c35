"""Opening a run store's file: a new one is built whole, an existing one is checked first.

A new store is built under a temporary name (schema, WAL mode, ``user_version``) and hard-linked
into place, so a store file that exists is always a whole store: proctor never initialises a
file it did not just build, and a zero-length file is damage, not a fresh store. (The
temporary file of a builder killed midway is removed by the next open.) An existing file is
refused ``store_corrupt`` when it is empty, not a regular file, not an SQLite database, or
fails ``PRAGMA quick_check``; a file (or folder) this process may not read or write is
refused ``store_unreadable`` with the cause, since the store may be whole.

The check reads the whole file (about 25 ms for a 40 MiB store, 120 ms for 200 MiB, with the
file in the page cache: ``bench/store_open.py``), so it is not paid on every command. After
a check passes, a mark beside the store (``runs.sqlite-checked``) records the file as the
check saw it: device, inode, size, and the modification and change times the kernel keeps,
which no write to the file leaves as they were. An opener whose file still matches the mark
skips the scan; any other change (a byte written by another program, a restore, a copy over
it) fails the match and the file is checked again. proctor's own changes to the file are
checkpoints of its write-ahead log, which the last connection to close makes: a closing
process that finds the file as the mark left it closes, and marks the file its checkpoint
left. A process that stops without closing, or a checkpoint made while the store stays open,
leaves the mark behind and the next opener checks. A mark older than a day is checked again
whatever it matches, for damage no write makes (a failing disk). Within one process the
check runs once per store file (by device and inode).

What a mark cannot see: a change that lands in the instant between a closing process's look
at the file and its checkpoint, and, on kernels older than Linux 6.13 that keep coarse change
times, a same-size write within one clock tick (a few milliseconds) of a mark.

A file larger than :data:`.store_check.INLINE_MAX` whose mark does not match gets a bounded
check on the opener's path and the full one in a process of its own (:mod:`.store_check`).

Messages name the store as the caller shows it (relative to the workspace), never by its
absolute path.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from proctor.contracts import json_strict
from proctor.errors import ParseError, StoreError
from proctor.runtime.testhooks import kill_point

__all__ = [
    "MARK_SUFFIX",
    "RECHECK_AFTER_S",
    "WRITE_FAULTS",
    "check_now",
    "check_once",
    "close_marked",
    "create_whole",
    "damaged",
    "private_folders",
    "refuse_damaged",
    "refuse_unwritable",
    "run_stopped_by",
    "run_store_path",
    "translate",
    "translate_os",
    "translate_write",
    "unusable",
]


def private_folders(folder: Path) -> None:
    """Create ``folder`` and each missing folder above it with mode 0700 (a workspace's
    ``.proctor/`` holds its run store, audit log and receipts: only its owner reads them).
    Folders that already exist keep their mode.

    Raises:
        OSError: a level cannot be created.
    """
    missing: list[Path] = []
    level = folder
    while not level.exists() and level != level.parent:
        missing.append(level)
        level = level.parent
    for level in reversed(missing):
        with contextlib.suppress(FileExistsError):
            level.mkdir(mode=0o700)


_CHECKED: set[tuple[int, int]] = set()
_CHECKED_LOCK = threading.Lock()

# What SQLite answers for a file it cannot use as a database (result code names).
_DAMAGED = {
    "SQLITE_CORRUPT": "it is damaged",
    "SQLITE_NOTADB": "it is not an SQLite database",
}
# What SQLite answers when the file may be whole but this process may not use it: never
# advice to move a healthy store aside.
_UNUSABLE = {
    "SQLITE_CANTOPEN": "it cannot be opened",
    "SQLITE_READONLY": "it cannot be written",
    "SQLITE_IOERR": "it cannot be read",
    "SQLITE_PERM": "it cannot be read",
}


def damaged(shown: str, why: str) -> StoreError:
    """The ``store_corrupt`` refusal of the store shown as ``shown``."""
    return StoreError(
        f"the run store {shown} cannot be used: {why}. Nothing was written to it; move it"
        " aside (or restore it from a backup) and run again to start a new store",
        code="store_corrupt",
    )


def unusable(shown: str, why: str) -> StoreError:
    """The ``store_unreadable`` refusal: the store (or its folder) may be whole, but this
    process may not read or write it; the cause is named, the store is left as it is."""
    return StoreError(
        f"the run store {shown} cannot be used: {why}. Nothing was written to it and it may"
        " well be whole: give this user read and write access to it and to its folder (or"
        " make the file system writable), then run again",
        code="store_unreadable",
    )


def translate(exc: sqlite3.Error, shown: str) -> StoreError:
    """An SQLite error met while opening: ``store_corrupt`` when the file is damaged,
    ``store_unreadable`` when it cannot be read or written here."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name in _DAMAGED:
        return damaged(shown, f"{_DAMAGED[name]} ({exc})")
    if name in _UNUSABLE:
        return unusable(shown, f"{_UNUSABLE[name]} ({exc})")
    return StoreError(f"cannot open the run store {shown}: {exc}")


def translate_write(exc: sqlite3.Error) -> StoreError:
    """An SQLite error met while a run is recorded: ``store_full`` for a full disk (or a file
    size limit), ``store_error`` otherwise. The run's driver names the run and how to go on
    (``proctor resume RUN_ID -``) when it meets either."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR"):
        return StoreError(
            f"the run store cannot be written ({exc}): its disk is full or failing",
            code="store_full" if name == "SQLITE_FULL" else "store_unwritable",
        )
    return StoreError(f"run store error: {exc}")


WRITE_FAULTS = frozenset({"store_full", "store_unwritable", "receipt_store_io"})
"""The codes of a store that stopped taking writes mid-run: the run is named with the way on."""


def run_stopped_by(exc: StoreError, run_id: str) -> StoreError:
    """``exc`` (one of :data:`WRITE_FAULTS`) as the refusal that names the run it stopped and
    how to continue it once the disk has room; any other error unchanged."""
    if exc.code not in WRITE_FAULTS:
        return exc
    return StoreError(
        f"run {run_id} stopped: {exc.message}. Nothing recorded so far is lost; free space"
        f" (or fix the disk), then continue it with `proctor resume {run_id} -` and the"
        " document {}",
        code=exc.code,
        details={**exc.details, "run_id": run_id},
    )


def translate_os(exc: OSError, shown: str) -> StoreError:
    """An ``OSError`` met while opening: ``store_unreadable`` for a refused access or a
    read-only file system, ``store_full`` for a full disk, ``store_error`` otherwise."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return unusable(shown, f"it or its folder cannot be written ({exc.strerror})")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StoreError(
            f"the run store {shown} cannot be opened: {exc.strerror}; free some space and"
            " run again",
            code="store_full",
        )
    return StoreError(f"cannot open the run store {shown}: {exc.strerror}")


def refuse_unwritable(path: Path, shown: str) -> None:
    """Refuse a store this process may read but not write, or whose folder it may not write
    (SQLite's write-ahead log needs files beside the store), naming the real cause.

    Raises:
        StoreError: ``store_unreadable``.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise unusable(shown, f"it cannot be written ({exc.strerror})") from exc
        return  # refuse_damaged and SQLite name anything else
    os.close(fd)
    folder = path.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        cause = "Read-only file system" if read_only else "Permission denied"
        raise unusable(shown, f"its folder cannot be written ({cause})")


def create_whole(path: Path, shown: str, build: Callable[[sqlite3.Connection], None]) -> bool:
    """Build a new store at ``path`` with ``build`` (inside one transaction, WAL mode) unless a
    file is there; False when one is (an existing store, or another opener's new one).

    Raises:
        StoreError: ``store_corrupt`` when the store file is gone but its write-ahead log is
            not (SQLite would replay that log into the new file).
        OSError, sqlite3.Error: the folder refused the new file.
    """
    _sweep(path)
    # The log is looked at before the store: another opener may link its new store and write
    # its first log in between, and a log seen first, with no store after it, is left over.
    wal_left = _log_left(path)
    if os.path.lexists(path):
        return False
    if wal_left:
        raise _left_log_refusal(path, shown)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.new")
    try:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            build(conn)
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        info = tmp.stat()
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        _fsync_dir(path.parent)
        kill_point("store.created")
        with _CHECKED_LOCK:
            _CHECKED.add((info.st_dev, info.st_ino))
    finally:
        for name in (tmp.name, tmp.name + "-wal", tmp.name + "-shm"):
            tmp.with_name(name).unlink(missing_ok=True)
    # Built whole just now, so as good as checked; marked only once the temporary name is gone
    # (dropping that link changes the file's change time).
    with contextlib.suppress(OSError):
        built = os.stat(path)
        if (built.st_dev, built.st_ino) == (info.st_dev, info.st_ino):
            _write_mark(path, _identity(built), time.time())
    return True


def _sweep(path: Path) -> None:
    """Remove the temporary stores of builders that died (killed between building and
    cleaning up); a live builder's are left alone. Linked or not, the store's own name is
    never one of them."""
    prefix = f".{path.name}."
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(prefix) and ".new" in n]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) :].split(".", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        (path.parent / name).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def refuse_damaged(path: Path, shown: str) -> None:
    """Refuse a store file SQLite would silently take as a new, empty database.

    Raises:
        StoreError: ``store_corrupt``: gone, a folder, not a regular file, zero-length;
            ``store_unreadable``: this process may not read it.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError as exc:
        raise damaged(shown, "it disappeared while it was being opened") from exc
    if stat.S_ISDIR(info.st_mode):
        raise damaged(shown, "it is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise damaged(shown, "it is not a regular file")
    if info.st_size == 0:
        raise damaged(shown, "it is an empty (zero-length) file")
    try:
        with open(path, "rb") as handle:
            handle.read(16)
    except OSError as exc:
        raise unusable(shown, f"it cannot be read ({exc.strerror})") from exc


def check_once(conn: sqlite3.Connection, path: Path, shown: str) -> None:
    """``PRAGMA quick_check`` of an open store, the first time this process opens its file,
    unless the file is still as the mark of its last passing check (or of proctor's own last
    checkpoint after one) records it, and that check is less than a day old. A file larger
    than :data:`.store_check.INLINE_MAX` gets the bounded check here and the full one in a
    process of its own (:mod:`.store_check`); damage a full check recorded is refused.

    Raises:
        StoreError: ``store_corrupt`` naming the first problems quick_check found.
        sqlite3.Error: SQLite refused to read it (the caller translates it).
    """
    from proctor.runtime.records import store_check

    # damage a full check recorded is refused on every open, also in a process that opened
    # the store before the check ended (a console, a worker)
    store_check.refuse_recorded_damage(path, shown)
    info = os.stat(path)
    key = (info.st_dev, info.st_ino)
    with _CHECKED_LOCK:
        if key in _CHECKED:
            return
    seen = _identity(info)
    mark = _read_mark(path)
    now = time.time()
    if mark is not None and mark[0] == seen and 0 <= now - mark[1] < RECHECK_AFTER_S:
        with _CHECKED_LOCK:
            _CHECKED.add(key)
        return
    if info.st_size > store_check.INLINE_MAX:  # bounded here, the whole file off the path
        problem = store_check.bounded_problem(conn, path)
        if problem is not None:
            raise damaged(shown, problem)
        with _CHECKED_LOCK:
            _CHECKED.add(key)
        store_check.start_full_check(path)
        return
    _quick_check(conn, shown)
    with _CHECKED_LOCK:
        _CHECKED.add(key)
    _mark_unchanged(path, seen, now)


def check_now(path: Path, shown: str) -> bool:
    """``PRAGMA quick_check`` of the store at ``path`` whatever its mark says (``proctor
    check``), marking the file on a pass; False when there is no store there yet (none is
    made). Nothing is written to the store.

    Raises:
        StoreError: ``store_corrupt`` as an opener refuses it (see :func:`refuse_damaged`), or
            naming the first problems quick_check found.
    """
    if not os.path.lexists(path):
        if _log_left(path):
            raise _left_log_refusal(path, shown)
        return False
    refuse_damaged(path, shown)
    try:
        from urllib.parse import quote

        # mode=rw: a store removed meanwhile is an error here, never a new empty file
        uri = f"file:{quote(os.fspath(path))}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise translate(exc, shown) from exc
    try:
        seen = _identity(os.stat(path))
        _quick_check(conn, shown)
    except sqlite3.Error as exc:
        conn.close()
        raise translate(exc, shown) from exc
    except BaseException:
        conn.close()
        raise
    _mark_unchanged(path, seen, time.time())
    close_marked(conn, path)
    from proctor.runtime.records.store_check import clear_damage

    clear_damage(path)  # recorded damage of this file no longer holds
    return True


def _quick_check(conn: sqlite3.Connection, shown: str) -> None:
    """Raises StoreError ``store_corrupt`` naming the first problems ``PRAGMA quick_check``
    finds (sqlite3.Error when SQLite refuses to read the file at all)."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    problems = [str(row[0]) for row in rows if str(row[0]) != "ok"]
    if problems:
        raise damaged(shown, f"PRAGMA quick_check found damage ({'; '.join(problems[:3])})")


def _log_left(path: Path) -> bool:
    """Whether the store's write-ahead log holds anything (SQLite would replay it into a new
    file of the store's name)."""
    wal = path.with_name(path.name + "-wal")
    return wal.exists() and wal.stat().st_size > 0


def _left_log_refusal(path: Path, shown: str) -> StoreError:
    return damaged(shown, f"the store file is gone but its write-ahead log {path.name}-wal is left")


def _mark_unchanged(path: Path, seen: tuple[int, ...], checked_at: float) -> None:
    """Mark the file as checked when it is still ``seen`` (another opener may have
    checkpointed it while the check ran: then it is left for the next opener to check)."""
    with contextlib.suppress(OSError):
        if _identity(os.stat(path)) == seen:
            _write_mark(path, seen, checked_at)


MARK_SUFFIX = "-checked"
"""The mark of a store's last passing check sits beside it under its name and this suffix
(hidden from runs and refused to them like the store's other companions)."""

RECHECK_AFTER_S = 24 * 3600
"""How long a mark spares the check: damage that no write makes (a failing disk) leaves the
file's times as they were, so a mark older than this is checked again whatever it matches."""

_MARK_MAX = 4096


def _identity(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _mark_path(path: Path) -> Path:
    return path.with_name(path.name + MARK_SUFFIX)


def _read_mark(path: Path) -> tuple[tuple[int, ...], float] | None:
    """The file identity and check time a mark records; ``None`` for no mark, or one that is
    unreadable, too large or not of the expected shape (the store is then checked)."""
    try:
        with open(_mark_path(path), "rb") as handle:
            data = handle.read(_MARK_MAX + 1)
        # strict: a mark with a key twice is no mark this wrote (the store is checked)
        doc = json_strict.loads(data, source="mark") if len(data) <= _MARK_MAX else None
    except (OSError, ParseError):
        return None
    if not isinstance(doc, dict):
        return None
    file, checked = doc.get("file"), doc.get("checked_at")
    if not isinstance(file, list) or len(file) != 5 or not all(type(n) is int for n in file):
        return None
    if type(checked) is not int and type(checked) is not float:
        return None
    return tuple(file), float(checked)


def _write_mark(path: Path, seen: tuple[int, ...], checked_at: float) -> None:
    """Record ``seen`` as checked at ``checked_at``, whole or not at all (a temporary file
    renamed over the mark). Not synced: a mark lost to a crash costs one check, no more.

    Raises:
        OSError: the folder refused the file (callers go on without a mark).
    """
    mark = _mark_path(path)
    tmp = mark.with_name(f".{mark.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    body = json.dumps({"file": list(seen), "checked_at": checked_at}).encode()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, body)
        finally:
            os.close(fd)
        os.replace(tmp, mark)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def close_marked(conn: sqlite3.Connection, path: Path) -> None:
    """Close ``conn``; when the store file was as its mark records just before, mark the file
    as the close left it (the last connection to close checkpoints the write-ahead log into
    it, proctor's own writes only). A file the mark does not match keeps its mark, and its
    next opener checks it.
    """
    try:
        before = _identity(os.stat(path))
    except OSError:
        conn.close()
        return
    mark = _read_mark(path)
    conn.close()
    if mark is None or mark[0] != before:
        return
    with contextlib.suppress(OSError):
        after = _identity(os.stat(path))
        if after != before:
            _write_mark(path, after, mark[1])


def run_store_path(state_dir: Path, environ: Mapping[str, str]) -> Path:
    """``PROCTOR_DATABASE_PATH``, else ``runs.sqlite`` in the workspace's state folder (where
    :attr:`proctor.runtime.engine.session.Session.store` and ``audit verify`` look)."""
    named = environ.get("PROCTOR_DATABASE_PATH")
    return Path(named) if named else state_dir / "runs.sqlite"

"""Closing a run store without a checkpoint while its write-ahead log is small.

The last SQLite connection to close a WAL database checkpoints the log into the file and
deletes it: two syncs (the log, then the file) on every command's way out, and, since the log
is then gone, a third and fourth (the new log's header and its folder) on the next command's
first commit. A command that made one run paid four syncs for it that protect nothing its
commits had not already made durable: a commit is durable when it is in the log, and the log
is replayed by the next opener whether or not a checkpoint happened.

So a store closes with ``SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`` while its log holds less than
:data:`KEEP_WAL_BYTES` (a quarter of ``wal_autocheckpoint``'s 4,000 pages): the log and its
index stay beside the file for the next command to append to. Once it holds more, the close
checkpoints as before (two syncs, once per few hundred runs), so the log never grows past what
the autocheckpoint keeps it to, and a checkpoint on the command's path stays as rare as it was
(the store's mark, which a checkpoint made while the store is open invalidates, is kept: a
close without a checkpoint leaves the file as its mark records it, see :mod:`.store_file`).

Python 3.12 sets the flag with ``Connection.setconfig``; on 3.11 it is set through the
library's ``sqlite3_db_config`` by ``ctypes``, on the connection's handle only once
``sqlite3_db_filename`` confirms the handle is this store's. Where neither works, the close
checkpoints as it always did.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from pathlib import Path

__all__ = ["KEEP_WAL_BYTES", "keep_wal_on_close"]

KEEP_WAL_BYTES = 4 << 20
"""Below this size the log is kept at close (no checkpoint); at or above it, checkpointed."""
_NO_CKPT_ON_CLOSE = 1006  # SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE (SQLite 3.16+)


def keep_wal_on_close(conn: sqlite3.Connection, path: Path) -> bool:
    """Set ``conn`` to close without checkpointing when the store's log is small; True when
    the close will keep the log (False: it checkpoints, as SQLite does by default)."""
    try:
        if os.stat(f"{path}-wal").st_size >= KEEP_WAL_BYTES:
            return False
    except OSError:
        return False  # no log to keep
    setconfig = getattr(conn, "setconfig", None)
    if setconfig is not None:  # Python 3.12+
        with contextlib.suppress(sqlite3.Error, ValueError, TypeError):
            setconfig(_NO_CKPT_ON_CLOSE, True)
            return bool(conn.getconfig(_NO_CKPT_ON_CLOSE))  # type: ignore[attr-defined]
        return False
    if sys.platform != "linux":  # the call below passes variadic arguments as fixed ones,
        return False  # which only the Linux calling conventions read the same way
    try:
        return _set_by_handle(conn, path)
    except (OSError, AttributeError, ValueError, TypeError):
        return False


def _set_by_handle(conn: sqlite3.Connection, path: Path) -> bool:
    """Python 3.11: ``sqlite3_db_config`` on the ``sqlite3 *`` the connection object holds
    first after its object header, once the handle names this store's file."""
    import _sqlite3
    import ctypes

    lib = ctypes.CDLL(_sqlite3.__file__)  # its dependencies (libsqlite3) are searched too
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if not handle:
        return False
    filename = lib.sqlite3_db_filename
    filename.restype = ctypes.c_char_p
    filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    named = filename(handle, b"main")
    if not named or not os.path.samefile(os.fsdecode(named), path):
        return False
    result = ctypes.c_int(-1)
    config = lib.sqlite3_db_config
    config.restype = ctypes.c_int
    done = config(
        ctypes.c_void_p(handle),
        ctypes.c_int(_NO_CKPT_ON_CLOSE),
        ctypes.c_int(1),
        ctypes.byref(result),
    )
    return done == 0 and result.value == 1

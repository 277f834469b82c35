"""Closing the SQLite run store: a small write-ahead log is kept (no checkpoint, no syncs on
the command's way out), a large one is checkpointed; either way every commit is there for the
next opener, and the store's check mark stays valid."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.runtime.records import sqlite_close
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.records.store_file import MARK_SUFFIX


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def test_a_small_log_is_kept_at_close_and_read_by_the_next_opener(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    store.create_run(RunRecord(run_id="r1", skill="s", method="m"))
    store.close()
    assert _wal(path).stat().st_size > 0  # not checkpointed into the file
    mark = (tmp_path / f"runs.sqlite{MARK_SUFFIX}").read_bytes()
    size = path.stat().st_size
    again = SQLiteRunStore(path)
    try:
        record = again.get_run("r1")
        assert record is not None and record.skill == "s"
    finally:
        again.close()
    assert path.stat().st_size == size
    # the file is as its mark records: the next opener is not made to check it again
    assert (tmp_path / f"runs.sqlite{MARK_SUFFIX}").read_bytes() == mark


def test_a_kept_log_survives_a_process_killed_after_its_commit(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    SQLiteRunStore(path).close()
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from proctor.runtime.records.runs import RunRecord\n"
        "from proctor.runtime.records.sqlite import SQLiteRunStore\n"
        "s = SQLiteRunStore(Path(sys.argv[1]))\n"
        "s.create_run(RunRecord(run_id='killed', skill='s', method='m'))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], check=False)
    assert done.returncode == -9
    store = SQLiteRunStore(path)
    try:
        assert store.get_run("killed") is not None
    finally:
        store.close()


def test_a_large_log_is_checkpointed_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_close, "KEEP_WAL_BYTES", 1)
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    store.create_run(RunRecord(run_id="r1", skill="s", method="m"))
    store.close()
    assert not _wal(path).exists() or _wal(path).stat().st_size == 0
    again = SQLiteRunStore(path)
    try:
        assert again.get_run("r1") is not None
    finally:
        again.close()


def test_the_flag_is_only_set_on_the_store_it_names(tmp_path: Path) -> None:
    import sqlite3

    one, other = tmp_path / "one.sqlite", tmp_path / "other.sqlite"
    conn = sqlite3.connect(str(one), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    held = sqlite3.connect(str(other), isolation_level=None)
    held.execute("PRAGMA journal_mode=WAL")
    held.execute("CREATE TABLE t (x)")  # other's log exists too
    assert os.path.getsize(f"{other}-wal") > 0
    assert sqlite_close.keep_wal_on_close(conn, other) is False  # not its file: left alone
    conn.close()
    assert not os.path.exists(f"{one}-wal")  # checkpointed and removed, as SQLite does
    conn = sqlite3.connect(str(one), isolation_level=None)
    conn.execute("INSERT INTO t VALUES (1)")
    assert sqlite_close.keep_wal_on_close(conn, one) is True
    conn.close()
    assert os.path.getsize(f"{one}-wal") > 0
    held.close()

"""The run store's check is paid once per change, not once per command.

A passing ``PRAGMA quick_check`` leaves a mark beside the store recording the file as it was;
the next process whose file still matches skips the scan, and anything that wrote the file
since (another program, a checkpoint proctor did not mark) sends it through the check again.
Each case opens the store in a fresh interpreter, as a command does, and reports whether
quick_check ran there, read from SQLite's own statement trace.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import StoreError
from proctor.runtime.records import store_check, store_file
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore

CHILD = """
import json, os, sqlite3, sys
from pathlib import Path
seen = []
connect = sqlite3.connect
def traced(*args, **kwargs):
    conn = connect(*args, **kwargs)
    conn.set_trace_callback(seen.append)
    return conn
sqlite3.connect = traced
from proctor.errors import StoreError
from proctor.runtime.records import store_check
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore
# a test of the bounded check makes every store "large"
store_check.INLINE_MAX = int(os.environ.get("TEST_INLINE_MAX", store_check.INLINE_MAX))
try:
    store = SQLiteRunStore(Path(sys.argv[1]), shown="runs.sqlite")
except StoreError as exc:
    print(json.dumps({"refused": exc.code}))
    raise SystemExit(0)
checked = any("quick_check" in q for q in seen)
how = sys.argv[2] if len(sys.argv) > 2 else "close"
if how != "close":
    store.create_run(RunRecord(run_id="r-" + os.urandom(4).hex(), skill="s", method="m"))
if how == "checkpoint-and-leave":  # a checkpoint made while the store stays open
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
if how == "close" or how == "write-and-close":
    store.close()
print(json.dumps({"checked": checked}))
sys.stdout.flush()
os._exit(0)  # no close unless asked: as a process killed or ended without one
"""


def _open_in_child(path: Path, how: str = "close", *, large: bool = False) -> dict[str, object]:
    env = {**os.environ, "TEST_INLINE_MAX": "0"} if large else None
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), how],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return dict(json.loads(done.stdout))


def _store(path: Path, runs: int = 200) -> None:
    store = SQLiteRunStore(path)
    for n in range(runs):
        store.create_run(
            RunRecord(run_id=f"run-{n:04d}", skill="s", method="m", data={"pad": "x" * 300})
        )
    store.close()


def _mark(path: Path) -> Path:
    return path.with_name(path.name + store_file.MARK_SUFFIX)


def test_a_store_proctor_closed_is_not_scanned_by_the_next_command(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    assert _mark(path).exists()
    assert _open_in_child(path) == {"checked": False}
    assert _open_in_child(path, "write-and-close") == {"checked": False}
    assert _open_in_child(path) == {"checked": False}


def test_a_write_by_another_program_sends_the_store_through_the_check(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    with open(path, "r+b") as handle:  # the same byte written back: only the times change
        handle.seek(100)
        byte = handle.read(1)
        handle.seek(100)
        handle.write(byte)
    assert _open_in_child(path) == {"checked": True}
    assert _open_in_child(path) == {"checked": False}  # that check passed and marked the file


def test_damage_written_after_a_mark_is_refused_and_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    assert not path.with_name(path.name + "-wal").exists()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page : 2 * page] = random.Random(3).randbytes(page)  # page 2: a b-tree page
    with open(path, "r+b") as handle:  # in place: same inode, same size
        handle.seek(page)
        handle.write(data[page : 2 * page])
    assert _open_in_child(path) == {"refused": "store_corrupt"}
    assert path.read_bytes() == bytes(data)
    assert _open_in_child(path) == {"refused": "store_corrupt"}  # the mark never blessed it


def test_a_checkpoint_made_while_the_store_stays_open_is_checked_next_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    assert _open_in_child(path, "checkpoint-and-leave") == {"checked": False}
    assert _open_in_child(path) == {"checked": True}
    assert _open_in_child(path) == {"checked": False}


def test_a_process_that_leaves_without_closing_changes_nothing_the_mark_covers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    assert _open_in_child(path, "write-and-leave") == {"checked": False}  # its write: the log
    assert _open_in_child(path) == {"checked": False}
    store = SQLiteRunStore(path)
    assert len(store.list_runs(limit=500)) == 201  # the left log was replayed
    store.close()


def test_a_mark_older_than_a_day_is_checked_again(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    doc = json.loads(_mark(path).read_text())
    doc["checked_at"] = time.time() - store_file.RECHECK_AFTER_S - 60
    _mark(path).write_text(json.dumps(doc))
    assert _open_in_child(path) == {"checked": True}
    assert _open_in_child(path) == {"checked": False}


@pytest.mark.parametrize(
    "mark",
    [
        b"",
        b"{",
        b"[]",
        b'{"file": [1, 2], "checked_at": 1}',
        b'{"file": [1, 2, 3, 4, "5"], "checked_at": 1}',
        b'{"file": [1, 2, 3, 4, 5], "checked_at": "now"}',
        b"\xff\xfe",
        b" " * 5000,
        b"[" * 4000,
    ],
    ids=["empty", "torn", "list", "short", "text", "when", "bytes", "large", "deep"],
)
def test_a_mark_that_is_not_one_means_a_check(tmp_path: Path, mark: bytes) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    _mark(path).write_bytes(mark)
    assert _open_in_child(path) == {"checked": True}
    assert _open_in_child(path) == {"checked": False}


def test_a_mark_of_another_file_is_not_taken_for_this_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    mark = _mark(path).read_bytes()
    other = tmp_path / "copy.sqlite"
    other.write_bytes(path.read_bytes())
    os.replace(other, path)  # a copy put over it: another inode, whatever its content
    _mark(path).write_bytes(mark)
    assert _open_in_child(path) == {"checked": True}


def test_a_folder_that_refuses_the_mark_still_opens_the_store(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    _mark(path).unlink()
    _mark(path).mkdir()  # the mark's name is taken: nothing can be written there
    assert _open_in_child(path) == {"checked": True}
    assert _open_in_child(path) == {"checked": True}
    assert _mark(path).is_dir()


def test_the_in_process_open_after_damage_is_still_refused(tmp_path: Path) -> None:
    """A store damaged while no one holds it is refused by a new opener even though the file
    it replaced carried a mark (the damage here is a new file: another inode)."""
    path = tmp_path / "runs.sqlite"
    _store(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    data = bytearray(path.read_bytes())
    data[20:40] = b"\xff" * 20
    damaged = tmp_path / "new.sqlite"
    damaged.write_bytes(bytes(data))
    os.replace(damaged, path)
    with pytest.raises(StoreError) as info:
        SQLiteRunStore(path)
    assert info.value.code == "store_corrupt"


def _noise_on_root_of(path: Path, table: str) -> None:
    """Random bytes over the root page of ``table`` (an empty one no command reads first)."""
    conn = sqlite3.connect(path)
    [(root,)] = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
    conn.close()
    size = int.from_bytes(path.read_bytes()[16:18], "big")
    with open(path, "r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(random.Random(5).randbytes(size))


def _damage_recorded(path: Path) -> bool:
    """Wait (up to a deadline) for the background check to record damage of ``path``."""
    record = path.with_name(path.name + store_check.DAMAGE_SUFFIX)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if record.exists():
            return True
        time.sleep(0.05)
    return False


def test_a_large_changed_store_is_scanned_off_the_commands_path_and_damage_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    _noise_on_root_of(path, "journal")
    damaged = path.read_bytes()
    # the command's bounded check reads a fixed few pages, not the journal's: it goes on
    assert _open_in_child(path, large=True) == {"checked": False}
    # the full check it started finds the damage and records it; every opener then refuses
    assert _damage_recorded(path)
    assert _open_in_child(path, large=True) == {"refused": "store_corrupt"}
    assert _open_in_child(path) == {"refused": "store_corrupt"}
    assert path.read_bytes() == damaged  # left as it was
    with pytest.raises(StoreError) as info:  # proctor check finds it at once
        store_file.check_now(path, "runs.sqlite")
    assert info.value.code == "store_corrupt"


def test_a_large_store_cut_short_is_refused_by_the_bounded_check(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    _store(path)
    size = int.from_bytes(path.read_bytes()[16:18], "big")
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - size)
    assert _open_in_child(path, large=True) == {"refused": "store_corrupt"}


def test_a_large_store_moved_aside_leaves_its_damage_record_behind(tmp_path: Path) -> None:
    """A damage record names one file: a store restored in its place is not refused for it."""
    path = tmp_path / "runs.sqlite"
    _store(path)
    store_check.record_damage(path, "the run store runs.sqlite cannot be used: test")
    with pytest.raises(StoreError):
        store_check.refuse_recorded_damage(path, "runs.sqlite")
    restored = tmp_path / "restored.sqlite"
    restored.write_bytes(path.read_bytes())
    os.replace(restored, path)
    store_check.refuse_recorded_damage(path, "runs.sqlite")  # another inode: not refused
    assert _open_in_child(path, large=True)["checked"] is False


def test_damage_found_after_a_process_opened_the_store_is_refused_to_that_process(
    tmp_path: Path,
) -> None:
    """A long-lived process (a console, a worker) that checked the store before is refused
    once a full check recorded damage of the file."""
    path = tmp_path / "runs.sqlite"
    _store(path)  # opened and checked in this process
    SQLiteRunStore(path).close()
    store_check.record_damage(path, "the run store runs.sqlite cannot be used: a test")
    with pytest.raises(StoreError) as info:
        SQLiteRunStore(path)
    assert info.value.code == "store_corrupt" and "a test" in info.value.message
    store_file.check_now(path, "runs.sqlite")  # proctor check passes it: the record goes
    SQLiteRunStore(path).close()


@settings(max_examples=100, deadline=None)
@given(record=st.binary(max_size=200) | st.just(b'{"file": [1, 2], "problems": 3}'))
def test_a_damage_record_that_is_not_one_is_ignored_never_a_crash(record: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.sqlite"
        path.write_bytes(b"x")
        path.with_name(path.name + store_check.DAMAGE_SUFFIX).write_bytes(record)
        store_check.refuse_recorded_damage(path, "runs.sqlite")  # names no file: not refused

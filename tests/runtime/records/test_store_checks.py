"""A damaged run store is refused ``store_corrupt`` and never written; a new one is built whole.

Each case builds the damage on disk, then proves two things: opening refuses it with the code
and the path as the caller shows it (never an absolute path), and the file is byte-for-byte
what it was (proctor did not re-initialise it or write to it). The CLI cases also prove the
run's first step never ran.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore

REPO = Path(__file__).resolve().parents[3]
SHOWN = ".proctor/runs.sqlite"

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: write
        tool: fs.write
        inputs: {path: touched.txt, content: "ran\\n", create: true}
"""


def _refused(path: Path) -> StoreError:
    with pytest.raises(StoreError) as info:
        SQLiteRunStore(path, shown=SHOWN)
    assert info.value.code == "store_corrupt", info.value.message
    assert SHOWN in info.value.message
    assert str(path.parent) not in info.value.message
    return info.value


def _real_store(path: Path, runs: int = 300) -> None:
    store = SQLiteRunStore(path)
    for n in range(runs):
        store.create_run(
            RunRecord(run_id=f"run-{n:04d}", skill="s", method="m", data={"pad": "x" * 300})
        )
        store.append_event(f"run-{n:04d}", "started", {"n": n})
    store.close()  # the last connection checkpoints the WAL into the file


def _quick_check_fails(path: Path) -> bool:
    try:
        conn = sqlite3.connect(path)
    except sqlite3.DatabaseError:
        return True
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
        return rows != [("ok",)]
    except sqlite3.DatabaseError:
        return True
    finally:
        conn.close()


def test_a_zero_length_store_is_refused_not_taken_as_new(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.touch()
    error = _refused(path)
    assert "zero-length" in error.message
    assert path.stat().st_size == 0


def test_a_folder_where_the_store_should_be_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.mkdir()
    (path / "keep").write_text("mine")
    error = _refused(path)
    assert "folder" in error.message
    assert [p.name for p in path.iterdir()] == ["keep"]


def test_random_bytes_inside_a_real_store_are_refused(tmp_path: Path) -> None:
    original = tmp_path / "original.sqlite"
    _real_store(original)
    data = original.read_bytes()
    page = int.from_bytes(data[16:18], "big") or 65536
    pages = len(data) // page
    assert pages > 10
    rng = random.Random(12)
    damaged = tmp_path / "runs.sqlite"
    # Not every page breaks quick_check (a cell's payload can change unnoticed): find one in
    # the middle of the file that does, with SQLite itself as the judge.
    for number in sorted(range(2, pages), key=lambda n: abs(n - pages // 2)):
        noise = bytes(rng.randrange(256) for _ in range(page))
        broken = data[: (number - 1) * page] + noise + data[number * page :]
        damaged.write_bytes(broken)
        if _quick_check_fails(damaged):
            break
    else:
        pytest.fail("no page of the store made quick_check fail")
    for leftover in tmp_path.glob("runs.sqlite-*"):
        leftover.unlink()
    error = _refused(damaged)
    assert "damage" in error.message or "not an SQLite database" in error.message
    assert damaged.read_bytes() == broken


def test_another_programs_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    error = _refused(path)
    assert "another program" in error.message
    assert path.read_bytes() == before


def test_a_write_ahead_log_without_its_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    (tmp_path / "runs.sqlite-wal").write_bytes(b"\x37\x7f\x06\x82" + b"\0" * 60)
    _refused(path)
    assert not path.exists()


_HELD: list[sqlite3.Connection] = []


class _Racing(type(Path())):  # type: ignore[misc]
    """A path whose write-ahead log, when looked at, is made at that moment together with its
    store: another opener linking its new store and writing its first log right then."""

    def exists(self, *, follow_symlinks: bool = True) -> bool:
        if self.name.endswith("-wal") and not self.exists_plain():
            store = self.with_name(self.name.removesuffix("-wal"))
            SQLiteRunStore(Path(store)).close()  # a whole store, linked into place
            conn = sqlite3.connect(store)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA wal_autocheckpoint=0")
            conn.execute("CREATE TABLE other_opener (x)")  # its first write: the log grows
            _HELD.append(conn)  # held open, so closing does not fold the log away
        return self.exists_plain()

    def exists_plain(self) -> bool:
        return os.path.exists(self)


def test_a_store_another_opener_links_meanwhile_is_not_taken_for_a_left_log(
    tmp_path: Path,
) -> None:
    """The write-ahead log is looked at before the store: a store linked (and its log written)
    between the two looks is another opener's, not a log left without its store."""
    path = _Racing(tmp_path / "runs.sqlite")
    from proctor.runtime.records import store_file
    from proctor.runtime.records.sqlite_schema import build_schema

    wal = path.with_name("runs.sqlite-wal")
    try:
        assert not store_file.create_whole(path, "runs.sqlite", build_schema)
        assert wal.exists_plain() and wal.stat().st_size > 0 and path.exists_plain()
    finally:
        while _HELD:
            _HELD.pop().close()


def _open_at_once(path: Path, openers: int) -> list[BaseException]:
    start = threading.Barrier(openers)
    errors: list[BaseException] = []

    def open_it(n: int) -> None:
        start.wait()
        try:
            store = SQLiteRunStore(path)
            store.create_run(RunRecord(run_id=f"r{n}", skill="s", method="m"))
            store.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it, args=(n,)) for n in range(openers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_a_new_store_is_built_whole_by_exactly_one_of_many_openers(tmp_path: Path) -> None:
    """200 rounds of 6 threads opening one missing store: none sees a half-made file."""
    for round_ in range(200):
        path = tmp_path / f"r{round_}" / "runs.sqlite"
        errors = _open_at_once(path, 6)
        assert errors == [], f"round {round_}: {errors}"
        names = sorted(p.name for p in path.parent.iterdir())
        assert not [n for n in names if n.endswith(".new")], names
    store = SQLiteRunStore(tmp_path / "r0" / "runs.sqlite")
    assert len(store.list_runs()) == 6
    store.close()


# -- through the CLI: refused before the first step ------------------------------------------


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder any user may enter (tmp_path's parents are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="proctor-store-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _workspace(root: Path) -> Path:
    skill = root / "skills" / "toucher"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: toucher\ndescription: Touch a file.\n---\nNo.\n")
    (skill / "run.yaml").write_text(RUN_YAML)
    (root / ".proctor").mkdir()
    for folder in (root, root / ".proctor", root / "skills", skill):
        folder.chmod(0o777)
    return root


def _without_file_override() -> None:
    """In the child, before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
    bounding set, so a root process obeys file modes like any user (prctl PR_CAPBSET_DROP)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _run(root: Path, *, obey_modes: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(root / "home")
    preexec = _without_file_override if obey_modes and os.geteuid() == 0 else None
    return subprocess.run(
        [sys.executable, "-m", "proctor", "run", "toucher", "--json"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, preexec_fn=preexec,
    )  # fmt: skip


def _assert_refused_before_any_step(
    root: Path, out: subprocess.CompletedProcess[str], code: str = "store_corrupt"
) -> None:
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert f"error[{code}]" in out.stderr
    assert SHOWN in out.stderr
    assert str(root) not in out.stderr and "Traceback" not in out.stderr
    assert not (root / "touched.txt").exists()
    assert not (root / ".proctor" / "audit.jsonl").exists()


def test_cli_refuses_a_store_with_random_bytes_before_any_step(open_dir: Path) -> None:
    root = _workspace(open_dir / "ws")
    store = root / ".proctor" / "runs.sqlite"
    _real_store(store, runs=200)
    data = bytearray(store.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page : 2 * page] = random.Random(3).randbytes(page)  # page 2: a b-tree page
    store.write_bytes(bytes(data))
    assert _quick_check_fails(store)
    for leftover in store.parent.glob("runs.sqlite-*"):
        leftover.unlink()
    out = _run(root)
    _assert_refused_before_any_step(root, out)
    assert store.read_bytes() == bytes(data)


def test_cli_refuses_a_zero_length_store_before_any_step(open_dir: Path) -> None:
    root = _workspace(open_dir / "ws")
    store = root / ".proctor" / "runs.sqlite"
    store.touch()
    out = _run(root)
    _assert_refused_before_any_step(root, out)
    assert store.stat().st_size == 0


def test_cli_refuses_an_unreadable_store_before_any_step(open_dir: Path) -> None:
    """chmod 000 stops every user but root; as root the CLI runs without the capabilities
    that let root read any file (skipped where this process may not drop them)."""
    root = _workspace(open_dir / "ws")
    store = root / ".proctor" / "runs.sqlite"
    _real_store(store, runs=3)
    store.chmod(0o000)
    if os.geteuid() == 0:
        probe = subprocess.run(
            [sys.executable, "-c", f"open({str(store)!r}, 'rb')"],
            preexec_fn=_without_file_override, capture_output=True,
        )  # fmt: skip
        if probe.returncode == 0:
            pytest.skip("running as root with capabilities this process cannot drop")
    out = _run(root, obey_modes=True)
    # the store may be whole: never store_corrupt, whose advice is to move it aside
    _assert_refused_before_any_step(root, out, "store_unreadable")
    assert "cannot be read" in out.stderr and "Permission denied" in out.stderr
    store.chmod(0o600)
    conn = sqlite3.connect(store)
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 3
    conn.close()


def test_cli_on_a_healthy_store_runs(open_dir: Path) -> None:
    root = _workspace(open_dir / "ws")
    _real_store(root / ".proctor" / "runs.sqlite", runs=3)
    out = _run(root)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outcome"] == "completed"
    assert (root / "touched.txt").read_text() == "ran\n"


def test_a_dead_builders_temporary_store_is_swept_a_live_ones_kept(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = tmp_path / f".runs.sqlite.{done.stdout.strip()}.0a1b2c3d4e5f.new"
    live = tmp_path / f".runs.sqlite.{os.getpid()}.0a1b2c3d4e5f.new"
    for leftover in (dead, live, dead.with_name(dead.name + "-wal")):
        leftover.write_bytes(b"half a store")
    store = SQLiteRunStore(tmp_path / "runs.sqlite")
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [live.name]

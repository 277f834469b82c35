"""Attack: win the race between the containment check and the use. A thread swaps a workspace
folder for a symlink to a folder outside (and back) as fast as it can while the fs tools run,
hundreds of times each, with openat2 and with the portable no-follow walk: the outside file's
canary never appears in any result, nothing outside is ever changed, and every call ends as a
result or a clean ProctorError (never an OSError or another exception)."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ProctorError
from proctor.receipts.canonical import digest_bytes
from proctor.runtime.boundary import fds
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

CANARY = "CANARY-race-5b1e"
ROUNDS = 220


@pytest.fixture(params=["openat2", "portable"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    wanted = request.param == "openat2"
    if wanted and not fds.openat2_available():
        pytest.skip("this kernel has no openat2")
    previous = fds.set_openat2(wanted)
    try:
        yield request.param
    finally:
        fds.set_openat2(previous)


_RENAME_EXCHANGE = 2


def _exchanger() -> Any:
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    call.restype = ctypes.c_int
    return call


_RENAMEAT2 = _exchanger()


class Swapper:
    """Swaps ``root/dir`` between the real folder and a symlink to ``outside`` until stopped,
    each swap one atomic ``renameat2(RENAME_EXCHANGE)``, so ``dir`` always exists (as one or
    the other) and nothing else can take its name meanwhile."""

    def __init__(self, root: Path, outside: Path) -> None:
        if _RENAMEAT2 is None:
            pytest.skip("libc has no renameat2")
        self.root, self.outside = root, outside
        self.stop = threading.Event()
        self.swaps = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        (root / "dir.alt").symlink_to(outside)

    def _exchange(self) -> None:
        a, b = (os.fsencode(self.root / n) for n in ("dir", "dir.alt"))
        if _RENAMEAT2(-100, a, -100, b, _RENAME_EXCHANGE) != 0:
            import ctypes

            raise OSError(ctypes.get_errno(), "renameat2")
        self.swaps += 1

    def _run(self) -> None:
        while not self.stop.is_set():
            self._exchange()  # `dir` leads outside
            self._exchange()  # and back

    def __enter__(self) -> Swapper:
        self.interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        sys.setswitchinterval(self.interval)
        assert not self.thread.is_alive()
        assert (self.root / "dir").is_dir() and not (self.root / "dir").is_symlink()
        (self.root / "dir.alt").unlink()


def outside_state(outside: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(outside.iterdir())
    }


def attempt(env: Env, tool: str, args: dict[str, Any], seen: Counter[str]) -> dict[str, Any]:
    """One call as admission makes it; a refusal or failure must be a ProctorError."""
    try:
        got = env.call(tool, args)
    except ProctorError as exc:
        seen[exc.code] += 1
        doc = exc.to_dict()
        assert CANARY not in json.dumps(doc)
        assert str(env.root.parent) not in json.dumps(doc)
        return {}
    seen["ok"] += 1
    assert CANARY not in json.dumps(got)
    return got


@pytest.fixture
def reading(env: Env) -> Path:
    (env.root / "dir").mkdir()
    env.write("dir/f.txt", "inside\n")
    outside = env.root.parent / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(f"{CANARY}\n")
    return outside


@pytest.mark.parametrize("tool", ["fs.read", "fs.search", "fs.list"])
def test_reads_never_reach_outside_while_a_folder_is_swapped(
    env: Env, reading: Path, mode: str, tool: str
) -> None:
    args = {
        "fs.read": {"path": "dir/f.txt"},
        "fs.search": {"pattern": "e", "path": "dir"},
        "fs.list": {"path": "dir"},
    }[tool]
    seen: Counter[str] = Counter()
    before = outside_state(reading)
    with Swapper(env.root, reading) as swapper:
        for _ in range(ROUNDS):
            got = attempt(env, tool, args, seen)
            if got and tool == "fs.read":
                assert got["content"] == "inside\n"
    assert outside_state(reading) == before
    assert swapper.swaps > 0 and seen["ok"] + sum(seen.values()) >= ROUNDS, seen


@pytest.fixture
def writing(env: Env) -> Path:
    """``dir/f.txt`` inside and ``f.txt`` outside hold the same bytes, so a digest check alone
    cannot tell them apart: only reaching the right file keeps the outside one unchanged."""
    (env.root / "dir").mkdir()
    env.write("dir/f.txt", "same\n")
    for i in range(ROUNDS):
        env.write(f"dir/d-{i}.txt", "same\n")
    outside = env.root.parent / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("same\n")
    (outside / "d-0.txt").write_text("same\n")
    return outside


def test_writes_never_reach_outside_while_a_folder_is_swapped(
    env: Env, writing: Path, mode: str
) -> None:
    digest = env.digest("dir/f.txt")
    seen: dict[str, Counter[str]] = {}
    trashed: list[str] = []
    before = outside_state(writing)

    def run(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return attempt(env, tool, args, seen.setdefault(tool, Counter()))

    with Swapper(env.root, writing) as swapper:
        for i in range(ROUNDS):
            run("fs.write", {"path": "dir/f.txt", "content": "same\n", "expected_digest": digest})
            run("fs.write", {"path": f"dir/new-{i}.txt", "content": "new\n", "create": True})
            run("fs.edit", {"path": "dir/f.txt", "edits": [{"old": "same", "new": "same"}]})
            replace = {"op": "replace", "path": "dir/f.txt", "content": "same\n"}
            changes = [
                {**replace, "expected_digest": digest},
                {"op": "create", "path": f"dir/b-{i}.txt", "content": "b\n"},
            ]
            run("fs.apply_bundle", {"changes": changes})
            got = run("fs.delete", {"path": f"dir/d-{i}.txt", "expected_digest": digest})
            if got:
                trashed.append(got["trash_id"])
            if trashed and i % 2 and run("fs.restore", {"trash_id": trashed[-1]}):
                trashed.pop()
    assert outside_state(writing) == before, "a file outside was changed or created"
    assert swapper.swaps > 0
    totals = sum(seen.values(), Counter())
    assert totals["ok"] > 0 and sum(totals.values()) - totals["ok"] > 0, seen
    assert env.store.journal_pending() == []
    assert (env.root / "dir" / "f.txt").read_text() == "same\n"


def _file_state(path: Path) -> tuple[bytes, int, int]:
    info = path.stat()
    return path.read_bytes(), info.st_ino, info.st_mtime_ns


class NameSwapper(Swapper):
    """Swaps two names in one folder (``RENAME_EXCHANGE``) until stopped: a file and a second
    name of a secret made before the run (a hard link, or a symlink into ``.proctor``)."""

    def __init__(self, folder: Path, one: str, other: str) -> None:
        if _RENAMEAT2 is None:
            pytest.skip("libc has no renameat2")
        self.names = (os.fsencode(folder / one), os.fsencode(folder / other))
        self.stop = threading.Event()
        self.swaps = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _exchange(self) -> None:
        if _RENAMEAT2(-100, self.names[0], -100, self.names[1], _RENAME_EXCHANGE) != 0:
            import ctypes

            raise OSError(ctypes.get_errno(), "renameat2")
        self.swaps += 1

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        sys.setswitchinterval(self.interval)
        assert not self.thread.is_alive()


@pytest.mark.parametrize("tool", ["fs.read", "fs.search", "artifact.admit"])
def test_a_folder_swapped_for_a_link_into_proctor_state_is_never_read(
    env: Env, mode: str, tool: str
) -> None:
    """As above, with the link leading into the workspace's own ``.proctor/`` (and the
    artifact store's snapshot, which keeps what it reads): the state's canary never appears."""
    (env.root / "dir").mkdir()
    env.write("dir/f.txt", "inside\n")
    state = env.root / ".proctor" / "f.txt"
    state.write_text(f"{CANARY}\n")
    before = _file_state(state)
    args = {"path": "dir/f.txt"} if tool != "fs.search" else {"pattern": "i", "path": "dir"}
    seen: Counter[str] = Counter()
    with Swapper(env.root, env.root / ".proctor") as swapper:
        for _ in range(ROUNDS):
            got = attempt(env, tool, args, seen)
            if got and tool == "artifact.admit":
                assert got["size"] == len("inside\n") and got["source"] == "dir/f.txt"
    assert _file_state(state) == before
    assert swapper.swaps > 0 and sum(seen.values()) == ROUNDS, seen


@pytest.mark.parametrize("second", ["hard link to .env", "symlink into .proctor"])
def test_a_file_swapped_with_a_second_name_of_a_secret_is_never_read_or_changed(
    env: Env, mode: str, second: str
) -> None:
    """``dir/f.txt`` and ``dir/h.txt`` trade names as fast as they can while every fs tool
    and artifact.admit use ``dir/f.txt``; ``h.txt`` is another name of a secret made before
    the run. The secret never appears in a result and keeps its bytes, inode and mtime: no
    tool read it or wrote through it. (Its second name may be renamed over or moved to the
    trash when the swap lands between a tool's check and its rename: the name, never the
    content; a trash entry whose bytes are not the digest it was checked with is never
    restored.)"""
    (env.root / "dir").mkdir()
    env.write("dir/f.txt", "inside\n")
    if second.startswith("hard"):
        secret = env.write(".env", f"TOKEN={CANARY}\n")
        os.link(secret, env.root / "dir" / "h.txt")
    else:
        secret = env.root / ".proctor" / "f.txt"
        secret.write_text(f"TOKEN={CANARY}\n")
        (env.root / "dir" / "h.txt").symlink_to("../.proctor/f.txt")
    before = _file_state(secret)
    inside = env.digest("dir/f.txt")
    theirs = digest_bytes(secret.read_bytes())
    seen: dict[str, Counter[str]] = {}

    def run(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return attempt(env, tool, args, seen.setdefault(tool, Counter()))

    with NameSwapper(env.root / "dir", "f.txt", "h.txt") as swapper:
        for _ in range(ROUNDS // 2):
            run("fs.read", {"path": "dir/f.txt"})
            run("fs.search", {"pattern": "T", "path": "dir"})
            run("fs.search", {"pattern": "T", "path": "dir/f.txt"})
            run("artifact.admit", {"path": "dir/f.txt"})
            for digest in (inside, theirs):
                run("fs.write", {"path": "dir/f.txt", "content": "o\n", "expected_digest": digest})
            run("fs.edit", {"path": "dir/f.txt", "edits": [{"old": "TOKEN", "new": "OWNED"}]})
            replace = {"op": "replace", "path": "dir/f.txt", "content": "o\n"}
            run("fs.apply_bundle", {"changes": [{**replace, "expected_digest": theirs}]})
            run("fs.delete", {"path": "dir/f.txt", "expected_digest": theirs})
    assert _file_state(secret) == before
    assert swapper.swaps > 0
    assert env.store.journal_pending() == []

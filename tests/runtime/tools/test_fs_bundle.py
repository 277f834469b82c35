"""fs.apply_bundle: all or nothing, journaled, and rolled back after a real crash (SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ProctorError
from proctor.receipts.canonical import digest_bytes
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.tools.fs_bundle import KILL_AFTER_ENV, recover_bundles
from proctor.runtime.tools.registry import native_tools
from tests.runtime.tools.test_fs_support import Env, snapshot
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

REPO = Path(__file__).resolve().parents[3]


def seed(env: Env) -> list[dict[str, Any]]:
    env.write("a.txt", "alpha\n")
    env.write("b.txt", "bravo\n")
    env.write("docs/c.txt", "charlie\n")
    return [
        {
            "op": "replace",
            "path": "a.txt",
            "content": "ALPHA\n",
            "expected_digest": env.digest("a.txt"),
        },
        {"op": "create", "path": "new/d.txt", "content": "delta\n"},
        {"op": "delete", "path": "b.txt", "expected_digest": env.digest("b.txt")},
        {
            "op": "replace",
            "path": "docs/c.txt",
            "content": "CHARLIE\n",
            "expected_digest": env.digest("docs/c.txt"),
        },
    ]


def test_bundle_applies_every_member(env: Env) -> None:
    changes = seed(env)
    got = env.call("fs.apply_bundle", {"changes": changes})
    assert (env.root / "a.txt").read_text() == "ALPHA\n"
    assert (env.root / "new/d.txt").read_text() == "delta\n"
    assert not (env.root / "b.txt").exists()
    assert (env.root / "docs/c.txt").read_text() == "CHARLIE\n"
    assert [c["op"] for c in got["changes"]] == ["replace", "create", "delete", "replace"]
    assert got["changes"][2]["content_digest"] is None
    assert env.store.journal_pending() == []
    assert not (env.root / ".proctor" / "journal" / got["bundle_id"]).exists()


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (
            {
                "op": "replace",
                "path": "a.txt",
                "content": "x",
                "expected_digest": digest_bytes(b"stale"),
            },
            "stale_digest",
        ),
        ({"op": "replace", "path": "b.txt", "content": "x"}, "blind_overwrite"),
        ({"op": "create", "path": "b.txt", "content": "x"}, "file_exists"),
        ({"op": "delete", "path": "zzz.txt", "expected_digest": digest_bytes(b"")}, "not_found"),
        ({"op": "create", "path": "../escape.txt", "content": "x"}, "path_outside_workspace"),
        ({"op": "create", "path": ".env", "content": "x"}, "sensitive_path"),
        ({"op": "create", "path": "policies/p.yaml", "content": "x"}, "authority_file"),
        (
            {"op": "create", "path": "k.txt", "content": "-----BEGIN PRIVATE KEY-----\nAA\n"},
            "sensitive_path",
        ),
        ({"op": "create", "path": "NEW/D.TXT", "content": "x"}, "bundle_duplicate_path"),
        ({"op": "create", "path": "e.txt"}, "bundle_member_invalid"),
    ],
)
@pytest.mark.parametrize("direct", [False, True], ids=["admitted", "handler-only"])
def test_a_bundle_with_one_bad_member_applies_nothing(
    env: Env, bad: dict[str, Any], code: str, direct: bool
) -> None:
    changes = seed(env)
    changes.insert(2, bad)
    before = snapshot(env.root)
    with pytest.raises(ProctorError) as info:
        if direct:  # defence in depth: the handler re-checks what admission checked
            native_tools()["fs.apply_bundle"].handler(env.ctx, {"changes": changes})
        else:
            env.call("fs.apply_bundle", {"changes": changes})
    assert info.value.code == code
    if direct:
        assert info.value.details["member"] == 2
        assert "member 2" in info.value.message
    assert snapshot(env.root) == before
    assert env.store.journal_pending() == []


CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from proctor.runtime.tools.base import ToolContext
    from proctor.runtime.tools.registry import native_tools
    from proctor.runtime.boundary.workspace import Workspace

    root = Path(sys.argv[1])
    ws = Workspace(root)
    store = SQLiteRunStore(root / ".proctor" / "runs.sqlite")
    ctx = ToolContext(workspace=ws, store=store, run_id="run-child", call_id="c1")
    native_tools()["fs.apply_bundle"].handler(ctx, json.loads(sys.argv[2]))
    print("finished")
    """
)


@pytest.mark.parametrize("kill_after", [0, 1, 2, 3])
def test_a_crash_mid_bundle_is_rolled_back(env: Env, kill_after: int) -> None:
    changes = seed(env)
    before = snapshot(env.root)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(env.root), json.dumps({"changes": changes})],
        env={**os.environ, KILL_AFTER_ENV: str(kill_after)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "finished" not in proc.stdout
    pending = env.store.journal_pending()
    assert len(pending) == 1
    if kill_after >= 1:
        assert (env.root / "a.txt").read_text() == "ALPHA\n"  # really half applied
    rolled = recover_bundles(env.ws, env.store)
    assert rolled == [pending[0].bundle_id]
    assert env.store.journal_pending() == []
    after = snapshot(env.root)
    # Contents are back exactly; folders the bundle created and the emptied journal folder are
    # the only acceptable leftovers, and no file is different or extra.
    files = {k: v[1] for k, v in after.items() if v[0] == "file"}
    assert files == {k: v[1] for k, v in before.items() if v[0] == "file"}
    assert set(after) - set(before) <= {"new", ".proctor/journal"}
    assert recover_bundles(env.ws, env.store) == []


def test_recovery_leaves_a_member_changed_since_alone(env: Env) -> None:
    changes = seed(env)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(env.root), json.dumps({"changes": changes})],
        env={**os.environ, KILL_AFTER_ENV: "2"},
        capture_output=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == -signal.SIGKILL
    env.write("a.txt", "someone else\n")
    assert recover_bundles(env.ws, env.store) == []
    assert (env.root / "a.txt").read_text() == "someone else\n"
    assert env.store.journal_pending() == []


def test_recovery_skips_a_bundle_whose_owner_is_alive(env: Env) -> None:
    from proctor.runtime.records.runs import JournalRecord
    from proctor.runtime.tools.fs_bundle import _owner

    env.write("a.txt", "x")
    entry = {
        "index": 0,
        "op": "create",
        "path": "z.txt",
        "before_digest": None,
        "before_copy": None,
        "mode": None,
        "after_digest": digest_bytes(b"z"),
        "owner": _owner(),
    }
    env.store.journal_open(JournalRecord("bundle-live", "r", "open", [entry]))
    assert recover_bundles(env.ws, env.store) == []
    assert [r.bundle_id for r in env.store.journal_pending()] == ["bundle-live"]


def test_recover_with_a_fresh_store_and_workspace(env: Env) -> None:
    changes = seed(env)
    subprocess.run(
        [sys.executable, "-c", CHILD, str(env.root), json.dumps({"changes": changes})],
        env={**os.environ, KILL_AFTER_ENV: "3"},
        capture_output=True,
        timeout=60,
        cwd=REPO,
    )
    store = SQLiteRunStore(env.root / ".proctor" / "runs.sqlite")
    try:
        assert len(recover_bundles(Workspace(env.root), store)) == 1
    finally:
        store.close()
    assert (env.root / "b.txt").read_text() == "bravo\n"
    assert not (env.root / "new/d.txt").exists()

"""Reach: a workspace with roots admits ``$NAME/...`` and absolute paths inside those roots, and
applies every sensitive-file and authority rule in each root exactly as in the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.core.authority import Authority, StandingApproval
from proctor.errors import ConfigError, RefusedCall, UsageError
from proctor.runtime.boundary.reach import authority_record, run_roots, run_workspace
from proctor.runtime.boundary.workspace import Workspace

PEM = b"-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "policies").mkdir(parents=True)
    (tmp_path / "ws" / "notes.md").write_text("ws\n")
    (tmp_path / "other" / "src").mkdir(parents=True)
    (tmp_path / "other" / "src" / "a.txt").write_text("a\n")
    (tmp_path / "other" / "src" / "key.txt").write_bytes(PEM)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "o.txt").write_text("o\n")
    return tmp_path


def refused(ws: Workspace, path: str, access: str = "read") -> RefusedCall:
    with pytest.raises(RefusedCall) as info:
        ws.resolve(path, access)  # type: ignore[arg-type]
    err = info.value
    assert str(ws.root.parent) not in err.message and str(ws.root.parent) not in str(err.details)
    return err


def test_a_root_is_named_as_dollar_name_and_shown_so(tree: Path) -> None:
    ws = Workspace(tree / "ws").reaching({"repo": tree / "other"})
    got = ws.resolve("$repo/src/a.txt", "read")
    assert (got.rel, got.root, got.inner) == ("$repo/src/a.txt", "$repo", "src/a.txt")
    assert got.abs == (tree / "other" / "src" / "a.txt").resolve()
    assert ws.resolve("$repo", "list").rel == "$repo"
    absolute = ws.resolve(str(tree / "other" / "src" / "a.txt"), "read")
    assert absolute.rel == "$repo/src/a.txt"
    assert ws.base_of(absolute) == (tree / "other").resolve()
    assert ws.resolve("notes.md", "read").rel == "notes.md"


def test_without_roots_nothing_outside_the_workspace_is_reached(tree: Path) -> None:
    ws = Workspace(tree / "ws")
    assert refused(ws, "$repo/src/a.txt").code == "path_outside_reach"
    assert refused(ws, str(tree / "other" / "src" / "a.txt")).code == "path_absolute"
    assert refused(ws, "../other/src/a.txt").code == "path_outside_workspace"


def test_paths_leaving_every_root_are_refused(tree: Path) -> None:
    ws = Workspace(tree / "ws").reaching({"repo": tree / "other"})
    (tree / "other" / "link").symlink_to(tree / "outside" / "o.txt")
    assert refused(ws, "$repo/link").code == "path_outside_reach"
    assert refused(ws, "$repo/../outside/o.txt").code == "path_outside_reach"
    assert refused(ws, str(tree / "outside" / "o.txt")).code == "path_outside_reach"
    assert refused(ws, "$nope/x").code == "path_outside_reach"
    assert refused(ws, "C:/x").code == "path_absolute"


def test_sensitive_rules_apply_inside_every_root(tree: Path) -> None:
    other = tree / "other"
    (other / ".env").write_text("T=1\n")
    (other / ".git").mkdir()
    (other / ".git" / "config").write_text("x\n")
    (other / "innocent").symlink_to(other / ".env")
    ws = Workspace(tree / "ws").reaching({"repo": other})
    assert refused(ws, "$repo/.env").code == "sensitive_path"
    assert refused(ws, "$repo/.git/config").code == "sensitive_path"
    assert refused(ws, "$repo/innocent").code == "sensitive_path"
    assert refused(ws, str(other / ".env")).code == "sensitive_path"
    err = refused(ws, "$repo/src/key.txt")
    assert (err.code, err.details["rule"]) == ("sensitive_path", "private_key_content")
    assert refused(ws, "$repo/policies/p.yaml", "write").code == "authority_file"
    assert refused(ws, "$repo/SKILL.md", "write").code == "authority_file"


def test_a_root_holding_the_workspace_keeps_the_workspace_rules(tree: Path) -> None:
    ws = Workspace(tree / "ws").reaching({"up": tree})
    got = ws.resolve("$up/ws/notes.md", "read")
    assert got.rel == "notes.md"  # the deepest root holding it names it
    assert refused(ws, "$up/ws/policies/p.yaml", "write").code == "authority_file"
    (tree / "ws" / ".proctor").mkdir()
    assert refused(ws, "$up/ws/.proctor/runs.db").code == "sensitive_path"
    inner = Workspace(tree / "ws").reaching({"sub": tree / "ws" / "policies"})
    assert refused(inner, "$sub/p.yaml", "write").code == "authority_file"


def test_proctor_home_inside_a_root_is_never_reached(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tree / "other" / "state"
    home.mkdir()
    (home / "keys.json").write_text("{}")
    monkeypatch.setenv("PROCTOR_HOME", str(home))
    ws = Workspace(tree / "ws").reaching({"repo": tree / "other"})
    err = refused(ws, "$repo/state/keys.json")
    assert (err.code, err.details["rule"]) == ("sensitive_path", "proctor_state")


def test_a_workspace_file_beginning_with_dollar_is_named_dot_slash(tree: Path) -> None:
    (tree / "ws" / "$repo").write_text("mine\n")
    ws = Workspace(tree / "ws").reaching({"repo": tree / "other"})
    got = ws.resolve("./$repo", "read")
    assert got.rel == "./$repo" and got.root == "" and got.inner == "$repo"
    assert ws.resolve(got.rel, "read").abs == got.abs
    assert ws.resolve("$repo", "list").abs == (tree / "other").resolve()


@pytest.mark.parametrize(
    ("name", "folder"),
    [("bad name", "other"), ("repo", "missing"), ("repo", "/"), ("repo", "other/.git")],
)
def test_unusable_roots_are_refused(tree: Path, name: str, folder: str) -> None:
    (tree / "other" / ".git").mkdir(exist_ok=True)
    target = folder if folder.startswith("/") else str(tree / folder)
    with pytest.raises(ConfigError) as info:
        Workspace(tree / "ws").reaching({name: target})
    assert info.value.code == "root_invalid"
    assert str(tree) not in info.value.message


SCHEMA = {
    "type": "object",
    "properties": {
        "repo": {"type": "string", "format": "path"},
        "extra": {"type": "string", "format": "path"},
        "plain": {"type": "string"},
    },
}


INPUTS = Authority(reach="inputs")


def test_run_roots_come_from_path_inputs_under_reach_inputs_only(tree: Path) -> None:
    ws_root = (tree / "ws").resolve()
    values = {"repo": "../other", "plain": str(tree / "outside")}
    roots = run_roots(INPUTS, SCHEMA, values, ws_root)
    assert roots == {"repo": str((tree / "other").resolve())}
    assert run_roots(Authority(reach="workspace"), SCHEMA, values, ws_root) == {}
    assert run_roots(Authority(), SCHEMA, values, ws_root) == {}  # no host: workspace
    with pytest.raises(UsageError) as info:
        run_roots(INPUTS, SCHEMA, {"repo": str(tree / "other" / "src" / "a.txt")}, ws_root)
    assert info.value.code == "root_invalid"


def test_a_recorded_root_that_vanished_is_left_out(tree: Path) -> None:
    gone = tree / "gone"
    gone.mkdir()
    data = {"roots": {"repo": str((tree / "other").resolve()), "gone": str(gone.resolve())}}
    os.rmdir(gone)
    ws = run_workspace(Workspace(tree / "ws"), INPUTS, data)
    assert set(ws.roots) == {"repo"}
    assert refused(ws, "$gone/x").code == "path_outside_reach"
    assert run_workspace(Workspace(tree / "ws"), Authority(reach="workspace"), data).roots == {}


def test_the_receipt_authority_binds_the_roots() -> None:
    plain = {"authority": {"effects": "allow"}}
    assert authority_record(plain) == {"effects": "allow"}
    assert authority_record({**plain, "roots": {"r": "/x"}})["roots"] == {"r": "/x"}


def test_a_whole_workspace_edit_approval_does_not_cover_another_root() -> None:
    everything = StandingApproval("edits", paths=("",))
    assert everything.covers_paths(["notes.md"])
    assert not everything.covers_paths(["$repo/a.txt"])
    assert StandingApproval("edits", paths=("$repo",)).covers_paths(["$repo/a.txt"])


BUNDLE_CHILD = """
import json, sys
from pathlib import Path
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.registry import native_tools
from proctor.runtime.boundary.workspace import Workspace

root, other = Path(sys.argv[1]), Path(sys.argv[2])
ws = Workspace(root).reaching({"repo": other})
store = SQLiteRunStore(root / ".proctor" / "runs.sqlite")
ctx = ToolContext(workspace=ws, store=store, run_id="run-reach", call_id="c1")
native_tools()["fs.apply_bundle"].handler(ctx, json.loads(sys.argv[3]))
print("finished")
"""


def test_a_crashed_bundle_in_another_root_is_rolled_back_there(tree: Path) -> None:
    import json
    import signal
    import subprocess
    import sys

    from proctor.runtime.records.runs import RunRecord
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from proctor.runtime.tools.fs_bundle import KILL_AFTER_ENV, recover_bundles
    from proctor.runtime.tools.fsutil import digest_of

    root, other = tree / "ws", (tree / "other").resolve()
    (root / ".proctor").mkdir()
    store = SQLiteRunStore(root / ".proctor" / "runs.sqlite")
    store.create_run(
        RunRecord(run_id="run-reach", skill="s", method="m", data={"roots": {"repo": str(other)}})
    )
    a = other / "src" / "a.txt"
    changes = [
        {"op": "replace", "path": "$repo/src/a.txt", "content": "A\n",
         "expected_digest": digest_of(a.read_bytes())},
        {"op": "create", "path": "$repo/src/b.txt", "content": "B\n"},
    ]  # fmt: skip
    repo = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            BUNDLE_CHILD,
            str(root),
            str(other),
            json.dumps({"changes": changes}),
        ],
        env={**os.environ, KILL_AFTER_ENV: "1", "PYTHONPATH": str(repo / "src")},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=repo,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert a.read_text() == "A\n"  # really half applied, in the other root
    pending = store.journal_pending()
    assert len(pending) == 1
    assert recover_bundles(Workspace(root), store) == [pending[0].bundle_id]
    assert a.read_text() == "a\n"
    assert not (other / "src" / "b.txt").exists()

"""fs.delete moves a digest-bound file to the trash; fs.restore brings it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.errors import ProctorError
from proctor.receipts.canonical import digest_bytes
from tests.runtime.tools.test_fs_support import Env, snapshot
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export


def test_delete_then_restore(env: Env) -> None:
    env.write("docs/a.txt", "keep me\n")
    digest = env.digest("docs/a.txt")
    got = env.call("fs.delete", {"path": "docs/a.txt", "expected_digest": digest})
    assert got["path"] == "docs/a.txt" and got["digest"] == digest
    assert not (env.root / "docs/a.txt").exists()
    folder = env.root / ".proctor" / "trash" / got["trash_id"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["path"] == "docs/a.txt" and manifest["digest"] == digest
    back = env.call("fs.restore", {"trash_id": got["trash_id"]})
    assert back == {"path": "docs/a.txt", "content_digest": digest, "previous_digest": None}
    assert (env.root / "docs/a.txt").read_text() == "keep me\n"
    assert not folder.exists()


def refused_unchanged(env: Env, name: str, args: dict[str, object], code: str) -> None:
    before = snapshot(env.root)
    with pytest.raises(ProctorError) as info:
        env.call(name, args)
    assert info.value.code == code, info.value.to_dict()
    assert snapshot(env.root) == before


def test_delete_needs_the_current_digest(env: Env) -> None:
    env.write("a.txt", "x\n")
    refused_unchanged(
        env, "fs.delete", {"path": "a.txt", "expected_digest": digest_bytes(b"y")}, "stale_digest"
    )
    with pytest.raises(ProctorError) as info:
        env.call("fs.delete", {"path": "a.txt"})
    assert "expected_digest" in str(info.value)  # schema: the digest is required
    assert (env.root / "a.txt").exists()


def test_delete_of_an_authority_file_is_refused(env: Env) -> None:
    env.write("policies/p.yaml", "id: p\n")
    refused_unchanged(
        env,
        "fs.delete",
        {"path": "policies/p.yaml", "expected_digest": env.digest("policies/p.yaml")},
        "authority_file",
    )


def test_restore_never_overwrites_without_a_digest(env: Env) -> None:
    env.write("a.txt", "old\n")
    got = env.call("fs.delete", {"path": "a.txt", "expected_digest": env.digest("a.txt")})
    env.write("a.txt", "new\n")
    refused_unchanged(env, "fs.restore", {"trash_id": got["trash_id"]}, "file_exists")
    refused_unchanged(
        env,
        "fs.restore",
        {"trash_id": got["trash_id"], "expected_digest": digest_bytes(b"other")},
        "stale_digest",
    )
    env.call("fs.restore", {"trash_id": got["trash_id"], "expected_digest": env.digest("a.txt")})
    assert (env.root / "a.txt").read_text() == "old\n"


def test_restore_refuses_a_tampered_trash_entry(env: Env) -> None:
    env.write("a.txt", "old\n")
    got = env.call("fs.delete", {"path": "a.txt", "expected_digest": env.digest("a.txt")})
    folder = env.root / ".proctor" / "trash" / got["trash_id"]
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["path"] = "policies/evil.yaml"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    refused_unchanged(env, "fs.restore", {"trash_id": got["trash_id"]}, "authority_file")
    manifest["path"] = "../outside.txt"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    refused_unchanged(env, "fs.restore", {"trash_id": got["trash_id"]}, "path_outside_workspace")
    (folder / "content").write_text("changed\n")
    refused_unchanged(env, "fs.restore", {"trash_id": got["trash_id"]}, "trash_damaged")


def test_restore_of_unknown_id(env: Env) -> None:
    refused_unchanged(
        env, "fs.restore", {"trash_id": "20260101T000000Z-0123456789ab"}, "trash_not_found"
    )


def test_a_symlinked_state_folder_is_never_written_through(tmp_path: Path) -> None:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from proctor.runtime.tools.base import ToolContext
    from tests.runtime.tools.test_fs_support import call

    outside = tmp_path / "home-ssh"
    outside.mkdir()
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".proctor").symlink_to(outside)
    (root / "a.txt").write_text("x\n")
    store = SQLiteRunStore(tmp_path / "store" / "runs.sqlite")
    ctx = ToolContext(workspace=Workspace(root), store=store, run_id="r", call_id="c")
    before = snapshot(root), sorted(outside.rglob("*"))
    try:
        for name, args in [
            ("fs.delete", {"path": "a.txt", "expected_digest": digest_bytes(b"x\n")}),
            (
                "fs.apply_bundle",
                {
                    "changes": [
                        {
                            "op": "replace",
                            "path": "a.txt",
                            "content": "y",
                            "expected_digest": digest_bytes(b"x\n"),
                        }
                    ]
                },
            ),
        ]:
            with pytest.raises(ProctorError) as info:
                call(ctx, name, args)
            # the linked .proctor is refused as the state folder, or first as the folder of a
            # linked .proctor/config (guard files are read through no link): either way, nothing
            assert info.value.code in ("state_dir_unsafe", "bad_config")
            assert (snapshot(root), sorted(outside.rglob("*"))) == before
    finally:
        store.close()

"""Attack: a second name for a file. A hard link planted in the workspace under an innocent name
(to a file outside, to ``.env``, to a policy file) is refused by every fs tool, and the target
is never read nor changed. Judged by identity (the link count), not by name."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ProctorError
from proctor.receipts.canonical import digest_bytes
from proctor.runtime.boundary.views import admitted_workspace
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.registry import native_tools
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

CANARY = "CANARY-7f3a91"


def plant(env: Env, kind: str) -> tuple[str, Path]:
    """A hard link under an innocent name; returns (its name, the target)."""
    if kind == "outside":
        target = env.root.parent / "outside.txt"
        target.write_text(f"outside {CANARY}\n")
    elif kind == "env":
        target = env.write(".env", f"TOKEN={CANARY}\n")
    else:
        target = env.write("policies/p.yaml", f"id: {CANARY}\n")
    name = "docs/notes.txt"
    (env.root / "docs").mkdir(exist_ok=True)
    os.link(target, env.root / name)
    return name, target


def calls(name: str, digest: str) -> list[tuple[str, dict[str, Any]]]:
    replace = {"op": "replace", "path": name, "content": "o", "expected_digest": digest}
    delete = {"op": "delete", "path": name, "expected_digest": digest}
    return [
        ("fs.read", {"path": name}),
        ("fs.search", {"pattern": "x", "path": name}),
        ("fs.write", {"path": name, "content": "owned\n", "expected_digest": digest}),
        ("fs.write", {"path": name, "content": "owned\n", "create": True}),
        ("fs.edit", {"path": name, "edits": [{"old": CANARY, "new": "owned"}]}),
        ("fs.edit", {"path": name, "expected_digest": digest, "edits": [{"old": "i", "new": "o"}]}),
        ("fs.delete", {"path": name, "expected_digest": digest}),
        ("fs.apply_bundle", {"changes": [replace]}),
        ("fs.apply_bundle", {"changes": [delete]}),
    ]


@pytest.mark.parametrize("kind", ["outside", "env", "policy"])
def test_every_tool_refuses_a_hard_link_and_the_target_is_unchanged(env: Env, kind: str) -> None:
    name, target = plant(env, kind)
    before = target.read_bytes()
    digest = digest_bytes(before)
    for tool, args in calls(name, digest):
        with pytest.raises(ProctorError) as info:
            env.call(tool, args)
        assert info.value.code == "hard_link", (tool, info.value.to_dict())
        assert CANARY not in json.dumps(info.value.to_dict())
        assert str(env.root) not in info.value.message
        assert target.read_bytes() == before and os.stat(target).st_nlink == 2


@pytest.mark.parametrize("kind", ["outside", "env", "policy"])
def test_walks_withhold_a_hard_link_unread(env: Env, kind: str) -> None:
    name, _target = plant(env, kind)
    env.write("docs/plain.txt", "plain x\n")
    listed = env.call("fs.list", {"recursive": True})
    paths = [e["path"] for e in listed["entries"]]
    assert name not in paths and "docs/plain.txt" in paths
    assert listed["withheld"] >= 1
    found = env.call("fs.search", {"pattern": CANARY})
    assert found["results"] == [] and found["withheld"] >= 1
    assert CANARY not in json.dumps([listed, env.call("fs.search", {"pattern": "x"})])


def handler_after_admission(env: Env, tool: str, args: dict[str, Any]) -> Callable[[], Any]:
    """The handler as admission runs it, reusing admission's resolution of ``args``'s paths."""
    spec = native_tools()[tool]
    resolved = {(p, a): env.ws.resolve(p, a) for p, a in spec.paths(args)}
    view = admitted_workspace(env.ws, resolved)
    ctx = ToolContext(workspace=view, store=env.store, run_id="run-test", call_id="c-late")
    return lambda: spec.handler(ctx, args)


@pytest.mark.parametrize("tool", ["fs.read", "fs.write", "fs.edit", "fs.delete"])
def test_a_link_made_after_admission_is_still_refused_at_open(env: Env, tool: str) -> None:
    outside = env.root.parent / "outside.txt"
    outside.write_text(f"outside {CANARY}\n")
    env.write("a.txt", f"outside {CANARY}\n")  # same bytes: a digest cannot tell them apart
    digest = env.digest("a.txt")
    args: dict[str, Any] = {
        "fs.read": {"path": "a.txt"},
        "fs.write": {"path": "a.txt", "content": "owned\n", "expected_digest": digest},
        "fs.edit": {"path": "a.txt", "edits": [{"old": "outside", "new": "owned"}]},
        "fs.delete": {"path": "a.txt", "expected_digest": digest},
    }[tool]
    run = handler_after_admission(env, tool, args)
    os.unlink(env.root / "a.txt")
    os.link(outside, env.root / "a.txt")
    with pytest.raises(ProctorError) as info:
        run()
    assert info.value.code == "hard_link"
    assert outside.read_text() == f"outside {CANARY}\n"
    assert os.stat(outside).st_nlink == 2


def test_restore_refuses_a_hard_link_at_either_end(env: Env) -> None:
    outside = env.root.parent / "outside.txt"
    outside.write_text(f"outside {CANARY}\n")
    env.write("t.txt", "mine\n")
    got = env.call("fs.delete", {"path": "t.txt", "expected_digest": env.digest("t.txt")})
    os.link(outside, env.root / "t.txt")  # the restore's destination is now the outside file
    with pytest.raises(ProctorError) as info:
        env.call(
            "fs.restore",
            {"trash_id": got["trash_id"], "expected_digest": digest_bytes(outside.read_bytes())},
        )
    assert info.value.code == "hard_link"
    assert outside.read_text() == f"outside {CANARY}\n"
    os.unlink(env.root / "t.txt")
    content = env.root / ".proctor" / "trash" / got["trash_id"] / "content"
    os.link(content, env.root.parent / "second-name")  # the trash copy has another name
    with pytest.raises(ProctorError) as info:
        env.call("fs.restore", {"trash_id": got["trash_id"]})
    assert info.value.code == "hard_link"
    assert not (env.root / "t.txt").exists()

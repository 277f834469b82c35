"""fs.read_bundle: several files in one call, each through containment, one byte budget, a
digest of the bundle; a path outside the workspace or a link out refuses the whole call."""

from __future__ import annotations

import os

import pytest

from proctor.errors import ProctorError
from proctor.receipts.canonical import digest_bytes
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export


def test_a_bundle_reads_each_file_with_its_digest(env: Env) -> None:
    env.write("a.md", "alpha\n")
    env.write("docs/b.md", "beta\n")
    got = env.call("fs.read_bundle", {"paths": ["a.md", "docs/b.md"]})
    assert [(f["path"], f["content"]) for f in got["files"]] == [
        ("a.md", "alpha\n"),
        ("docs/b.md", "beta\n"),
    ]
    assert got["files"][1]["content_digest"] == digest_bytes(b"beta\n")
    again = env.call("fs.read_bundle", {"paths": ["a.md", "docs/b.md"]})
    assert again["bundle_digest"] == got["bundle_digest"]
    env.write("docs/b.md", "changed\n")
    changed = env.call("fs.read_bundle", {"paths": ["a.md", "docs/b.md"]})
    assert changed["bundle_digest"] != got["bundle_digest"]


def test_the_byte_budget_is_shared_by_the_bundle(env: Env) -> None:
    env.write("one.txt", "1111\n2222\n")
    env.write("two.txt", "3333\n")
    got = env.call("fs.read_bundle", {"paths": ["one.txt", "two.txt"], "max_bytes": 10})
    first, second = got["files"]
    assert first["content"] == "1111\n2222\n" and first["truncated"] is False
    assert second == {
        "path": "two.txt",
        "content": "",
        "content_digest": None,
        "size": None,
        "truncated": True,
    }


@pytest.mark.parametrize("outside", ["../secret.txt", "/etc/passwd", "link/secret.txt"])
def test_a_path_outside_refuses_the_whole_bundle(env: Env, outside: str) -> None:
    env.write("a.md", "alpha\n")
    secret = env.root.parent / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE\n")
    os.symlink(env.root.parent, env.root / "link")
    with pytest.raises(ProctorError) as refused:
        env.call("fs.read_bundle", {"paths": ["a.md", outside]})
    assert refused.value.code in ("path_outside_workspace", "path_absolute")
    assert "TOP-SECRET" not in str(refused.value.to_dict())


@pytest.mark.parametrize(
    "args",
    [{"paths": []}, {"paths": ["a.md", "a.md"]}, {"paths": ["x"] * 65}, {"paths": "a.md"}, {}],
)
def test_malformed_bundles_are_refused_by_the_schema(env: Env, args: dict[str, object]) -> None:
    with pytest.raises(ProctorError) as refused:
        env.call("fs.read_bundle", args)
    assert refused.value.code == "schema_invalid"

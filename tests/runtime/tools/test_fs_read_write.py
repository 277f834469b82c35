"""fs.read, fs.write, fs.edit: results, digests, and every refusal leaving the tree unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.errors import ProctorError, RefusedCall, ToolFailed
from proctor.receipts.canonical import digest_bytes
from tests.runtime.tools.test_fs_support import Env, snapshot
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

PEM = b"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzJ\n-----END RSA PRIVATE KEY-----\n"


def refused_unchanged(env: Env, name: str, args: dict[str, object], code: str) -> ProctorError:
    before = snapshot(env.root)
    with pytest.raises(ProctorError) as info:
        env.call(name, args)
    assert info.value.code == code, info.value.to_dict()
    assert snapshot(env.root) == before
    assert str(env.root) not in info.value.message
    return info.value


def test_read_returns_text_and_the_digest_of_the_bytes(env: Env) -> None:
    env.write("notes.md", "line 1\nline 2\n")
    got = env.call("fs.read", {"path": "notes.md"})
    assert got == {
        "path": "notes.md",
        "content": "line 1\nline 2\n",
        "content_digest": digest_bytes(b"line 1\nline 2\n"),
        "size": 14,
        "truncated": False,
    }


def test_truncated_read_ends_on_a_line_boundary_and_digests_the_whole_file(env: Env) -> None:
    env.write("big.txt", "aaaa\nTOKEN=ghp_0123456789abcdef\nzz\n")
    got = env.call("fs.read", {"path": "big.txt", "max_bytes": 12})
    assert got["content"] == "aaaa\n"
    assert got["truncated"] is True
    assert got["content_digest"] == env.digest("big.txt")
    assert env.call("fs.read", {"path": "big.txt", "max_bytes": 3})["content"] == ""


def test_read_refuses_binary(env: Env) -> None:
    env.write("img.bin", b"\x89PNG\x00\x01")
    refused_unchanged(env, "fs.read", {"path": "img.bin"}, "binary_file")
    env.write("latin.txt", "café".encode("latin-1"))
    refused_unchanged(env, "fs.read", {"path": "latin.txt"}, "binary_file")


def test_read_of_a_missing_file_fails(env: Env) -> None:
    with pytest.raises(ToolFailed) as info:
        env.call("fs.read", {"path": "nope.txt"})
    assert info.value.code == "not_found"


def test_read_finds_a_private_key_anywhere_in_a_large_file(env: Env) -> None:
    env.write("data.log", b"x" * (3 * 1024 * 1024 + 100) + b"\n" + PEM)
    err = refused_unchanged(env, "fs.read", {"path": "data.log"}, "sensitive_path")
    assert err.details["rule"] == "private_key_content"


def test_read_of_an_innocently_named_key_is_refused(env: Env) -> None:
    env.write("docs/readme.txt", PEM)
    err = refused_unchanged(env, "fs.read", {"path": "docs/readme.txt"}, "sensitive_path")
    assert err.details["rule"] == "private_key_content"


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".env.local",
        "prod.env",
        "id_rsa",
        "cert.p12",
        "k.pem",
        ".npmrc",
        ".netrc",
        ".pgpass",
        ".ssh/config",
        ".aws/credentials",
        ".docker/config.json",
        ".kube/config",
        ".git/config",
        ".proctor/config",
    ],
)
def test_every_sensitive_kind_is_refused_for_read_and_write(env: Env, path: str) -> None:
    env.write(path, "SECRET=1\n")
    digest = env.digest(path)
    refused_unchanged(env, "fs.read", {"path": path}, "sensitive_path")
    refused_unchanged(
        env, "fs.write", {"path": path, "content": "x", "expected_digest": digest}, "sensitive_path"
    )
    refused_unchanged(env, "fs.delete", {"path": path, "expected_digest": digest}, "sensitive_path")


def test_write_create_and_replace(env: Env) -> None:
    got = env.call("fs.write", {"path": "out/new.txt", "content": "one\n", "create": True})
    assert got == {
        "path": "out/new.txt",
        "content_digest": digest_bytes(b"one\n"),
        "previous_digest": None,
    }
    got = env.call(
        "fs.write",
        {"path": "out/new.txt", "content": "two\n", "expected_digest": got["content_digest"]},
    )
    assert got["previous_digest"] == digest_bytes(b"one\n")
    assert (env.root / "out/new.txt").read_text() == "two\n"
    assert not [p for p in (env.root / "out").iterdir() if p.name.startswith(".proctor-tmp")]


def test_write_keeps_the_file_mode(env: Env) -> None:
    path = env.write("run.sh", "#!/bin/sh\n")
    path.chmod(0o755)
    env.call(
        "fs.write",
        {"path": "run.sh", "content": "#!/bin/sh\necho\n", "expected_digest": env.digest("run.sh")},
    )
    assert (path.stat().st_mode & 0o777) == 0o755


def test_blind_overwrite_is_refused(env: Env) -> None:
    env.write("a.txt", "keep\n")
    err = refused_unchanged(env, "fs.write", {"path": "a.txt", "content": "x"}, "blind_overwrite")
    assert "a.txt" in err.message


def test_create_over_an_existing_file_is_refused(env: Env) -> None:
    env.write("a.txt", "keep\n")
    refused_unchanged(
        env, "fs.write", {"path": "a.txt", "content": "x", "create": True}, "file_exists"
    )


def test_stale_digest_is_refused(env: Env) -> None:
    env.write("a.txt", "keep\n")
    stale = digest_bytes(b"something else")
    refused_unchanged(
        env, "fs.write", {"path": "a.txt", "content": "x", "expected_digest": stale}, "stale_digest"
    )
    refused_unchanged(
        env,
        "fs.edit",
        {"path": "a.txt", "expected_digest": stale, "edits": [{"old": "keep", "new": "x"}]},
        "stale_digest",
    )


def test_replacing_a_missing_file_is_refused(env: Env) -> None:
    refused_unchanged(
        env,
        "fs.write",
        {"path": "gone.txt", "content": "x", "expected_digest": digest_bytes(b"")},
        "not_found",
    )


def test_both_create_and_digest_is_refused(env: Env) -> None:
    refused_unchanged(
        env,
        "fs.write",
        {"path": "n.txt", "content": "x", "create": True, "expected_digest": digest_bytes(b"")},
        "write_mode_conflict",
    )


@pytest.mark.parametrize(
    "path",
    [
        "policies/p.yaml",
        "directives/d.md",
        "skills/s/SKILL.md",
        "skills/s/run.yaml",
        "proctor.toml",
        ".proctor/audit.jsonl",
    ],
)
def test_writing_an_authority_file_is_refused(env: Env, path: str) -> None:
    env.write(path, "id: x\n")
    digest = env.digest(path)
    refused_unchanged(
        env,
        "fs.write",
        {"path": path, "content": "id: evil\n", "expected_digest": digest},
        "sensitive_path" if path.startswith(".proctor") else "authority_file",
    )
    refused_unchanged(
        env,
        "fs.edit",
        {"path": path, "edits": [{"old": "x", "new": "evil"}]},
        "sensitive_path" if path.startswith(".proctor") else "authority_file",
    )


def test_creating_a_new_skill_package_is_refused(env: Env) -> None:
    refused_unchanged(
        env,
        "fs.write",
        {"path": "anywhere/SKILL.md", "content": "---\nname: x\n---\n", "create": True},
        "authority_file",
    )


def test_writing_a_private_key_is_refused(env: Env) -> None:
    refused_unchanged(
        env,
        "fs.write",
        {"path": "notes.txt", "content": PEM.decode(), "create": True},
        "sensitive_path",
    )


def test_traversal_writes_are_refused(env: Env, tmp_path: Path) -> None:
    outside = tmp_path / "victim.txt"
    outside.write_text("victim\n")
    os.symlink(tmp_path, env.root / "escape")
    os.symlink("loop", env.root / "loop")
    cases = [
        ("../victim.txt", "path_outside_workspace"),
        (str(outside), "path_absolute"),
        ("escape/victim.txt", "path_outside_workspace"),
        ("loop/x.txt", "path_symlink_loop"),
    ]
    for path, code in cases:
        refused_unchanged(env, "fs.write", {"path": path, "content": "x", "create": True}, code)
        refused_unchanged(env, "fs.read", {"path": path}, code)
    assert outside.read_text() == "victim\n"


def test_edit_applies_all_edits(env: Env) -> None:
    env.write("c.py", "a = 1\nb = 2\nb = 2\n")
    got = env.call(
        "fs.edit",
        {
            "path": "c.py",
            "expected_digest": env.digest("c.py"),
            "edits": [
                {"old": "a = 1", "new": "a = 10"},
                {"old": "b = 2", "new": "b = 3", "replace_all": True},
            ],
        },
    )
    assert (env.root / "c.py").read_text() == "a = 10\nb = 3\nb = 3\n"
    assert got["content_digest"] == env.digest("c.py")


@pytest.mark.parametrize(
    ("edits", "code"),
    [
        ([{"old": "a = 1", "new": "x"}, {"old": "nope", "new": "y"}], "edit_no_match"),
        ([{"old": "a = 1", "new": "x"}, {"old": "b = 2", "new": "y"}], "edit_ambiguous"),
    ],
)
def test_edit_is_all_or_nothing(env: Env, edits: list[dict[str, str]], code: str) -> None:
    env.write("c.py", "a = 1\nb = 2\nb = 2\n")
    err = refused_unchanged(env, "fs.edit", {"path": "c.py", "edits": edits}, code)
    assert err.details["edit"] == 1


def test_edit_refuses_binary_and_missing(env: Env) -> None:
    env.write("b.bin", b"\xff\xfe\x00")
    refused_unchanged(
        env, "fs.edit", {"path": "b.bin", "edits": [{"old": "a", "new": "b"}]}, "binary_file"
    )
    refused_unchanged(
        env, "fs.edit", {"path": "no.txt", "edits": [{"old": "a", "new": "b"}]}, "not_found"
    )


def test_refusals_are_refused_calls(env: Env) -> None:
    env.write("a.txt", "x")
    with pytest.raises(RefusedCall):
        env.call("fs.write", {"path": "a.txt", "content": "y"})


def test_a_fifo_never_hangs_a_tool(env: Env) -> None:
    os.mkfifo(env.root / "pipe.txt")
    with pytest.raises(ToolFailed) as info:
        env.call("fs.read", {"path": "pipe.txt"})
    assert info.value.code == "not_a_file"
    assert env.call("fs.search", {"pattern": "x"})["results"] == []
    listed = env.call("fs.list", {})
    assert {"path": "pipe.txt", "type": "other", "size": 0} in listed["entries"]
    with pytest.raises(ToolFailed):
        env.call("fs.write", {"path": "pipe.txt", "content": "x", "create": True})

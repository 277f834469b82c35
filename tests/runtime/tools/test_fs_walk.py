"""fs.list and fs.search: gitignore, skipped folders, nested worktrees, withheld secrets."""

from __future__ import annotations

import os

import pytest

from proctor.errors import RefusedCall
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

PEM = b"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----\n"


def build(env: Env) -> None:
    env.write(".gitignore", "*.log\nbuild/\n!keep.log\n")
    env.write("README.md", "hello world\n")
    env.write("app.log", "hello log\n")
    env.write("keep.log", "hello kept\n")
    env.write("build/out.txt", "hello build\n")
    env.write("src/main.py", "print('hello')\n")
    env.write("src/.gitignore", "gen_*.py\n")
    env.write("src/gen_x.py", "hello generated\n")
    env.write("src/.env", "TOKEN=hello\n")
    env.write("src/innocent.txt", b"hello\n" + PEM)
    env.write(".env.example", "TOKEN=\n")
    env.write(".git/config", "[core]\n")
    env.write("vendor/lib/.git/HEAD", "ref\n")
    env.write("vendor/lib/code.py", "hello vendored\n")
    env.write("vendor/own.py", "hello own\n")
    env.write("id_rsa", "whatever\n")


def paths(result: dict[str, object]) -> list[str]:
    return [e["path"] for e in result["entries"]]  # type: ignore[attr-defined,index]


def test_list_recursive(env: Env) -> None:
    build(env)
    got = env.call("fs.list", {"recursive": True})
    assert paths(got) == [
        ".env.example",
        ".gitignore",
        "README.md",
        "keep.log",
        "src",
        "src/.gitignore",
        "src/main.py",
        "vendor",
        "vendor/own.py",
    ]
    # .git, .proctor, src/.env, src/innocent.txt (key content), id_rsa
    assert got["withheld"] == 5
    assert got["truncated"] is False


def test_list_one_folder_and_limits(env: Env) -> None:
    build(env)
    got = env.call("fs.list", {"path": "src"})
    assert paths(got) == ["src/.gitignore", "src/main.py"]
    assert got["withheld"] == 2
    got = env.call("fs.list", {"max_entries": 2})
    assert len(got["entries"]) == 2 and got["truncated"] is True


def test_list_hides_symlinks_to_secrets_and_outside(env: Env) -> None:
    build(env)
    os.symlink(".env.example", env.root / "ok-link")
    os.symlink("src/.env", env.root / "bad-link")
    os.symlink("/", env.root / "root-link")
    got = env.call("fs.list", {})
    assert "ok-link" in paths(got)
    assert "bad-link" not in paths(got) and "root-link" not in paths(got)


def test_list_of_a_sensitive_folder_is_refused(env: Env) -> None:
    build(env)
    for path in (".git", ".proctor", "../", "/"):
        with pytest.raises(RefusedCall):
            env.call("fs.list", {"path": path})


def test_search_literal_and_regex(env: Env) -> None:
    build(env)
    got = env.call("fs.search", {"pattern": "hello"})
    found = {r["path"] for r in got["results"]}
    assert found == {"README.md", "keep.log", "src/main.py", "vendor/own.py"}
    assert got["withheld"] >= 3
    got = env.call("fs.search", {"pattern": "h.llo w", "regex": True})
    assert [(r["path"], r["line"], r["text"]) for r in got["results"]] == [
        ("README.md", 1, "hello world")
    ]
    assert env.call("fs.search", {"pattern": "h.llo"})["results"] == []


def test_search_glob_path_and_limit(env: Env) -> None:
    build(env)
    got = env.call("fs.search", {"pattern": "hello", "glob": "*.py"})
    assert {r["path"] for r in got["results"]} == {"src/main.py", "vendor/own.py"}
    got = env.call("fs.search", {"pattern": "hello", "path": "src"})
    assert {r["path"] for r in got["results"]} == {"src/main.py"}
    got = env.call("fs.search", {"pattern": "hello", "max_results": 1})
    assert len(got["results"]) == 1 and got["truncated"] is True


def test_search_never_returns_a_key_or_env_content(env: Env) -> None:
    build(env)
    got = env.call("fs.search", {"pattern": "PRIVATE KEY"})
    assert got["results"] == []
    assert env.call("fs.search", {"pattern": "TOKEN=hello"})["results"] == []
    with pytest.raises(RefusedCall) as info:
        env.call("fs.search", {"pattern": "x", "path": "src/innocent.txt"})
    assert info.value.code == "sensitive_path"


def test_search_bad_regex_is_refused(env: Env) -> None:
    with pytest.raises(RefusedCall) as info:
        env.call("fs.search", {"pattern": "(", "regex": True})
    assert info.value.code == "invalid_pattern"

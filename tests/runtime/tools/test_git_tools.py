"""git.status/log/show/diff: read-only, sensitive files never shown, no repository code run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import RefusedCall, ToolFailed
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

SECRET = "sk_live_0123456789abcdefSECRET"
KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=T", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return done.stdout.strip()


@pytest.fixture
def repo(env: Env) -> Env:
    git(env.root, "init", "-q", "-b", "main")
    env.write("README.md", "hello\n")
    env.write(".env", f"API_TOKEN={SECRET}\n")
    env.write("app/.env.production", f"TOKEN={SECRET}\n")
    git(env.root, "add", "README.md", ".env", "app/.env.production")
    git(env.root, "commit", "-q", "-m", "first")
    env.write("README.md", "hello\nworld\n")
    env.write(".env", f"API_TOKEN={SECRET}2\n")
    env.write("notes.txt", KEY)
    git(env.root, "add", "-A", "README.md", ".env", "notes.txt")
    git(env.root, "commit", "-q", "-m", "second")
    env.write("README.md", "hello\nworld\nagain\n")
    env.write(".env", f"API_TOKEN={SECRET}3\n")
    env.write("new.txt", "untracked\n")
    return env


def _no_secret(*results: object) -> None:
    text = json.dumps(results)
    assert SECRET not in text and "PRIVATE KEY" not in text


def test_status_lists_changes_but_never_a_sensitive_file(repo: Env) -> None:
    out = repo.call("git.status", {})
    paths = {e["path"] for e in out["entries"]}
    assert paths == {"README.md", "new.txt"}
    assert out["branch"] == "main" and out["hidden"] >= 2  # .env and .proctor/
    _no_secret(out)


def test_log_lists_commits_and_files_without_sensitive_ones(repo: Env) -> None:
    out = repo.call("git.log", {"max_count": 5})
    assert [c["subject"] for c in out["commits"]] == ["second", "first"]
    first = out["commits"][1]
    assert [f["path"] for f in first["files"]] == ["README.md"]
    assert first["hidden_files"] == 2 and first["author_email"] == "t@example.com"
    one = repo.call("git.log", {"path": "README.md", "max_count": 1})
    assert len(one["commits"]) == 1
    _no_secret(out, one)


def test_show_and_diff_leave_sensitive_files_and_keys_out_of_patches(repo: Env) -> None:
    shown = repo.call("git.show", {"rev": "HEAD"})
    assert shown["subject"] == "second"
    assert "+world" in shown["patch"] and shown["hidden_files"] == 2  # .env, notes.txt's key
    first = repo.call("git.show", {"rev": "HEAD~1"})
    assert "+hello" in first["patch"] and ".env" not in first["patch"]
    diff = repo.call("git.diff", {})
    assert "+again" in diff["patch"] and [f["path"] for f in diff["files"]] == ["README.md"]
    between = repo.call("git.diff", {"rev_a": "HEAD~1", "rev_b": "HEAD"})
    assert "+world" in between["patch"]
    text = repo.call("git.show", {"rev": "HEAD~1", "path": "README.md"})
    assert text["content"] == "hello\n"
    _no_secret(shown, first, diff, between, text)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"rev": "HEAD", "path": ".env"}, "sensitive_path"),
        ({"rev": "HEAD", "path": "app/.env.production"}, "sensitive_path"),
        ({"rev": "HEAD", "path": "notes.txt"}, "sensitive_path"),
        ({"rev": "HEAD:.env"}, "rev_invalid"),
        ({"rev": "HEAD", "path": "../x"}, "path_outside_workspace"),
    ],
)
def test_show_refuses_a_sensitive_file_at_any_revision(
    repo: Env, args: dict[str, str], code: str
) -> None:
    (repo.root / "notes.txt").write_text("innocent now\n")  # its committed text holds a key
    with pytest.raises(RefusedCall) as caught:
        repo.call("git.show", args)
    assert caught.value.code == code
    _no_secret(caught.value.to_dict())


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("git.diff", {"rev_a": "--output=pwned.txt"}),
        ("git.diff", {"rev_a": "HEAD", "rev_b": "-p --output=pwned.txt"}),
        ("git.log", {"rev": "--output=pwned.txt"}),
        ("git.show", {"rev": "--output=pwned.txt"}),
    ],
)
def test_an_option_in_a_revision_is_refused(repo: Env, tool: str, args: dict[str, str]) -> None:
    with pytest.raises(RefusedCall) as caught:
        repo.call(tool, args)
    assert caught.value.code == "rev_invalid"
    assert not (repo.root / "pwned.txt").exists()


def test_no_hook_pager_external_diff_filter_or_fsmonitor_of_the_repository_runs(
    repo: Env, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "foreign.txt").write_text("not the workspace\n")
    evil = f"sh -c 'echo ran >> {marker}'"
    with (repo.root / ".git" / "config").open("a") as config:
        config.write(
            f"""[core]
\tpager = {evil}
\tfsmonitor = {evil}
\thooksPath = {tmp_path}
\tworktree = {elsewhere}
[diff]
\texternal = {evil}
[diff "evil"]
\ttextconv = {evil}
\tcommand = {evil}
[filter "evil"]
\tclean = {evil}
\tsmudge = {evil}
\trequired = true
[pager]
\tlog = {evil}
[log]
\tshowSignature = true
[gpg]
\tprogram = {evil}
"""
        )
    (repo.root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    for hook in ("pre-commit", "post-checkout", "reference-transaction", "fsmonitor-watchman"):
        (tmp_path / hook).write_text(f"#!/bin/sh\necho ran >> {marker}\n")
        (tmp_path / hook).chmod(0o755)
    repo.call("git.status", {})
    repo.call("git.log", {"max_count": 3})
    repo.call("git.show", {"rev": "HEAD"})
    repo.call("git.show", {"rev": "HEAD", "path": "README.md"})
    out = repo.call("git.diff", {})
    repo.call("git.diff", {"rev_a": "HEAD~1", "rev_b": "HEAD"})
    assert not marker.exists()
    assert "+again" in out["patch"] and "foreign" not in json.dumps(out)


def test_output_is_bounded(repo: Env) -> None:
    repo.write("README.md", "".join(f"line {i}\n" for i in range(20000)))
    out = repo.call("git.diff", {"max_bytes": 1024})
    assert out["truncated"] and len(out["patch"].encode()) <= 1024


def test_a_workspace_that_is_no_repository_is_refused(env: Env) -> None:
    with pytest.raises(ToolFailed) as caught:
        env.call("git.status", {})
    assert caught.value.code == "not_a_repository"


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=40), st.from_regex(r"-[a-z-]{1,12}(=.*)?", fullmatch=True)))
def test_fuzzed_revisions_are_names_or_refused(text: str) -> None:
    from proctor.runtime.tools.git import _rev

    try:
        got = _rev({"rev": text}, "rev")
    except RefusedCall as exc:
        assert exc.code == "rev_invalid"
        return
    assert got == text and not text.startswith("-")
    assert ":" not in text and not any(c.isspace() for c in text)


def test_a_filter_driver_whose_name_holds_an_equals_sign_is_not_run(
    repo: Env, tmp_path: Path
) -> None:
    """A ``-c name=value`` is split at its first ``=``: a driver named ``a=b`` would escape an
    override passed that way and git would run its clean filter on the working tree."""
    marker = tmp_path / "marker"
    evil = f"sh -c 'echo ran >> {marker}'"
    with (repo.root / ".git" / "config").open("a") as config:
        config.write(f'[filter "a=b"]\n\tclean = {evil}\n\tsmudge = {evil}\n')
        config.write(f'[diff "c=d"]\n\ttextconv = {evil}\n\tcommand = {evil}\n')
    (repo.root / ".gitattributes").write_text("*.md filter=a=b diff=c=d\n")
    repo.write("README.md", "changed again\n")
    repo.call("git.status", {})
    repo.call("git.diff", {})
    repo.call("git.show", {"rev": "HEAD"})
    repo.call("git.diff", {"rev_a": "HEAD~1", "rev_b": "HEAD"})
    assert not marker.exists()


@pytest.mark.parametrize("target", [".env", ".proctor/runs.sqlite", "outside"])
def test_a_tracked_file_replaced_by_a_hard_link_never_shows_its_target(
    repo: Env, tmp_path: Path, target: str
) -> None:
    """Git reads the working tree by name: ``README.md`` made a second name of ``.env`` (or of
    the run store, or of a file outside) before the run is a modified file to git. Its part of
    the patch is left out; the target's bytes never appear."""
    if target == "outside":
        source = tmp_path / "outside.txt"
        source.write_text(f"OUTSIDE={SECRET}\n")
    elif target == ".proctor/runs.sqlite":
        source = repo.root / ".proctor" / "notes"
        source.write_text(f"STATE={SECRET}\n")
    else:
        source = repo.root / target
    repo.write("other.txt", "plain\n")
    git(repo.root, "add", "other.txt")
    git(repo.root, "commit", "-q", "-m", "third")
    readme = repo.root / "README.md"
    readme.unlink()
    os.link(source, readme)
    repo.write("other.txt", "plain\nplainer\n")  # a modified file beside it is still shown
    out = repo.call("git.diff", {})
    _no_secret(out)
    assert "README.md" not in out["patch"] and "+plainer" in out["patch"]
    assert out["hidden_files"] >= 1


def test_a_symlinked_and_an_ordinary_change_are_still_shown(repo: Env) -> None:
    (repo.root / "README.md").unlink()
    (repo.root / "README.md").symlink_to("new.txt")
    out = repo.call("git.diff", {})
    assert "+new.txt" in out["patch"] and "-hello" in out["patch"]


@pytest.mark.parametrize("layout", ["alternates", "http-alternates", "commondir", "objects"])
def test_a_repository_reading_another_ones_history_is_refused(
    repo: Env, tmp_path: Path, layout: str
) -> None:
    """A command the run starts may write ``.git`` (all but its config and hooks): pointing the
    object store or the common folder at a repository outside must not let the git tools read
    that repository's history."""
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    (other / "private.txt").write_text(f"OTHER={SECRET}\n")
    git(other, "add", "private.txt")
    git(other, "commit", "-q", "-m", "private history")
    commit = git(other, "rev-parse", "HEAD")
    dot_git = repo.root / ".git"
    if layout == "commondir":
        (dot_git / "commondir").write_text(f"{other / '.git'}\n")
    elif layout == "objects":
        shutil.copytree(dot_git / "objects", other / ".git" / "objects", dirs_exist_ok=True)
        shutil.rmtree(dot_git / "objects")
        (dot_git / "objects").symlink_to(other / ".git" / "objects")
    else:
        (dot_git / "objects" / "info" / layout).write_text(f"{other / '.git' / 'objects'}\n")
    for tool, args in [
        ("git.show", {"rev": commit}),
        ("git.show", {"rev": commit, "path": "private.txt"}),
        ("git.log", {"rev": commit}),
        ("git.log", {}),
        ("git.diff", {"rev_a": commit}),
    ]:
        with pytest.raises(ToolFailed) as caught:
            repo.call(tool, args)
        assert caught.value.code == "not_a_repository", (tool, caught.value.code)
        _no_secret(caught.value.to_dict())


def test_a_nested_repositorys_filter_never_runs_and_its_commit_is_still_shown(
    repo: Env, tmp_path: Path
) -> None:
    """A nested repository registered as a submodule (a command the run starts can make one:
    its own ``.git/config`` and a gitlink in the index) has config the workspace's overrides do
    not cover. git.diff compares it by commit only and never runs git inside it."""
    marker = tmp_path / "marker"
    sub = repo.root / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "a.md").write_text("a\n")
    git(sub, "add", "a.md")
    git(sub, "commit", "-q", "-m", "inner")
    (sub / ".gitattributes").write_text("*.md filter=f\n")
    git(
        repo.root,
        "update-index",
        "--add",
        "--cacheinfo",
        f"160000,{git(sub, 'rev-parse', 'HEAD')},sub",
    )
    git(repo.root, "commit", "-q", "-m", "with a submodule")
    git(sub, "commit", "-q", "--allow-empty", "-m", "moved")
    with (sub / ".git" / "config").open("a") as config:
        config.write(f"[filter \"f\"]\n\tclean = sh -c 'echo ran >> {marker}'\n")
        config.write(f"[core]\n\tfsmonitor = sh -c 'echo ran >> {marker}'\n")
    (sub / "a.md").write_text("b\n")  # same size, old time: only a content check sees it
    os.utime(sub / "a.md", (1, 1))
    out = repo.call("git.diff", {})
    repo.call("git.diff", {"path": "sub"})
    repo.call("git.status", {})
    assert not marker.exists()
    assert "Subproject commit " + git(sub, "rev-parse", "HEAD") in out["patch"]


@pytest.mark.parametrize("kind", ["gitdir file", "symlink"])
def test_a_dot_git_leading_outside_the_workspace_is_refused(
    env: Env, tmp_path: Path, kind: str
) -> None:
    """``.git`` as a ``gitdir:`` pointer or a symlink to a repository outside: the git tools
    read only a real ``.git`` folder of the workspace's own, never the one it leads to."""
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    (other / "private.txt").write_text(f"OTHER={SECRET}\n")
    git(other, "add", "private.txt")
    git(other, "commit", "-q", "-m", "private history")
    if kind == "symlink":
        (env.root / ".git").symlink_to(other / ".git")
    else:
        (env.root / ".git").write_text(f"gitdir: {other / '.git'}\n")
    env.write("private.txt", "here\n")
    for tool, args in [
        ("git.log", {}),
        ("git.show", {"rev": "main", "path": "private.txt"}),
        ("git.diff", {}),
        ("git.status", {}),
    ]:
        with pytest.raises(ToolFailed) as caught:
            env.call(tool, args)
        assert caught.value.code == "not_a_repository", tool
        _no_secret(caught.value.to_dict())


def test_a_host_without_git_is_refused_with_a_code(
    repo: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The git tools start the PATH's git: with none there, the tool is refused by name rather
    # than failing with an OSError from deep inside the call.
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for tool in ("git.status", "git.log", "git.diff"):
        with pytest.raises(ToolFailed) as caught:
            repo.call(tool, {})
        assert caught.value.code == "git_unavailable", tool

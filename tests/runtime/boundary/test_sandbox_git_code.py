"""What counts as git host code, without a sandbox: the config a command may leave, what is
removed of what it made, where the nested repositories are found, and the sweep's record."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.runtime.boundary.rules import WALK_MAX_DEPTH
from proctor.runtime.boundary.sandbox_git import (
    config_refs,
    fresh,
    git_entries,
    gitlinks,
    host_code,
    inert_config,
    removable,
)
from proctor.runtime.boundary.sandbox_sweep import Sweep

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

_INIT = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
_CLONE = (
    '[remote "origin"]\n\turl = https://example.org/x.git\n'
    "\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
    '[branch "main"]\n\tremote = origin\n\tmerge = refs/heads/main\n'
)


def _git_env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}


def _git(tmp_path: Path, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=_git_env(tmp_path), capture_output=True, check=True
    )
    return done.stdout.decode()


@pytest.mark.parametrize(
    "text",
    [_INIT, _INIT + _CLONE, "[user]\n\tname = A Person\n\temail = a@example.org\n", "", "# x\n"],
)
def test_the_config_git_init_and_clone_write_is_inert(text: str) -> None:
    assert inert_config(text)


@pytest.mark.parametrize(
    "text",
    [
        '[core]\n\tfsmonitor = "touch x"\n',
        "[core]\n\tFSMonitor = x\n",
        "[include]\n\tpath = other\n",
        '[includeIf "gitdir:/"]\n\tpath = other\n',
        "[core]\n\tbare = false \\\n\tfsmonitor = x\n",  # a continuation
        "[core.x]\n\tbare = false\n",  # the old subsection syntax
        "[core] fsmonitor = x\n",
        '[core "x"]\n\tbare = false\n',
        '[remote "o"]\n\tuploadpack = touch x\n',
        "bare = false\n",  # a key outside a section
        "[core]\n\tbare\n",  # a key without a value
        '[core]\n\tbare = "false"\n',
        "[core]\n\tbare = false ; hooksPath = x\n",
        '[filter "f"]\n\tclean = touch x\n',
    ],
)
def test_a_config_naming_a_program_or_read_otherwise_is_not_inert(text: str) -> None:
    assert not inert_config(text)


_FRAGMENTS = [
    "[core]",
    "[CORE]",
    "[user]",
    '[remote "o"]',
    "[remote]",
    '[core "x"]',
    "[include]",
    "\tbare = false",
    "\tBare=true",
    "\tfsmonitor = x",
    "\tpath = y",
    "\turl = https://e.org/x",
    "\tname = A",
    "\tcommand = z",
    "# comment",
    "; comment",
    "",
    "\tbare = false \\",
    "\tname = a ; b",
    "\tname = a # b",
    "\tsshCommand = z",
    "\r",
]


@needs_git
@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=8))
def test_a_config_read_as_inert_holds_only_inert_keys_as_git_reads_it(lines: list[str]) -> None:
    """The reading errs only one way: whatever it accepts, git itself finds nothing in but the
    keys that name no program."""
    text = "\n".join(lines) + "\n"
    if not inert_config(text):
        return
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "config"
        path.write_text(text)
        done = subprocess.run(
            ["git", "config", "--file", str(path), "--list", "--name-only", "-z"],
            env=_git_env(Path(scratch)),
            capture_output=True,
            check=False,
        )
    names = [n for n in done.stdout.decode().split("\0") if n]
    for name in names:
        section, _, key = name.lower().partition(".")
        key = key.rsplit(".", 1)[-1]
        assert (section, key) in {
            ("core", "repositoryformatversion"),
            ("core", "filemode"),
            ("core", "bare"),
            ("core", "logallrefupdates"),
            ("core", "ignorecase"),
            ("core", "precomposeunicode"),
            ("core", "symlinks"),
            ("extensions", "objectformat"),
            ("user", "name"),
            ("user", "email"),
            ("remote", "url"),
            ("remote", "fetch"),
            ("branch", "remote"),
            ("branch", "merge"),
        }, (text, name)


def test_what_is_removed_of_new_host_code(tmp_path: Path) -> None:
    git = tmp_path / "sub" / ".git"
    (git / "hooks").mkdir(parents=True)
    (git / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    (git / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    (git / "config").write_text(_INIT)
    (git / "commondir").write_text("x\n")
    assert host_code(tmp_path, "sub/.git") == [
        "sub/.git/config",
        "sub/.git/commondir",
        "sub/.git/hooks",
    ]
    assert removable(tmp_path, "sub/.git/config") == []
    assert removable(tmp_path, "sub/.git/hooks") == ["sub/.git/hooks/post-checkout"]
    assert removable(tmp_path, "sub/.git/commondir") == ["sub/.git/commondir"]
    (git / "config").write_text(_INIT + "[core]\n\tfsmonitor = x\n")
    assert removable(tmp_path, "sub/.git/config") == ["sub/.git/config"]
    (git / "config").unlink()
    (git / "config").symlink_to(tmp_path / "elsewhere")
    assert removable(tmp_path, "sub/.git/config") == ["sub/.git/config"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / ".git").write_text("gitdir: ../sub/.git\n")
    # a .git file: itself, and the host code of the git folder it names when that is inside
    assert host_code(tmp_path, "other/.git") == [
        "other/.git",
        "sub/.git/config",
        "sub/.git/commondir",
        "sub/.git/hooks",
    ]
    (tmp_path / "other" / ".git").write_text(f"gitdir: {tmp_path.parent}\n")
    assert host_code(tmp_path, "other/.git") == ["other/.git"]


@needs_git
def test_a_gitlink_is_found_in_a_dependency_folder_and_beyond_the_walks_depth(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _git(tmp_path, "init", "-q", cwd=root)
    deep = "/".join(f"d{i}" for i in range(WALK_MAX_DEPTH + 2))
    hidden_from_walk = ["node_modules/pkg", f"{deep}/sub", "skipped/.venv/x"]
    for rel in [*hidden_from_walk, "plain/repo"]:
        (root / rel / ".git").mkdir(parents=True)
    sha = "1" * 40
    for rel in hidden_from_walk:
        _git(tmp_path, "update-index", "--add", "--cacheinfo", f"160000,{sha},{rel}", cwd=root)
    found, partial = git_entries(root)
    assert not partial
    assert set(found) == {".git", "plain/repo/.git", *(f"{rel}/.git" for rel in hidden_from_walk)}
    assert gitlinks(root / ".git", root) == frozenset(hidden_from_walk)


def test_the_sweep_keeps_the_git_host_code_it_started_with(tmp_path: Path) -> None:
    sweep = Sweep(git={tmp_path: frozenset({".git/config", "sub/.git"})})
    again = Sweep.from_json(sweep.to_json())
    assert again.git == sweep.git and again.git_since_ns == sweep.git_since_ns
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text(_INIT)
    (tmp_path / ".git" / "commondir").write_text("x\n")
    assert again.run() == [".git/commondir"]
    assert (tmp_path / ".git" / "config").exists()
    assert not (tmp_path / ".git" / "commondir").exists()


def test_where_the_walk_stopped_at_its_bound_only_what_changed_meanwhile_is_removed(
    tmp_path: Path,
) -> None:
    # a walk after the process may reach a repository the walk before did not: its host code
    # is old, and stays
    (tmp_path / "old" / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / "old" / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\n")
    (tmp_path / "old" / ".git" / "config").write_text("[core]\n\thooksPath = x\n")
    since = time.time_ns() + 60_000_000_000  # everything on disk is older than the call
    sweep = Sweep(
        git={tmp_path: frozenset()}, git_partial=frozenset({tmp_path}), git_since_ns=since
    )
    assert Sweep.from_json(sweep.to_json()).git_partial == {tmp_path}
    assert sweep.run() == []
    assert (tmp_path / "old" / ".git" / "hooks" / "pre-commit").exists()
    sweep = Sweep(git={tmp_path: frozenset()}, git_partial=frozenset({tmp_path}), git_since_ns=0)
    assert sorted(sweep.run()) == ["old/.git/config", "old/.git/hooks/pre-commit"]


def test_a_git_folder_named_otherwise_is_judged_by_its_own_change_time(tmp_path: Path) -> None:
    # the host code of the git folder a .git file names holds no ".git" in its path
    (tmp_path / ".repo" / "hooks").mkdir(parents=True)
    (tmp_path / ".repo" / "config").write_text("[core]\n\thooksPath = x\n")
    (tmp_path / ".git").write_text("gitdir: .repo\n")
    assert host_code(tmp_path, ".git") == [".git", ".repo/config", ".repo/hooks"]
    assert fresh(tmp_path, ".repo/config", 0)
    assert not fresh(tmp_path, ".repo/config", time.time_ns() + 60_000_000_000)
    (tmp_path / "a.github").mkdir()
    assert not fresh(tmp_path, "a.github/.git", 0)  # not there


@needs_git
def test_what_a_config_names_is_found_through_includes(tmp_path: Path) -> None:
    git, tree = tmp_path / "ws" / ".git", tmp_path / "ws"
    git.mkdir(parents=True)
    (git / "config").write_text(
        "[core]\n\thooksPath = scripts/hooks\n[include]\n\tpath = config.local\n"
        '[includeIf "gitdir:/"]\n\tpath = ../shared.gitconfig\n'
    )
    (tree / "shared.gitconfig").write_text("[include]\n\tpath = deeper.gitconfig\n")
    found = config_refs(git / "config", tree)
    assert sorted(found) == sorted(
        [
            tree / "scripts/hooks",
            git / "config.local",
            git / "../shared.gitconfig",
            git / "../deeper.gitconfig",
        ]
    )

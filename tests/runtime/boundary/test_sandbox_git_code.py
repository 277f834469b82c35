"""What counts as git host code, without a sandbox: the config a command may leave, what is
removed of what it made, where the nested repositories are found, and the sweep's record."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.runtime.boundary.fds import DIR_FLAGS, open_below
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
    assert gitlinks(root, ".git") == frozenset(hidden_from_walk)


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
    found = config_refs(tree, ".git/config", tree)
    assert sorted(found) == sorted(
        [
            tree / "scripts/hooks",
            git / "config.local",
            git / "../shared.gitconfig",
            git / "../deeper.gitconfig",
        ]
    )


# Swaps ``d`` in the folder it runs in for a link to argv[2] and back, over and over, until
# ``stop`` appears there: a folder replaced by a link between a look and a removal.
_SWAPPER = """
import os, sys
os.chdir(sys.argv[1])
print("ready", flush=True)

def hold():  # each state lasts a while, so a look and a use can fall in different ones
    for _ in range(3000):
        os.stat(".")

while not os.path.exists("stop"):
    try:
        os.rename("d", "d.real")
        os.symlink(sys.argv[2], "d.tmp")
        os.rename("d.tmp", "d")
        hold()
        os.rename("d", "d.tmp")
        os.unlink("d.tmp")
        os.rename("d.real", "d")
        hold()
    except OSError:
        pass
"""


_NOT_INERT = _INIT + "[alias]\n\tx = status\n"
# an index git cannot read: the sweep still asks git to list it, which takes a while
_PLANTED = (("hooks/post-checkout", "#!/bin/sh\n"), ("config", _NOT_INERT), ("index", "x"))


def _tree(top: Path) -> dict[str, tuple[int, bytes]]:
    out: dict[str, tuple[int, bytes]] = {}
    for folder, dirs, files in os.walk(top, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            out[path.relative_to(top).as_posix()] = (path.lstat().st_mode, data)
    return out


def _plant_below(root: Path, top: str) -> None:
    """New host code in ``root/top/sub/.git``, reached with no link on the way (the test's
    own writes must not land outside either)."""
    try:
        fd = open_below(str(root), top, DIR_FLAGS)
    except OSError:
        return
    try:
        for folder in ("sub", "sub/.git", "sub/.git/hooks"):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, dir_fd=fd)
        for name, text in _PLANTED:
            out = os.open(f"sub/.git/{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, dir_fd=fd)
            os.write(out, text.encode())
            os.close(out)
    except OSError:
        pass
    finally:
        os.close(fd)


@needs_git
def test_a_folder_swapped_for_a_link_during_the_sweep_leads_nowhere_outside(
    tmp_path: Path,
) -> None:
    # new host code in d/sub/.git while another process of the workspace keeps swapping d for
    # a link to an outside folder laid out the same: the sweep removes the workspace's and
    # never the outside one's, however the swaps fall
    root, outside = tmp_path / "ws", tmp_path / "outside"
    for top in (root / "d", outside):
        (top / "sub" / ".git" / "hooks").mkdir(parents=True)
        for name, text in _PLANTED:
            (top / "sub" / ".git" / name).write_text(text)
    before = _tree(outside)
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(root), str(outside)],
        stdout=subprocess.PIPE,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == b"ready\n"
        removed = 0
        for _ in range(100):
            for top in ("d", "d.real"):
                _plant_below(root, top)
            removed += len(Sweep(git={root: frozenset()}).run())
    finally:
        (root / "stop").write_text("")
        swapper.wait(timeout=60)
        if swapper.stdout is not None:
            swapper.stdout.close()
    assert removed > 0  # the control: the workspace's own host code was found and removed
    assert _tree(outside) == before


def test_a_git_pointer_is_followed_only_to_a_git_folder_inside_the_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (outside / ".git" / "hooks").mkdir(parents=True)
    (outside / ".git" / "config").write_text(_NOT_INERT)
    (root / "sub").mkdir(parents=True)
    (root / "in" / "hooks").mkdir(parents=True)
    # through a link inside the root that leads out, by gitdir text and by a .git link
    (root / "away").symlink_to(outside)
    for pointer in ("gitdir: ../away/.git\n", f"gitdir: {outside}/.git\n"):
        (root / "sub" / ".git").write_text(pointer)
        assert host_code(root, "sub/.git") == ["sub/.git"]
        assert removable(root, "sub/.git") == ["sub/.git"]
    (root / "sub" / ".git").unlink()
    (root / "sub" / ".git").symlink_to(root / "away" / ".git")
    assert host_code(root, "sub/.git") == ["sub/.git"]
    # nothing below a link is host code of the root, however it is named
    assert host_code(root, "away/.git") == []
    assert removable(root, "away/.git/config") == []
    assert not fresh(root, "away/.git/config", 0)
    # a pointer to a folder inside, even through a link inside, is followed
    (root / "inner").symlink_to(root / "in")
    (root / "sub" / ".git").unlink()
    (root / "sub" / ".git").write_text("gitdir: ../inner\n")
    assert host_code(root, "sub/.git") == ["sub/.git", "in/hooks"]


@needs_git
def test_a_config_outside_the_root_is_named_but_never_read(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / ".git").mkdir(parents=True)
    outside.mkdir()
    (root / ".git" / "config").write_text(
        "[include]\n\tpath = ../../outside/shared\n[include]\n\tpath = ../link/shared\n"
    )
    (root / "link").symlink_to(outside)
    (outside / "shared").write_text("[include]\n\tpath = deeper\n")
    found = config_refs(root, ".git/config", root)
    assert found == [root / ".git/../../outside/shared", root / ".git/../link/shared"]

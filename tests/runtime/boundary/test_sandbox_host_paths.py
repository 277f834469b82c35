"""The host-side clean-up after a sandboxed command never acts outside the workspace.

Each attack runs ``command.execute`` for real under bubblewrap: from inside the sandbox, a
shell script plants a link, a ``.git`` file or a gitdir pointer naming a repository and files
*outside* the workspace (which the sandbox cannot even see: the links are only text to it), so
that the sweep proctor runs on the host afterwards (removing the git host code and the authority
files a command made) would read or remove what they point to if it followed them. Each test
proves the outside tree is byte-for-byte what it was (every file, mode and link, the outside
repository's hooks and config among them) and nothing of it was removed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.tools.procs_log import list_processes
from tests.runtime.boundary.sandbox_support import wait_until
from tests.runtime.boundary.test_sandbox_git import Repo, pytestmark  # noqa: F401 - the marks
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    session,
)

_ALIAS = "[alias]\n\tst = status\n"  # a config git init never writes: not inert, so removable


def snapshot(top: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry below ``top``: its kind and mode, and a file's digest or a link's text."""
    out: dict[str, tuple[str, int, str]] = {}
    for folder, dirs, files in os.walk(top, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            info = path.lstat()
            rel = path.relative_to(top).as_posix()
            if path.is_symlink():
                out[rel] = ("link", info.st_mode, os.readlink(path))
            elif path.is_dir():
                out[rel] = ("dir", info.st_mode, "")
            else:
                out[rel] = ("file", info.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


class Outside:
    """A repository and files outside the workspace, with hooks and a config the sweep would
    remove were they the command's."""

    def __init__(self, tmp_path: Path, repo: Repo) -> None:
        self.top = tmp_path / "outside"
        self.repo = self.top / "repo"
        self.repo.mkdir(parents=True)
        repo.git("init", "-q", "-b", "main", cwd=self.repo)
        repo.git("commit", "-q", "--allow-empty", "-m", "outside", cwd=self.repo)
        with (self.repo / ".git" / "config").open("a") as config:
            config.write(_ALIAS)
        self.hook = self.repo / ".git" / "hooks" / "post-checkout"
        self.hook.write_text("#!/bin/sh\nexit 0\n")
        self.hook.chmod(0o755)
        self.files = self.top / "files"
        (self.files / "hooks").mkdir(parents=True)
        (self.files / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
        (self.files / "keep.txt").write_text("keep\n")
        self.before = snapshot(self.top)
        assert (self.repo / ".git" / "config").exists() and self.hook.exists()

    def unchanged(self) -> None:
        assert snapshot(self.top) == self.before


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


@pytest.fixture
def outside(tmp_path: Path, repo: Repo) -> Outside:
    return Outside(tmp_path, repo)


def _removed(env: Any, *names: str) -> None:
    assert env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "authority_file_created"
    for name in names:
        assert name in env.refusal.message, env.refusal.message


def test_a_gitlink_through_a_link_to_an_outside_repository_removes_nothing_there(
    repo: Repo, outside: Outside
) -> None:
    # a submodule whose folder is a link to a repository elsewhere: its config and hooks look
    # like new host code of the workspace to anything that follows the link
    env = repo.run(
        f"ln -s {outside.repo} evil\n"
        "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),evil\n"
    )
    assert env.outcome == "completed", env.refusal
    outside.unchanged()
    repo.status_runs_nothing()


@pytest.mark.parametrize("kind", ["gitdir file", "link"])
def test_a_git_pointer_to_an_outside_repository_is_removed_and_nothing_there(
    repo: Repo, outside: Outside, kind: str
) -> None:
    plant = (
        f"printf 'gitdir: {outside.repo}/.git\\n' > sub/.git"
        if kind == "gitdir file"
        else f"ln -s {outside.repo}/.git sub/.git"
    )
    env = repo.run(
        f"mkdir sub && {plant}\n"
        "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub\n"
    )
    _removed(env, "sub/.git")
    assert not os.path.lexists(repo.root / "sub" / ".git")
    outside.unchanged()
    repo.status_runs_nothing("sub")


def test_a_link_planted_on_the_way_to_a_hooks_folder_is_removed_not_followed(
    repo: Repo, outside: Outside
) -> None:
    # the person's config keeps hooks in scripts/hooks, which does not exist yet: the sweep
    # removes it if the command makes it; a link in place of scripts/ must not make it remove
    # the outside hooks folder that link leads to
    repo.git("config", "core.hooksPath", "scripts/hooks")
    env = repo.run(f"ln -s {outside.files} scripts\n")
    _removed(env, "scripts")
    assert not os.path.lexists(repo.root / "scripts")
    outside.unchanged()
    repo.git("commit", "-q", "--allow-empty", "-m", "by the person")


def test_a_nested_repository_whose_git_folder_is_a_link_outside_is_cut_at_the_link(
    repo: Repo, outside: Outside
) -> None:
    # an ordinary folder swapped for a link to the outside repository's parent, with a new
    # nested repository's host code expected below it
    env = repo.run(
        "git init -q lib && printf '[alias]\\n\\tx = status\\n' >> lib/.git/config\n"
        f"mv lib lib.moved && ln -s {outside.top} lib\n"
        "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),lib/repo\n"
    )
    _removed(env, "lib.moved/.git/config")
    assert os.readlink(repo.root / "lib") == str(outside.top)
    outside.unchanged()


def test_a_hard_link_of_an_outside_hook_and_config_is_removed_by_its_name_alone(
    repo: Repo, outside: Outside
) -> None:
    # second names made before the run (the sandbox cannot make a hard link to a file it
    # does not see): moved into a new repository's hooks and config, only the name goes
    (repo.root / "vendor").mkdir()
    os.link(outside.hook, repo.root / "vendor" / "hook.sh")
    os.link(outside.repo / ".git" / "config", repo.root / "vendor" / "cfg")
    outside.before = snapshot(outside.top)
    env = repo.run(
        "git init -q n && mv vendor/hook.sh n/.git/hooks/post-checkout\n"
        "git init -q m && mv vendor/cfg m/.git/config\n"
    )
    _removed(env, "n/.git/hooks/post-checkout", "m/.git/config")
    assert not (repo.root / "n" / ".git" / "hooks" / "post-checkout").exists()
    assert not (repo.root / "m" / ".git" / "config").exists()
    outside.unchanged()
    assert outside.hook.stat().st_nlink == 1
    repo.status_runs_nothing("n", "m")


def test_the_control_the_commands_own_new_host_code_is_still_removed(
    repo: Repo, outside: Outside
) -> None:
    env = repo.run(
        "git init -q sub && printf '#!/bin/sh\\nexit 0\\n' > sub/.git/hooks/post-checkout\n"
        "printf '[alias]\\n\\tx = status\\n' >> sub/.git/config\n"
    )
    _removed(env, "sub/.git/hooks/post-checkout", "sub/.git/config")
    assert not (repo.root / "sub" / ".git" / "config").exists()
    outside.unchanged()


def test_a_long_lived_process_s_supervisor_sweeps_through_descriptors_too(
    repo: Repo, outside: Outside
) -> None:
    # process.start: the supervisor runs the sweep once the process's tree has ended
    repo.git("config", "core.hooksPath", "scripts/hooks")
    inputs = {"command": "/bin/sh", "args": ["-c", f"ln -s {outside.files} scripts"]}
    make_skill(
        repo.root,
        "plant",
        "minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n      - id: serve\n"
        f"        tool: process.start\n        inputs: {json.dumps(inputs)}\n",
    )
    s = session(
        repo.root,
        environ={"PROCTOR_HOME": str(repo.root / ".home"), "PROCTOR_SANDBOX": "required"},
    )
    env = s.run("plant", cwd=repo.root)
    assert env.outcome == "completed", env.refusal
    processes = repo.root / ".proctor" / "processes"
    wait_until(lambda: not list_processes(processes)[0]["running"], "the process ended")
    (info,) = list_processes(processes)
    assert info["removed"] == ["scripts"]
    assert not os.path.lexists(repo.root / "scripts")
    outside.unchanged()

"""A sandboxed command cannot leave code for the person's own ``git`` to run on the host.

Each test runs ``command.execute`` for real under bubblewrap (``PROCTOR_SANDBOX=required``): a
shell script tries to plant a program in the workspace's repository (a ``commondir``, a
``config.worktree``, a linked worktree, a ``.git`` file, a nested repository registered as a
submodule ...). Afterwards the test runs the host's ``git status`` in the workspace, as a person
would (a scratch ``HOME``, no system config), and proves the planted program never ran: its
canary file never appears. The controls prove ordinary git work inside the sandbox still works.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.boundary.sandbox_support import call_records, needs_bwrap
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
}
# what every script starts with: git on the PATH, an identity, and no prompt
_PRELUDE = "set -e; export PATH=/usr/local/bin:/usr/bin:/bin GIT_TERMINAL_PROMPT=0 " + " ".join(
    f"{k}={v}" for k, v in _IDENTITY.items()
)


class Repo:
    """A workspace that is a git repository, a canary file and a scratch home for the host."""

    def __init__(self, tmp_path: Path, separate: str = "") -> None:
        self.root = make_workspace(tmp_path / "ws")
        self.canary = tmp_path / "PWNED"
        self.home = tmp_path / "home"
        self.home.mkdir()
        apart = ["--separate-git-dir", str(self.root / separate)] if separate else []
        self.git("init", "-q", "-b", "main", *apart)
        (self.root / "a.txt").write_text("a\n")
        self.git("add", "a.txt")
        self.git("commit", "-q", "-m", "first")

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "GIT_CONFIG_NOSYSTEM": "1",
            **_IDENTITY,
        }

    def git(self, *args: str, cwd: Path | None = None) -> str:
        """The host's git, as the person runs it after the command."""
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout.strip()

    def plant(self) -> str:
        """A config line whose program leaves the canary, then fails (as fsmonitor may)."""
        return f'[core]\n\tfsmonitor = "touch {self.canary}; false"\n'

    def run(self, script: str) -> Any:
        """Run ``script`` under ``/bin/sh`` as one sandboxed ``command.execute``."""
        inputs = {"argv": ["/bin/sh", "-c", f"{_PRELUDE}\n{script}"], "timeout_seconds": 120}
        make_skill(
            self.root,
            "gitwork",
            "minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n      - id: run\n"
            f"        tool: command.execute\n        inputs: {json.dumps(inputs)}\n",
        )
        s = session(
            self.root,
            environ={"PROCTOR_HOME": str(self.root / ".home"), "PROCTOR_SANDBOX": "required"},
        )
        env = s.run("gitwork", cwd=self.root)
        (call,) = call_records(s, env.run_id)
        assert call.result["sandbox"]["used"] == "bubblewrap"
        return env

    def status_runs_nothing(self, *folders: str) -> None:
        """The host's ``git status`` (and ``git diff``) in the workspace, and in each of
        ``folders``, runs no planted program."""
        for folder in ["", *folders]:
            where = self.root / folder
            if where.is_dir():
                for args in (["status"], ["diff"]):
                    subprocess.run(
                        ["git", *args],
                        cwd=where,
                        env=self.env(),
                        capture_output=True,
                        timeout=120,
                        check=False,
                    )
        assert not self.canary.exists()


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


def _refused(env: Any, *removed: str) -> None:
    assert env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "authority_file_created"
    for name in removed:
        assert name in env.refusal.message, env.refusal.message


def test_a_planted_commondir_is_removed_and_its_config_never_runs(repo: Repo) -> None:
    env = repo.run(
        "mkdir -p .git/x && cp -r .git/objects .git/refs .git/HEAD .git/x/\n"
        f"printf '{repo.plant()}' > .git/x/config\n"
        "printf x > .git/commondir\n"
    )
    _refused(env, ".git/commondir")
    assert not (repo.root / ".git" / "commondir").exists()
    repo.status_runs_nothing()


def test_a_worktree_config_is_removed_even_where_the_extension_is_on(repo: Repo) -> None:
    # the person's own config turns worktree config on (sparse checkouts do): a planted
    # config.worktree would then be read
    repo.git("config", "extensions.worktreeConfig", "true")
    env = repo.run(f"printf '{repo.plant()}' > .git/config.worktree\n")
    _refused(env, ".git/config.worktree")
    assert not (repo.root / ".git" / "config.worktree").exists()
    repo.status_runs_nothing()


def test_a_planted_linked_worktree_is_removed(repo: Repo) -> None:
    # a linked worktree whose common folder is one the command wrote, config and all
    env = repo.run(
        "mkdir -p .git/worktrees/w wt evil && cp -r .git/objects .git/refs .git/HEAD evil/\n"
        f"printf '{repo.plant()}' > evil/config\n"
        "printf '../../../evil\\n' > .git/worktrees/w/commondir\n"
        "git rev-parse HEAD > .git/worktrees/w/HEAD\n"
        f"printf '{repo.root}/wt/.git\\n' > .git/worktrees/w/gitdir\n"
        f"printf 'gitdir: {repo.root}/.git/worktrees/w\\n' > wt/.git\n"
    )
    _refused(env, ".git/worktrees", "wt/.git")
    assert not (repo.root / ".git" / "worktrees").exists()
    assert not (repo.root / "wt" / ".git").exists()
    repo.status_runs_nothing("wt")


def test_the_git_folder_cannot_be_replaced_by_a_file(repo: Repo) -> None:
    config = (repo.root / ".git" / "config").read_text()
    env = repo.run(
        "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/\n"
        f"printf '{repo.plant()}' > evil/config\n"
        "mv .git moved 2>/dev/null || rm -rf .git 2>/dev/null || true\n"
        "printf 'gitdir: evil\\n' > .git || true\n"
    )
    assert env.outcome == "completed", env.refusal
    assert (repo.root / ".git").is_dir() and not (repo.root / "moved").exists()
    assert (repo.root / ".git" / "config").read_text() == config
    repo.status_runs_nothing()


def test_attributes_alone_name_no_program(repo: Repo) -> None:
    # a driver is only a name without the config that defines it, which stays read-only
    env = repo.run(
        "mkdir -p .git/info && printf '* filter=evil diff=evil merge=evil\\n'"
        " > .git/info/attributes\n"
        f"printf '[filter \"evil\"]\\n\\tclean = touch {repo.canary}\\n' >> .git/config"
        " || true\n"
        "echo b >> a.txt\n"
    )
    assert env.outcome == "completed", env.refusal
    assert (repo.root / ".git" / "info" / "attributes").exists()  # allowed: it runs nothing
    assert "evil" not in (repo.root / ".git" / "config").read_text()
    repo.status_runs_nothing()


@pytest.mark.parametrize("where", ["sub", "node_modules/pkg/sub"])
def test_a_nested_repository_registered_as_a_submodule_loses_its_planted_config(
    repo: Repo, where: str
) -> None:
    env = repo.run(
        f"git init -q {where}\n"
        f"git -C {where} commit -q --allow-empty -m inner\n"
        f"printf '{repo.plant()}' >> {where}/.git/config\n"
        f"git update-index --add --cacheinfo 160000,$(git -C {where} rev-parse HEAD),{where}\n"
    )
    _refused(env, f"{where}/.git/config")
    assert not (repo.root / where / ".git" / "config").exists()
    assert repo.git("ls-files", "-s", "--", where).startswith("160000 ")  # the gitlink stays
    repo.status_runs_nothing(where)


def test_a_submodule_whose_config_git_cannot_read_still_has_its_gitlinks_checked(
    repo: Repo,
) -> None:
    # sub's config makes git refuse the repository, so listing sub's index fails; once that
    # config is removed the host's git reads the index and visits the gitlink it names, in a
    # folder the walk skips
    inner = "sub/node_modules/x"
    env = repo.run(
        "git init -q sub\n"
        f"git init -q {inner} && git -C {inner} commit -q --allow-empty -m x\n"
        f"printf '{repo.plant()}' >> {inner}/.git/config\n"
        "git -C sub update-index --add --cacheinfo"
        f" 160000,$(git -C {inner} rev-parse HEAD),node_modules/x\n"
        "git -C sub commit -q -m with-x\n"
        "printf '[core]\\n\\trepositoryformatversion = 1\\n[extensions]\\n\\tnosuch = 1\\n'"
        " >> sub/.git/config\n"
        "git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub\n"
    )
    _refused(env, "sub/.git/config", f"{inner}/.git/config")
    assert not (repo.root / inner / ".git" / "config").exists()
    repo.status_runs_nothing("sub", inner)


def test_a_git_file_pointing_a_submodule_at_a_planted_folder_is_removed(repo: Repo) -> None:
    env = repo.run(
        "git init -q --bare stash/evil.git\n"
        "git --git-dir=stash/evil.git config core.bare false\n"
        f"printf '{repo.plant()}' >> stash/evil.git/config\n"
        "mkdir sub && printf 'gitdir: ../stash/evil.git\\n' > sub/.git\n"
        "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub\n"
    )
    _refused(env, "sub/.git")
    assert not (repo.root / "sub" / ".git").exists()
    repo.status_runs_nothing("sub")


_EXISTING_ATTACKS = {
    "nested config": "printf '{plant}' >> lib/.git/config",
    "submodule config": "printf '{plant}' >> .git/modules/mod/config",
    "nested hook": "printf '#!/bin/sh\\ntouch {canary}\\n' > lib/.git/hooks/post-checkout"
    " && chmod +x lib/.git/hooks/post-checkout",
    "submodule pointer": "printf 'gitdir: ../lib/.git\\n' > mod/.git"
    " && printf '{plant}' >> lib/.git/config",
}


@pytest.mark.parametrize("attack", sorted(_EXISTING_ATTACKS))
def test_an_existing_nested_repository_and_submodule_stay_read_only(
    repo: Repo, attack: str
) -> None:
    # a submodule with its git folder in .git/modules, and a nested repository of its own
    (repo.root / "lib").mkdir()
    repo.git("init", "-q", "-b", "main", cwd=repo.root / "lib")
    repo.git("commit", "-q", "--allow-empty", "-m", "lib", cwd=repo.root / "lib")
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", "./lib", "mod")
    repo.git("commit", "-q", "-m", "with lib")
    assert (repo.root / "mod" / ".git").is_file()
    script = _EXISTING_ATTACKS[attack].format(plant=repo.plant(), canary=repo.canary)
    env = repo.run(
        f"{script} && exit 1 || true\n"
        "echo change > mod/file.txt\n"
        "git -C lib commit -q --allow-empty -m 'in the sandbox'\n"
        "git status --short > status.txt\n"
    )
    assert env.outcome == "completed", env.refusal  # the write was refused, nothing removed
    assert "fsmonitor" not in (repo.root / "lib" / ".git" / "config").read_text()
    assert "fsmonitor" not in (repo.root / ".git" / "modules" / "mod" / "config").read_text()
    assert "modules/mod" in (repo.root / "mod" / ".git").read_text()
    assert not (repo.root / "lib" / ".git" / "hooks" / "post-checkout").exists()
    assert (repo.root / "mod" / "file.txt").read_text() == "change\n"  # the controls
    assert repo.git("log", "-1", "--format=%s", cwd=repo.root / "lib") == "in the sandbox"
    repo.status_runs_nothing("lib", "mod")
    repo.git("checkout", "-q", "-b", "other", cwd=repo.root / "lib")  # runs post-checkout
    assert not repo.canary.exists()


def test_a_git_folder_a_git_file_points_to_in_the_workspace_stays_read_only(
    tmp_path: Path,
) -> None:
    # the workspace's .git is a file (git init --separate-git-dir): its git folder has a name
    # of its own, and its config is as much the host's code
    repo = Repo(tmp_path, separate=".repo")
    assert (repo.root / ".git").is_file()
    env = repo.run(f"printf '{repo.plant()}' >> .repo/config && exit 1 || true\n")
    assert env.outcome == "completed", env.refusal
    assert "fsmonitor" not in (repo.root / ".repo" / "config").read_text()
    repo.status_runs_nothing()


@pytest.mark.parametrize("exists", [True, False], ids=["there", "not yet"])
def test_a_hooks_folder_the_config_names_in_the_worktree_is_out_of_reach(
    repo: Repo, exists: bool
) -> None:
    # the person's own config keeps hooks in the worktree (.husky/ is a tool's config, covered
    # as such: a folder of no known tool is the case here)
    repo.git("config", "core.hooksPath", "scripts/hooks")
    hook = repo.root / "scripts" / "hooks" / "pre-commit"
    if exists:
        hook.parent.mkdir(parents=True)
        hook.write_text("#!/bin/sh\nexit 0\n")
        hook.chmod(0o755)
    env = repo.run(
        "mkdir -p scripts/hooks || true\n"
        f"printf '#!/bin/sh\\ntouch {repo.canary}\\n' > scripts/hooks/pre-commit || true\n"
        "chmod +x scripts/hooks/pre-commit || true\n"
    )
    if exists:
        assert env.outcome == "completed", env.refusal
        assert hook.read_text() == "#!/bin/sh\nexit 0\n"
    else:
        _refused(env, "hooks")
        assert not hook.parent.exists()
    repo.git("commit", "-q", "--allow-empty", "-m", "by the person")  # runs pre-commit
    assert not repo.canary.exists()


def test_a_config_file_the_config_includes_is_out_of_reach(repo: Repo) -> None:
    repo.git("config", "include.path", "config.local")  # in .git, not there yet
    env = repo.run(f"printf '{repo.plant()}' > .git/config.local\n")
    _refused(env, "config.local")
    assert not (repo.root / ".git" / "config.local").exists()
    repo.status_runs_nothing()


def test_ordinary_git_work_in_the_sandbox_still_works(repo: Repo) -> None:
    env = repo.run(
        "echo b > b.txt && git add b.txt && git commit -q -m second\n"
        "git checkout -q -b feature\n"
        "echo c > c.txt && git add c.txt && git commit -q -m third\n"
        "git init -q fresh && echo d > fresh/d.txt\n"
        "git -C fresh add d.txt && git -C fresh commit -q -m inner\n"
        "git -C fresh remote add origin https://example.org/fresh.git\n"
        "git clone -q . cloned\n"
        "git status --short > status.txt\n"
    )
    assert env.outcome == "completed", env.refusal
    assert repo.git("rev-parse", "--abbrev-ref", "HEAD") == "feature"
    assert repo.git("log", "--format=%s", "main") == "second\nfirst"
    assert repo.git("log", "--format=%s", cwd=repo.root / "fresh") == "inner"
    assert "example.org" in (repo.root / "fresh" / ".git" / "config").read_text()
    assert repo.git("log", "-1", "--format=%s", cwd=repo.root / "cloned") == "third"
    assert "[remote" in (repo.root / "cloned" / ".git" / "config").read_text()
    repo.status_runs_nothing("fresh", "cloned")

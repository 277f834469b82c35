"""``proctor init`` starts a workspace whose first skill's test passes, keeps what exists, and
refuses the home folder and ``/``; no command uses either as a workspace, and a workspace's
``.proctor/`` is created 0700."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import UsageError
from proctor.runtime.boundary.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]


def _proctor(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    home = tmp_path / "user"
    home.mkdir()
    out.update(HOME=str(home), PROCTOR_HOME=str(tmp_path / "proctor-home"))
    out["PYTHONPATH"] = str(REPO / "src")
    return out


def test_init_scaffolds_a_workspace_whose_first_test_passes(
    tmp_path: Path, env: dict[str, str]
) -> None:
    made = _proctor(tmp_path, env, "init", "proj", "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    assert doc["schema"] == "proctor.init.v1"
    assert ".proctor/" in doc["created"] and "skills/hello/tests/greet.yaml" in doc["created"]
    root = tmp_path / "proj"
    assert stat.S_IMODE(os.stat(root / ".proctor").st_mode) == 0o700
    tested = _proctor(root, env, "test", "skills/hello")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
    checked = _proctor(root, env, "check")
    assert checked.returncode == 0, checked.stdout
    # a second init keeps the edited skill
    (root / "skills" / "hello" / "SKILL.md").write_text("mine", encoding="utf-8")
    again = _proctor(root, env, "init")
    assert again.returncode == 0 and "nothing to create" in again.stdout
    assert (root / "skills" / "hello" / "SKILL.md").read_text(encoding="utf-8") == "mine"


def test_home_and_root_are_refused_as_workspaces_and_nothing_is_written(
    env: dict[str, str],
) -> None:
    home = Path(env["HOME"])
    for args in (("init",), ("run", "skills/x", "-i", "a=b"), ("check",), ("audit", "verify")):
        done = _proctor(home, env, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "error[workspace_refused]" in done.stderr and "proctor init" in done.stderr
        assert "Traceback" not in done.stderr
    assert sorted(os.listdir(home)) == []
    done = _proctor(Path("/"), env, "init")
    assert done.returncode == 2 and "workspace_refused" in done.stderr


def test_discover_refuses_home_and_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(UsageError) as caught:
        Workspace.discover(tmp_path)
    assert caught.value.code == "workspace_refused"
    with pytest.raises(UsageError):
        Workspace.discover(Path("/"))
    (tmp_path / "project").mkdir()
    assert Workspace.discover(tmp_path / "project").root.name == "project"


def test_state_folder_is_created_private(tmp_path: Path) -> None:
    from proctor.runtime.engine.session import Session

    root = tmp_path / "fresh"
    (root / "skills").mkdir(parents=True)
    session = Session(Workspace(root), environ={"PROCTOR_HOME": str(tmp_path / "h")})
    try:
        session.audit.emit("probe", run_id=None, step_index=None)
        assert session.store is not None
    finally:
        session.close()
    assert stat.S_IMODE(os.stat(root / ".proctor").st_mode) == 0o700

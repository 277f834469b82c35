"""Which files are what: the authority files a run never writes (guard modules, other tools'
code-running config, what the workspace declares) and proctor's state it never touches."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.core.paths import TOOL_CONFIG
from proctor.errors import ConfigError, RefusedCall
from proctor.runtime.boundary.workspace import Workspace


def refused(ws: Workspace, path: str, access: str = "write") -> RefusedCall:
    with pytest.raises(RefusedCall) as info:
        ws.resolve(path, access)  # type: ignore[arg-type]
    assert str(ws.root) not in info.value.message
    return info.value


def write(root: Path, rel: str, text: str = "x\n") -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    write(folder, "src/main.py")
    return folder


def test_a_guard_module_named_by_path_is_never_written(root: Path) -> None:
    write(root, "proctor.toml", '[policy]\nguards = "checks/mine.py"\n')
    write(root, "checks/mine.py")
    write(root, "checks/other.py")
    ws = Workspace(root)
    assert "checks/mine.py" in ws.authority_files
    err = refused(ws, "checks/mine.py")
    assert (err.code, err.details["rule"]) == ("authority_file", "guard_module")
    assert refused(ws, "CHECKS/Mine.py").details["rule"] == "guard_module"
    assert ws.resolve("checks/mine.py", "read").rel == "checks/mine.py"
    assert ws.resolve("checks/other.py", "write").rel == "checks/other.py"


@pytest.mark.parametrize(
    ("ref", "protected", "free"),
    [
        ("guardpkg.rules", ["guardpkg/rules.py", "guardpkg/helpers.py", "guardpkg/new.py"], []),
        ("a.b.c", ["a/b/c.py", "a/b/c/__init__.py", "a/b/util.py"], ["a/other.py"]),
        ("myguards", ["myguards.py", "myguards/__init__.py", "myguards/x.py"], ["myguardsx.py"]),
    ],
)
def test_a_dotted_guard_module_protects_its_whole_package_folder(
    root: Path, ref: str, protected: list[str], free: list[str]
) -> None:
    write(root, ".proctor/config", f'[policy]\nguards = ["{ref}"]\n')
    ws = Workspace(root)
    for path in protected:
        assert refused(ws, path).details["rule"] == "guard_module", path
    for path in free:
        assert ws.resolve(path, "write").rel == path


@pytest.mark.parametrize("entry", sorted(TOOL_CONFIG))
def test_other_tools_code_running_config_is_never_written(root: Path, entry: str) -> None:
    path = entry + "settings.json" if entry.endswith("/") else entry
    ws = Workspace(root)
    for spelled in (path, "sub/project/" + path, path.upper()):
        err = refused(ws, spelled)
        assert err.code in {"authority_file", "sensitive_path"}, spelled  # .envrc is both
        if err.code == "authority_file":
            assert err.details["rule"] == "tool_config"
    write(root, path)
    if entry != ".envrc":
        assert ws.resolve(path, "read").rel == path  # reading it is fine
    assert (Workspace(root).authority_files & {entry.rstrip("/"), path}) != set()


def test_the_found_authority_files_are_complete(root: Path) -> None:
    for rel in (
        "policies/p.yaml",
        "directives/d.md",
        "proctor.toml",
        ".git/config",
        ".git/hooks/pre-commit",
        ".github/workflows/ci.yml",
        "nested/.vscode/tasks.json",
        "skills/s/SKILL.md",
        ".mcp.json",
    ):
        write(root, rel, "# x\n")
    files = Workspace(root).authority_files
    assert {
        "policies",
        "directives",
        "proctor.toml",
        ".git/config",
        ".git/hooks",
        ".github/workflows",
        "nested/.vscode",
        "skills/s/SKILL.md",
        ".mcp.json",
    } <= files
    assert "src/main.py" not in files and "src" not in files


def test_state_placed_inside_the_workspace_is_never_read_listed_or_written(root: Path) -> None:
    write(root, "logs/audit.jsonl", '{"secret": "CANARY"}\n')
    write(root, "signed/index.jsonl")
    write(root, "db/runs.db")
    write(root, "db/runs.db-wal")
    environ = {
        "PROCTOR_AUDIT_LOG": "logs/audit.jsonl",  # relative: taken from the workspace
        "PROCTOR_RECEIPT_DIR": str(root / "signed"),
        "PROCTOR_DATABASE_PATH": str(root / "db" / "runs.db"),
        "PROCTOR_HOME": str(root / "home"),
        "PROCTOR_SIGNING_KEY": str(root / "keys" / "k.pem"),
    }
    ws = Workspace(root, environ=environ)
    for path in (
        "logs/audit.jsonl",
        "signed",
        "signed/index.jsonl",
        "db/runs.db",
        "db/runs.db-wal",
        "db/runs.db-shm",
        "db/runs.db-checked",
        "db/runs.db-damaged",
        "db/runs.db-checking",
        "home/signing_key.pem",
        "keys/k.pem",
    ):
        for access in ("read", "list", "write"):
            err = refused(ws, path, access)
            assert (err.code, err.details["rule"]) == ("sensitive_path", "proctor_state"), path
    assert {"logs/audit.jsonl", "signed", "db/runs.db", "home", "keys/k.pem"} <= ws.state_files
    assert ws.state_files <= ws.authority_files
    assert ws.resolve("logs/other.txt", "read").rel == "logs/other.txt"
    # the session's settings reach the run's workspace
    plain = Workspace(root, environ={})
    assert plain.resolve("logs/audit.jsonl", "read").rel == "logs/audit.jsonl"
    assert plain.governing(extra_authority=frozenset(), environ=environ).is_state(
        str(root / "logs" / "audit.jsonl")
    )


def test_containment_extends_and_narrows_only_where_it_may(root: Path) -> None:
    write(
        root,
        "proctor.toml",
        '[containment]\nauthority = ["deploy/", "Makefile"]\n'
        'allow_write = [".vscode/settings.json"]\n',
    )
    write(root, ".vscode/settings.json", "{}\n")
    write(root, ".vscode/tasks.json", "{}\n")
    ws = Workspace(root)
    assert ws.allow_write == frozenset({".vscode/settings.json"})
    assert refused(ws, "deploy/run.sh").details["rule"] == "authority_file"
    assert refused(ws, "Makefile").details["rule"] == "authority_file"
    assert ws.resolve(".vscode/settings.json", "write").rel == ".vscode/settings.json"
    assert refused(ws, ".vscode/tasks.json").details["rule"] == "tool_config"
    assert refused(ws, ".vscode/launch.json").details["rule"] == "tool_config"
    files = ws.authority_files
    assert ".vscode/tasks.json" in files
    assert ".vscode" not in files and ".vscode/settings.json" not in files


@pytest.mark.parametrize(
    "allowed",
    [
        "policies/p.yaml",
        ".env",
        "../x",
        "/etc/x",
        "src/main.py",
        "proctor.toml",
        "skills/s/SKILL.md",
    ],
)
def test_allow_write_lifts_the_tool_config_rule_and_no_other(root: Path, allowed: str) -> None:
    write(root, "proctor.toml", f'[containment]\nallow_write = ["{allowed}"]\n')
    ws = Workspace(root)
    with pytest.raises(ConfigError) as info:
        _ = ws.allow_write
    assert info.value.code == "bad_config"
    assert refused(ws, "src/other.py").code == "bad_config"  # unsure what is authority: no write
    assert ws.resolve("src/main.py", "read").rel == "src/main.py"


def test_allow_write_cannot_lift_a_guard_module(root: Path) -> None:
    write(
        root,
        "proctor.toml",
        '[policy]\nguards = ".claude/g.py"\n[containment]\nallow_write = [".claude/x.json"]\n',
    )
    assert Workspace(root).allow_write == frozenset({".claude/x.json"})
    write(
        root,
        "proctor.toml",
        '[policy]\nguards = ".claude/g.py"\n[containment]\nallow_write = [".claude/g.py"]\n',
    )
    with pytest.raises(ConfigError):
        _ = Workspace(root).allow_write


def test_a_home_holding_the_workspace_leaves_the_workspace_usable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = home / "projects" / "ws"
    write(root, "notes.md")
    write(home, "signing_key.pem")
    ws = Workspace(root, environ={"PROCTOR_HOME": str(home)}).reaching({"up": tmp_path})
    assert ws.resolve("notes.md", "write").rel == "notes.md"
    err = refused(ws, "$up/home/signing_key.pem", "read")
    assert (err.code, err.details["rule"]) in {
        ("sensitive_path", "proctor_state"),
        ("sensitive_path", "private_key_name"),
    }
    assert refused(ws, "$up/home/projects/other.txt", "read").details["rule"] == "proctor_state"


def test_state_paths_follow_the_current_folder_and_links_between_two_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paths of proctor's state as the settings name them are kept between asks; what
    they resolve to is asked again each time: a new current folder, or a link swapped, is
    seen by the next ask."""
    from proctor.runtime.boundary.rules import state_paths

    root, one, two = tmp_path / "ws", tmp_path / "one", tmp_path / "two"
    for folder in (root, one, two):
        folder.mkdir()
    env = {"PROCTOR_AUDIT_LOG": "log/audit.jsonl", "PROCTOR_HOME": str(tmp_path / "home")}
    (one / "log").mkdir()
    (two / "log").mkdir()
    monkeypatch.chdir(one)
    assert str(one / "log" / "audit.jsonl") in state_paths(root, env)
    monkeypatch.chdir(two)
    found = state_paths(root, env)
    assert str(two / "log" / "audit.jsonl") in found
    assert str(one / "log" / "audit.jsonl") not in found
    (tmp_path / "h1").mkdir()
    (tmp_path / "h2").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "h1")
    assert str(tmp_path / "h1") in state_paths(root, env)
    (tmp_path / "home").unlink()
    (tmp_path / "home").symlink_to(tmp_path / "h2")
    found = state_paths(root, env)
    assert str(tmp_path / "h2") in found and str(tmp_path / "h1") not in found

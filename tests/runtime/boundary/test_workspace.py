"""Workspace discovery and containment: each refusal names the relative path and the rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.errors import ProctorError, RefusedCall
from proctor.runtime.boundary.workspace import Workspace

PEM = (
    b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    b"-----END OPENSSH PRIVATE KEY-----\n"
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "README.md").write_text("hello\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    return Workspace(root)


def refused(ws: Workspace, path: str, access: str = "read") -> RefusedCall:
    with pytest.raises(RefusedCall) as info:
        ws.resolve(path, access)  # type: ignore[arg-type]
    err = info.value
    assert str(ws.root) not in err.message, "a refusal must never show the host path"
    assert str(ws.root.parent) not in err.message
    return err


def test_plain_paths_resolve_inside(ws: Workspace) -> None:
    got = ws.resolve("src/main.py", "read")
    assert got.rel == "src/main.py"
    assert got.abs == ws.root / "src" / "main.py"
    assert ws.resolve(".", "list").rel == "."
    assert ws.resolve("./src//../README.md", "read").rel == "README.md"
    assert ws.resolve("src\\main.py", "read").rel == "src/main.py"
    assert ws.resolve("new/file.txt", "write").rel == "new/file.txt"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("", "path_empty"),
        ("a\x00b", "path_nul"),
        ("a\nb", "path_control_char"),
        ("a\x1b[31mred", "path_control_char"),
        ("a/" * 2100, "path_too_long"),
        ("x" * 300, "path_too_long"),
        ("/etc/passwd", "path_absolute"),
        ("\\etc\\passwd", "path_absolute"),
        ("C:\\Windows\\win.ini", "path_absolute"),
        ("c:/x", "path_absolute"),
        ("//server/share/x", "path_absolute"),
        ("..", "path_outside_workspace"),
        ("../outside.txt", "path_outside_workspace"),
        ("src/../../outside.txt", "path_outside_workspace"),
        ("..\\outside.txt", "path_outside_workspace"),
        ("src/" + "../" * 30 + "etc/passwd", "path_outside_workspace"),
    ],
)
def test_malformed_and_escaping_paths_are_refused(ws: Workspace, path: str, code: str) -> None:
    err = refused(ws, path)
    assert err.code == code
    assert "path" in err.details


def test_absolute_path_inside_is_still_refused(ws: Workspace) -> None:
    err = refused(ws, str(ws.root / "README.md"))
    assert err.code == "path_absolute"


def test_symlink_to_outside_is_refused(ws: Workspace) -> None:
    os.symlink(ws.root.parent / "outside.txt", ws.root / "link.txt")
    os.symlink(ws.root.parent, ws.root / "up")
    os.symlink("../outside.txt", ws.root / "rel-link.txt")
    for path in ("link.txt", "up/outside.txt", "up", "rel-link.txt", "src/../up/ws/../outside.txt"):
        err = refused(ws, path)
        assert err.code == "path_outside_workspace", path
        assert path in err.message or "..." in err.message


def test_symlink_inside_resolves_to_its_target(ws: Workspace) -> None:
    os.symlink("src", ws.root / "code")
    got = ws.resolve("code/main.py", "read")
    assert got.rel == "src/main.py"
    # ".." after a symlinked folder is taken from the target, as the kernel does.
    os.symlink("src/deep", ws.root / "deep")
    (ws.root / "src" / "deep").mkdir()
    assert ws.resolve("deep/../main.py", "read").rel == "src/main.py"


def test_symlink_loop_is_refused(ws: Workspace) -> None:
    os.symlink("b", ws.root / "a")
    os.symlink("a", ws.root / "b")
    os.symlink("self", ws.root / "self")
    assert refused(ws, "a").code == "path_symlink_loop"
    assert refused(ws, "self/x").code == "path_symlink_loop"


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        (".env", "env_file"),
        ("src/.env.production", "env_file"),
        (".ENV", "env_file"),
        (".env ", "env_file"),
        (".git/config", "git_metadata"),
        (".proctor/runs.sqlite", "proctor_state"),
        ("id_rsa", "private_key_name"),
        ("server.pem", "private_key_name"),
        (".npmrc", "npmrc"),
        (".netrc", "netrc"),
        (".pgpass", "pgpass"),
        (".ssh/id_ed25519", "ssh_dir"),
        (".aws/credentials", "aws_dir"),
        (".docker/config.json", "docker_config"),
        (".kube/config", "kube_dir"),
    ],
)
@pytest.mark.parametrize("access", ["read", "list", "write"])
def test_sensitive_paths_are_refused_for_every_access(
    ws: Workspace, path: str, rule: str, access: str
) -> None:
    err = refused(ws, path, access)
    assert err.code == "sensitive_path"
    assert err.details["rule"] == rule
    assert rule in err.message


def test_env_template_is_readable(ws: Workspace) -> None:
    (ws.root / ".env.example").write_text("KEY=\n")
    assert ws.resolve(".env.example", "read").rel == ".env.example"


def test_symlink_to_a_sensitive_file_is_refused_on_the_resolved_path(ws: Workspace) -> None:
    (ws.root / ".env").write_text("TOKEN=x\n")
    os.symlink(".env", ws.root / "notes.txt")
    err = refused(ws, "notes.txt")
    assert err.code == "sensitive_path"
    assert err.details["rule"] == "env_file"


def test_sensitive_name_pointing_elsewhere_is_still_refused(ws: Workspace) -> None:
    os.symlink("README.md", ws.root / ".env")
    assert refused(ws, ".env").code == "sensitive_path"


def test_private_key_content_is_refused_whatever_the_name(ws: Workspace) -> None:
    (ws.root / "notes.txt").write_bytes(b"my notes\n" + PEM)
    for access in ("read", "write"):
        err = refused(ws, "notes.txt", access)
        assert err.code == "sensitive_path"
        assert err.details["rule"] == "private_key_content"
    # Listing a name does not read it; fs.list checks content heads itself.
    assert ws.resolve("notes.txt", "list").rel == "notes.txt"


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("policies/default.yaml", "policies_dir"),
        ("directives/main.md", "directives_dir"),
        ("skills/hello/SKILL.md", "skill_package"),
        ("skills/hello/run.yaml", "skill_package"),
        ("proctor.toml", "workspace_config"),
    ],
)
def test_authority_files_are_never_written(ws: Workspace, path: str, rule: str) -> None:
    err = refused(ws, path, "write")
    assert err.code == "authority_file"
    assert err.details["rule"] == rule
    (ws.root / path).parent.mkdir(parents=True, exist_ok=True)
    (ws.root / path).write_text("x: 1\n")
    assert ws.resolve(path, "read").rel == path


def test_symlink_into_policies_is_refused_for_write(ws: Workspace) -> None:
    (ws.root / "policies").mkdir()
    os.symlink("policies", ws.root / "pol")
    err = refused(ws, "pol/new.yaml", "write")
    assert err.code == "authority_file"


def test_authority_files_are_discovered_and_cached(ws: Workspace) -> None:
    pkg = ws.root / "catalog" / "greet"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: greet\n---\n")
    (pkg / "run.yaml").write_text("minimum_proctor: 0.1\n")
    (ws.root / "node_modules" / "x").mkdir(parents=True)
    (ws.root / "node_modules" / "x" / "SKILL.md").write_text("")
    assert ws.authority_files == frozenset({"catalog/greet/SKILL.md", "catalog/greet/run.yaml"})
    (ws.root / "late").mkdir()
    (ws.root / "late" / "SKILL.md").write_text("")
    assert "late/SKILL.md" not in ws.authority_files  # cached per instance


def test_extra_authority_is_never_written(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, extra_authority=frozenset({"guards/mine.py"}))
    with pytest.raises(RefusedCall) as info:
        ws.resolve("Guards/Mine.py", "write")
    assert info.value.details["rule"] == "authority_file"


def test_discover_walks_up_to_the_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCTOR_HOME", str(tmp_path / "home" / ".proctor"))
    (tmp_path / "home" / ".proctor").mkdir(parents=True)
    project = tmp_path / "home" / "project"
    (project / "skills").mkdir(parents=True)
    (project / "src" / "deep").mkdir(parents=True)
    assert Workspace.discover(project / "src" / "deep").root == project.resolve()
    git_root = tmp_path / "home" / "repo"
    (git_root / ".git").mkdir(parents=True)
    (git_root / "a").mkdir()
    assert Workspace.discover(git_root / "a").root == git_root.resolve()
    state = tmp_path / "home" / "st"
    (state / ".proctor").mkdir(parents=True)
    assert Workspace.discover(state).root == state.resolve()
    # The home state folder does not make the home folder a workspace.
    loose = tmp_path / "home" / "loose"
    loose.mkdir()
    found = Workspace.discover(loose).root
    assert found == loose.resolve()
    assert Workspace.discover(loose).state_dir == loose.resolve() / ".proctor"


def test_state_dir_is_the_real_roots_proctor_folder_once_built(tmp_path: Path) -> None:
    """state_dir is held once asked (a run asks it twice): still root/.proctor, for a derived
    workspace as for its parent."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    ws = Workspace(tmp_path / "link")
    assert ws.state_dir == tmp_path / "real" / ".proctor"
    assert ws.state_dir is ws.state_dir
    derived = ws.governing(extra_authority=frozenset({"x"}), environ={})
    assert derived.state_dir == ws.state_dir


def test_a_held_governing_workspace_is_dropped_when_its_root_is_a_link_or_no_folder(
    tmp_path: Path,
) -> None:
    """The workspace a session's runs are governed by is handed out again only while its root
    is still its own real path and a folder (one lookup answers both): a root swapped for a
    link, or for a file, is derived again (and checked as a new workspace is)."""
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root)
    env: dict[str, str] = {}
    held = ws.governing(extra_authority=frozenset({"x"}), environ=env)
    assert ws.governing(extra_authority=frozenset({"x"}), environ=env) is held
    moved = tmp_path / "moved"
    root.rename(moved)
    root.symlink_to(moved)
    try:
        again = ws.governing(extra_authority=frozenset({"x"}), environ=env)
    except ProctorError:
        again = None
    assert again is not held
    root.unlink()
    root.write_text("a file where the workspace was")
    try:
        again = ws.governing(extra_authority=frozenset({"x"}), environ=env)
    except ProctorError:
        again = None
    assert again is not held

"""Guard modules run only when the trust admits the very bytes that then run.

Each guard here writes a marker file when it is executed: a marker that is absent proves the
module never ran; one that names the other version proves which bytes ran.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.errors import ConfigError
from proctor.policy import GuardFiles, load_workspace_policies, read_guard_files, trusting
from tests.policy.conftest import TOOLS

GUARD = (
    "import pathlib\n"
    "pathlib.Path({marker!r}).write_text({text!r})\n"
    "from proctor.policy import register_guard\n"
    "register_guard('team_guard')(lambda ctx: None)\n"
)


def _workspace(tmp_path: Path, text: str = "trusted") -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "marker"
    (ws / "proctor.toml").write_text('[policy]\nguards = "guards.py"\n')
    (ws / "guards.py").write_text(GUARD.format(marker=str(marker), text=text))
    return ws, marker


def test_no_trust_given_runs_nothing(tmp_path: Path) -> None:
    ws, marker = _workspace(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_workspace_policies(ws, tools=TOOLS, environ={})
    assert info.value.code == "guards_untrusted"
    assert not marker.exists()


def test_a_trust_of_other_bytes_runs_nothing(tmp_path: Path) -> None:
    ws, marker = _workspace(tmp_path)
    digest = read_guard_files(ws).digest
    (ws / "guards.py").write_text(GUARD.format(marker=str(marker), text="edited"))
    with pytest.raises(ConfigError) as info:
        load_workspace_policies(ws, tools=TOOLS, environ={}, trust=trusting(digest))
    assert info.value.code == "guards_untrusted"
    assert not marker.exists()
    # the config is covered too: naming the same module differently is new bytes
    (ws / "guards.py").write_text(GUARD.format(marker=str(marker), text="trusted"))
    assert read_guard_files(ws).digest == digest
    (ws / "proctor.toml").write_text('[policy]\nguards = ["guards.py"]\n')
    assert read_guard_files(ws).digest != digest


def test_a_module_swapped_after_the_trust_looked_runs_the_bytes_it_trusted(
    tmp_path: Path,
) -> None:
    ws, marker = _workspace(tmp_path)
    digest = read_guard_files(ws).digest
    admit = trusting(digest)
    swapped: list[str] = []

    def admit_then_swap(files: GuardFiles) -> None:
        admit(files)
        # the race: the file is replaced between the trust's look and the execution
        (ws / "evil.py").write_text(GUARD.format(marker=str(marker), text="swapped"))
        os.replace(ws / "evil.py", ws / "guards.py")
        swapped.append(files.digest)

    loaded = load_workspace_policies(ws, tools=TOOLS, environ={}, trust=admit_then_swap)
    assert swapped == [digest]
    assert loaded.user_guards == ("team_guard",)
    assert marker.read_text() == "trusted"  # the bytes hashed are the bytes that ran


@pytest.mark.parametrize("how", ["file", "folder"])
def test_a_guard_reached_through_a_link_is_refused(tmp_path: Path, how: str) -> None:
    ws, marker = _workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "guards.py").write_text(GUARD.format(marker=str(marker), text="outside"))
    if how == "file":
        (ws / "guards.py").unlink()
        os.symlink(outside / "guards.py", ws / "guards.py")
    else:
        os.symlink(outside, ws / "lib")
        (ws / "proctor.toml").write_text('[policy]\nguards = "lib/guards.py"\n')
    with pytest.raises(ConfigError) as info:
        read_guard_files(ws)
    assert info.value.code == "bad_guard_module" and "link" in info.value.message
    with pytest.raises(ConfigError):
        load_workspace_policies(ws, tools=TOOLS, environ={}, trust=lambda files: None)
    assert not marker.exists()


def test_a_pipe_in_the_guards_place_is_refused_without_waiting(tmp_path: Path) -> None:
    ws, _marker = _workspace(tmp_path)
    (ws / "guards.py").unlink()
    os.mkfifo(ws / "guards.py")
    with pytest.raises(ConfigError) as info:
        read_guard_files(ws)
    assert info.value.code == "bad_guard_module" and "regular" in info.value.message


def test_a_linked_config_is_refused(tmp_path: Path) -> None:
    ws, _marker = _workspace(tmp_path)
    (tmp_path / "other.toml").write_text('[policy]\nguards = "guards.py"\n')
    (ws / "proctor.toml").unlink()
    os.symlink(tmp_path / "other.toml", ws / "proctor.toml")
    with pytest.raises(ConfigError) as info:
        read_guard_files(ws)
    assert info.value.code == "bad_config"


def test_a_workspace_naming_no_module_asks_no_trust(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')

    def never(files: GuardFiles) -> None:
        raise AssertionError("asked")

    loaded = load_workspace_policies(ws, tools=TOOLS, environ={}, trust=never)
    assert loaded.user_guards == ()
    assert read_guard_files(ws).modules == ()


SRC = Path(__file__).resolve().parents[2] / "src" / "proctor"

# Every place proctor's own process executes code it did not ship, and every way to reach the
# guard loader: a new one must be added here on purpose, with the trust in its path.
EXECUTES = {
    ("exec", "policy/user_guards.py"),  # a workspace's guard modules, once trusted
    ("exec", "contracts/values.py"),  # __init__ methods compiled from proctor's own text
    ("exec", "runtime/tools/pyfunc_runner.py"),  # worker steps, in the sandboxed subprocess
    ("load_user_guards", "policy/cache.py"),  # run_policies: asks its required trust first
    ("load_user_guards", "policy/workspace.py"),  # the Python API: trusts nothing by default
    ("run_policies", "runtime/engine/session.py"),  # Session.policy: the home's trust
}
FORBIDDEN = {"exec_module", "spec_from_file_location", "run_path", "run_module", "__import__"}


def test_guard_modules_are_reached_only_through_the_trust() -> None:
    import ast

    found: set[tuple[str, str]] = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            assert name not in FORBIDDEN, f"{rel} calls {name}: code from disk outside the trust"
            if name in ("exec", "load_user_guards", "run_policies"):
                found.add((name, rel))
    assert found == EXECUTES

"""Authority presets: saved in the home, applied only in the workspaces they list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import UsageError
from proctor.runtime.home.presets import list_presets, preset_authority, remove_preset, save_preset


def test_save_apply_and_refuse_elsewhere(tmp_path: Path) -> None:
    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    save_preset("careful", {"effects": "ask", "reach": "workspace"}, [here], env)
    got = preset_authority("careful", here, env)
    assert (got.effects, got.reach, got.set_by) == ("ask", "workspace", "preset")
    with pytest.raises(UsageError) as refused:
        preset_authority("careful", there, env)
    assert refused.value.code == "preset_not_for_workspace"
    assert [p["name"] for p in list_presets(env)] == ["careful"]
    remove_preset("careful", env)
    with pytest.raises(UsageError) as gone:
        preset_authority("careful", here, env)
    assert gone.value.code == "preset_not_found"


@pytest.mark.parametrize("name", ["", "../x", "UPPER", "a" * 65])
def test_bad_names_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError):
        save_preset(name, {}, [tmp_path], {"PROCTOR_HOME": str(tmp_path)})


def test_cli_round_trip_and_run_with_preset(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    (root / "auth.json").write_text(json.dumps({"effects": "none"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(tmp_path / "home")
    repo = Path(__file__).resolve().parents[3]

    def proctor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proctor", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert proctor("authority", "save", "ro", "auth.json").returncode == 0
    assert "ro" in proctor("authority", "list").stdout
    assert json.loads(proctor("authority", "show", "ro").stdout)["authority"]["effects"] == "none"
    (root / "n.md").write_text("x\n")
    example = str(repo / "examples" / "notes-editor") + "#publish"
    out = proctor(
        "run", example, "-i", "source=n.md", "-i", "target=m.md", "--authority", "ro", "--json"
    )
    assert out.returncode == 1
    assert json.loads(out.stdout)["refusal"]["code"] == "effects_none"
    assert not (root / "m.md").exists()
    assert proctor("authority", "remove", "ro").returncode == 0

"""``proctor mcp --authority NAME`` applies a saved preset (and only then), and ``--workspace``
serves a workspace the host cannot start in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, recorder_for, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _save_preset(ws: Ws, name: str, authority: dict[str, Any], *workspaces: str) -> None:
    args = [arg for w in workspaces for arg in ("--workspace", w)]
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "authority", "save", name, "-", *args],
        cwd=ws.root, env=ws.env, input=json.dumps(authority),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def _publish(ws: Ws, *args: str) -> dict[str, Any]:
    from mcp import Client

    async def go() -> dict[str, Any]:
        recorder = recorder_for(stdio_params(ws, "notes-editor#publish", *args))
        with anyio.fail_after(60):
            async with Client(recorder) as client:
                result = await client.call_tool(
                    "notes-editor__publish", {"source": "note.txt", "target": "copy.txt"}
                )
                version = client.protocol_version
        recorder.validate(version)
        doc: dict[str, Any] = result.structured_content
        return doc

    return anyio.run(go)


def test_a_write_over_mcp_waits_for_a_person_by_default(ws: Ws) -> None:
    ws.add_example("notes-editor")
    (ws.root / "note.txt").write_text("a note\n", encoding="utf-8")
    paused = _publish(ws)
    assert paused["status"] == "needs_approval"
    (request,) = paused["requests"]
    assert request["kind"] == "approval" and request["tool"] == "fs.write"
    assert request["request_digest"].startswith("sha256:")
    assert not (ws.root / "copy.txt").exists()
    assert any("effects ask, reach workspace" in note for note in paused["notes"]), paused
    (started,) = [e for e in ws.audit() if e["event"] == "run_started"]
    assert started["authority"]["effects"] == "ask"
    assert started["authority"]["set_by"] == "default"


def test_a_preset_applies_only_when_named(ws: Ws) -> None:
    ws.add_example("notes-editor")
    (ws.root / "note.txt").write_text("a note\n", encoding="utf-8")
    _save_preset(ws, "trusting", {"effects": "allow"})

    done = _publish(ws, "--authority", "trusting")
    assert done["outcome"] == "completed"
    assert (ws.root / "copy.txt").read_text(encoding="utf-8") == "a note\n"
    assert not any("no host set an authority" in note for note in done["notes"])

    # Without --authority, the preset does not apply: the managed default asks.
    (ws.root / "copy.txt").unlink()
    paused = _publish(ws)
    assert paused["status"] == "needs_approval"
    assert not (ws.root / "copy.txt").exists()


def test_a_preset_for_another_workspace_refuses_to_start(ws: Ws, tmp_path: Any) -> None:
    ws.add_example("notes-editor")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _save_preset(ws, "theirs", {"effects": "allow"}, str(elsewhere))
    proc = ws.proctor("mcp", "notes-editor", "--authority", "theirs")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "preset_not_for_workspace" in err
    proc = ws.proctor("mcp", "notes-editor", "--authority", "missing")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "preset_not_found" in err


def test_workspace_option_serves_from_any_folder(ws: Ws, tmp_path: Any) -> None:
    from mcp import Client, StdioServerParameters

    ws.add_example("hello-world")
    outside = tmp_path / "outside"
    outside.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "proctor", "mcp", "--workspace", str(ws.root), "hello-world"],
        cwd=str(outside),
        env=ws.env,
    )

    async def go() -> Any:
        with anyio.fail_after(60):
            async with Client(params) as client:
                return await client.call_tool("hello-world__greet", {"message": "hi"})

    result = anyio.run(go)
    assert result.structured_content["outcome"] == "completed"
    assert any(e["event"] == "run_sealed" for e in ws.audit())
    assert not (outside / ".proctor").exists()

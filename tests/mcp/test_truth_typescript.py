"""The points of ``test_truth.py`` with the official TypeScript SDK's client
(``tests/mcp/ts_client.cjs``): a held turn call waits for a person and says where; a paused
run's text names the next step by request kind, never a bare ``proctor resume RUN_ID``;
``run_ambiguous`` only when two runs wait; ``elicitation: {}`` is form mode.

The SDK is found in ``.ci/node`` (where ``.ci/run`` installs a pinned version with npm) or at
``$PROCTOR_MCP_TS_SDK`` (a ``node_modules`` folder holding it). Without it the tests skip,
unless ``PROCTOR_REQUIRE_INSPECTOR=1`` (set by ``.ci/run``, which installs both) makes that a
failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import REPO, Ws
from tests.mcp.test_truth import BARE_RESUME, KINDS, WRITER

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
SCRIPT = Path(__file__).with_name("ts_client.cjs")


def _modules() -> Path:
    named = os.environ.get("PROCTOR_MCP_TS_SDK")
    found = Path(named) if named else REPO / ".ci" / "node" / "node_modules"
    if (found / "@modelcontextprotocol" / "sdk" / "package.json").is_file() and shutil.which(
        "node"
    ):
        return found
    message = "the MCP TypeScript SDK is not installed (.ci/run installs it into .ci/node)"
    if os.environ.get("PROCTOR_REQUIRE_INSPECTOR") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _calls(ws: Ws, args: list[str], calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    modules = _modules()
    spec = {
        "command": sys.executable,
        "args": ["-m", "proctor", "mcp", *args],
        "cwd": str(ws.root),
        "env": ws.env,
        "calls": calls,
    }
    done = subprocess.run(
        [shutil.which("node") or "node", str(SCRIPT), json.dumps(spec)],
        cwd=ws.root, env={**ws.env, "NODE_PATH": str(modules)},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


def test_a_held_turn_call_and_a_paused_agent_turn(ws: Ws) -> None:
    ws.add_skill("writer", WRITER)
    console = "http://127.0.0.1:8765"
    call = {"turn": "write", "tool": "fs.write", "call_id": "c1"}
    call["args"] = {"path": "note.txt", "content": "hello\n", "create": True}
    out = _calls(
        ws, ["writer", "--console-url", console], [("writer__note", {}), ("turn_call", call)]
    )
    paused, held = out["results"]
    run_id = paused["structuredContent"]["run_id"]
    assert "turn_status" in _text(paused) and BARE_RESUME.search(_text(paused)) is None
    assert held.get("isError") in (False, None), _text(held)
    assert held["structuredContent"]["status"] == "needs_approval"
    assert "refused" not in _text(held) and "waits for a person" in _text(held)
    assert f"proctor approve {run_id} write/turn/c1" in _text(held)
    assert f"{console}/runs/{run_id}/requests/write/turn/c1" in _text(held)
    assert not (ws.root / "note.txt").exists()


def test_approval_and_question_text_and_form_mode_for_an_empty_capability(ws: Ws) -> None:
    ws.add_skill("kinds", KINDS)
    out = _calls(ws, ["kinds"], [("kinds__put", {}), ("kinds__pick", {})])
    approval, question = out["results"]
    for result in (approval, question):
        assert BARE_RESUME.search(_text(result)) is None, _text(result)
    run_id = approval["structuredContent"]["run_id"]
    assert f"`proctor approve {run_id} put`" in _text(approval)
    run_id = question["structuredContent"]["run_id"]
    assert f"`proctor approve {run_id} colour`" in _text(question)
    # elicitation: {} declared: the approval and the question were both asked in form mode
    # (the question with its choices), and declined: no change
    asked, picked = out["elicited"]
    for each in (asked, picked):
        assert each.get("mode", "form") == "form" and "requestedSchema" in each
    assert "new line" in asked["message"]
    assert approval["structuredContent"]["status"] == "needs_approval"
    assert not (ws.root / "page.txt").exists()


def test_run_ambiguous_only_when_two_runs_wait(ws: Ws) -> None:
    ws.add_skill("writer", WRITER)
    call = {"turn": "write", "tool": "fs.write", "call_id": "c1"}
    call["args"] = {"path": "note.txt", "content": "hello\n", "create": True}
    out = _calls(
        ws,
        ["writer"],
        [
            ("writer__note", {}),
            ("writer__note", {}),
            ("turn_status", {"turn": "write"}),
            ("turn_complete", {"run": "$run:0", "turn": "write", "output": {"done": True}}),
            ("turn_status", {"turn": "write"}),
            ("turn_call", call),
            ("turn_call", call),
        ],
    )
    first, second, two, finished, *after = out["results"]
    assert two["isError"] is True and "run_ambiguous" in _text(two)
    assert first["structuredContent"]["run_id"] in _text(two)
    assert finished["structuredContent"]["outcome"] == "completed"
    for result in after:
        assert "run_ambiguous" not in _text(result), _text(result)
        assert result["structuredContent"]["run"] == second["structuredContent"]["run_id"]
    assert not (ws.root / "note.txt").exists()

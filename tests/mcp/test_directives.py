"""Directives over MCP (``proctor mcp --directives``), driven by the official Python SDK client.

- ``list_directives``, ``run_directive`` and ``list_tools`` take the reference kernel's
  arguments; a directive run pauses for the client, whose turn is worked with the directive's
  own tool names (``read_file``), listed beside proctor's in ``turn_status``.
- With ``--drive`` a stub model on loopback (speaking the chat completions API) works each of
  the reference kernel's 13 shipped directives, read unchanged from its wheel.
- A directive the server does not expose is refused before anything runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given

from tests.fuzzing import FUZZ, VALUES
from tests.mcp.conftest import Ws, recorder_for, stdio_params
from tests.runtime.agent_stub import Reply, Seen, StubModel, answer, offered_tools

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

DIALECT = "chat_completions"
REFERENCE_IDS = [
    "active_debug", "create_directive", "debug_research", "edit_directive", "file_analysis",
    "health_check", "policy_audit", "review_directive_policies", "rotate_credentials",
    "setup_credentials", "test_coverage_audit", "tool_catalog", "update_policies",
]  # fmt: skip
FIRST_CALL: dict[str, dict[str, Any]] = {
    "list_dir": {"path": "."},
    "read_file": {"path": "README.md"},
    "write_file": {"path": "output/report.md", "content": "# report\n"},
    "list_tools": {"include_args": True},
    "list_directives": {},
    "validate_directive": {"path": "directives/file_analysis.md"},
    "resolve_secret": {"alias": "github_token"},
    "echo": {"message": "hello"},
}


def _proctor(ws: Ws, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws.root, env=ws.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _configure(ws: Ws, stub: StubModel) -> None:
    for key, value in (
        ("agent.provider", "local"),
        ("agent.dialect", DIALECT),
        ("agent.endpoint_url", stub.url),
        ("agent.model", "stub-model"),
    ):
        done = _proctor(ws, "config", "set", key, value)
        assert done.returncode == 0, done.stderr


def test_a_directive_turn_worked_with_read_file(ws: Ws) -> None:
    from mcp import Client

    (ws.root / "notes.txt").write_text("alpha beta gamma\n", encoding="utf-8")
    seen: dict[str, Any] = {}

    async def go() -> None:
        recorder = recorder_for(stdio_params(ws, "--directives"))
        with anyio.fail_after(90):
            async with Client(recorder) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                seen["names"] = set(tools)
                seen["run_schema"] = tools["run_directive"].input_schema
                seen["listed"] = (
                    await client.call_tool("list_directives", {"category": "task"})
                ).structured_content
                seen["tools"] = (
                    await client.call_tool("list_tools", {"include_args": False})
                ).structured_content
                paused = await client.call_tool(
                    "run_directive", {"directive_id": "file_summary", "request": "notes.txt"}
                )
                seen["paused"] = paused.structured_content
                seen["status"] = (
                    await client.call_tool("turn_status", {"turn": "work"})
                ).structured_content
                call = {
                    "turn": "work",
                    "tool": "read_file",
                    "args": {"path": "notes.txt", "encoding": "utf-8"},
                    "call_id": "c1",
                    "reason": "read the file the request names",
                }
                seen["read"] = await client.call_tool("turn_call", call)
                seen["listed_dir"] = await client.call_tool(
                    "turn_call",
                    {"turn": "work", "tool": "list_dir", "args": {"path": "."}, "call_id": "c2"},
                )
                seen["write"] = await client.call_tool(
                    "turn_call",
                    {
                        "turn": "work",
                        "tool": "write_file",
                        "args": {"path": "output/x.md", "content": "x"},
                        "call_id": "c3",
                    },
                )
                done = await client.call_tool(
                    "turn_complete",
                    {"turn": "work", "output": {"done": True, "summary": "alpha beta gamma"}},
                )
                seen["done"] = done.structured_content
                version = client.protocol_version
        recorder.validate(version)

    anyio.run(go)
    assert {"list_directives", "run_directive", "list_tools", "turn_call"} <= seen["names"]
    # the reference's argument shapes
    assert set(seen["run_schema"]["properties"]) == {"directive_id", "request", "max_steps"}
    assert seen["run_schema"]["required"] == ["directive_id", "request"]
    listed = seen["listed"]["directives"]
    assert listed and all(d["category"] == "task" for d in listed)
    assert "file_summary" in {d["id"] for d in listed}
    by_name = {t["name"]: t for t in seen["tools"]["tools"]}
    assert by_name["fs.read"]["reference_name"] == "read_file"
    assert "args_summary" not in by_name["fs.read"]
    assert seen["paused"]["status"] == "needs_agent"
    # both names for each call the turn may make
    calls = {c["tool"]: c for c in seen["status"]["calls"]}
    assert calls["fs.read"]["reference_tool"] == "read_file"
    assert calls["fs.list"]["reference_tool"] == "list_dir"
    assert calls["fs.read"]["reference_input_schema"]["required"] == ["path"]
    read = seen["read"].structured_content
    assert seen["read"].is_error is False, read
    assert read["status"] == "completed" and read["tool"] == "fs.read"
    assert read["reference_tool"] == "read_file"
    assert read["result"]["content"] == "alpha beta gamma\n"
    assert seen["listed_dir"].structured_content["status"] == "completed"
    # write_file maps to fs.write, which this directive does not allow: refused, nothing written
    assert seen["write"].is_error is True
    assert seen["write"].structured_content["status"] == "refused"
    assert not (ws.root / "output" / "x.md").exists()
    assert seen["done"]["status"] == "sealed" and seen["done"]["outcome"] == "completed"
    assert seen["done"]["receipt_id"]
    reads = [e for e in ws.audit() if e["event"] == "tool_call" and e.get("tool") == "fs.read"]
    assert len(reads) == 1


def test_a_directive_not_exposed_is_refused_before_anything_runs(ws: Ws) -> None:
    from mcp import Client

    seen: dict[str, Any] = {}

    async def go() -> None:
        params = stdio_params(ws, "--directives", "--directive", "file_summary")
        async with Client(recorder_for(params)) as client:
            with anyio.fail_after(60):
                seen["listed"] = (await client.call_tool("list_directives", {})).structured_content
                seen["other"] = await client.call_tool(
                    "run_directive", {"directive_id": "policy_audit", "request": "audit"}
                )
                seen["bad"] = await client.call_tool(
                    "run_directive", {"directive_id": "file_summary", "request": 3}
                )

    anyio.run(go)
    assert [d["id"] for d in seen["listed"]["directives"]] == ["file_summary"]
    assert seen["other"].is_error is True
    assert "directive_not_exposed" in seen["other"].content[0].text
    assert seen["bad"].is_error is True
    assert "arguments_invalid" in seen["bad"].content[0].text
    assert not (ws.root / ".proctor" / "directive-packages" / "policy_audit").exists()
    refused = [e for e in ws.audit() if e["event"] == "mcp_directive_refused"]
    assert {e["code"] for e in refused} == {"directive_not_exposed", "arguments_invalid"}


def test_start_up_refusals(ws: Ws) -> None:
    unknown = _proctor(ws, "mcp", "--directives", "--directive", "no_such_directive")
    assert unknown.returncode == 2 and "directive_not_found" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    alone = _proctor(ws, "mcp", "--drive")
    assert alone.returncode == 2 and "--directives" in alone.stderr
    unconfigured = _proctor(ws, "mcp", "--directives", "--drive")
    assert unconfigured.returncode == 3 and "agent_provider_missing" in unconfigured.stderr


def _model(seen: Seen) -> Reply:
    """Call the first offered tool once, then finish (one stub serves every directive)."""
    messages = seen.body["messages"]
    if any(m.get("role") == "tool" for m in messages):
        return answer(DIALECT, text='{"done": true, "summary": "ran one step"}')
    offered = sorted(offered_tools(DIALECT, seen))
    name = next(n for n in offered if n in FIRST_CALL)
    return answer(DIALECT, calls=[(name, {**FIRST_CALL[name], "reason": "first step"})])


@pytest.fixture
def reference_workspace(ws: Ws, tmp_path_factory: pytest.TempPathFactory) -> Ws:
    from tests.reference_wheel import reference_members

    files = reference_members(
        tmp_path_factory.mktemp("auro-wheel"), "auro_runtime/resources/directives/", ".md"
    )
    assert sorted(name[:-3] for name in files) == REFERENCE_IDS
    folder = ws.root / "directives"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    (ws.root / "README.md").write_text("# a project\n", encoding="utf-8")
    return ws


@pytest.mark.network_fetch
def test_the_thirteen_reference_directives_list_and_run_over_mcp(reference_workspace: Ws) -> None:
    from mcp import Client

    ws = reference_workspace
    seen: dict[str, Any] = {"runs": {}}
    with StubModel([_model]) as stub:
        _configure(ws, stub)

        async def go() -> None:
            params = stdio_params(ws, "--directives", "--drive", *ws.allow())
            async with Client(recorder_for(params)) as client:
                with anyio.fail_after(300):
                    seen["listed"] = (
                        await client.call_tool("list_directives", {})
                    ).structured_content
                    for directive_id in REFERENCE_IDS:
                        result = await client.call_tool(
                            "run_directive",
                            {"directive_id": directive_id, "request": "do your job",
                             "max_steps": 500},
                        )  # fmt: skip
                        seen["runs"][directive_id] = result.structured_content

        anyio.run(go)
        requests = list(stub.seen)
    listed = {d["id"]: d for d in seen["listed"]["directives"]}
    assert set(REFERENCE_IDS) <= set(listed)
    assert seen["listed"]["refused"] == []
    for directive_id in REFERENCE_IDS:
        text = (ws.root / "directives" / f"{directive_id}.md").read_text(encoding="utf-8")
        assert listed[directive_id]["source"] == f"directives/{directive_id}.md"
        doc = seen["runs"][directive_id]
        assert doc["status"] == "sealed" and doc["outcome"] == "completed", (directive_id, doc)
        assert doc["result"] == {"done": True, "summary": "ran one step"}
        assert doc["receipt_id"]
        # the directive's body reached the model as its instructions
        body = text.split("---", 2)[2].strip()[:200]
        assert any(body in r.body["messages"][0]["content"] for r in requests), directive_id
    runs = [e for e in _audit(ws.root) if e["event"] == "mcp_directive_run"]
    assert {e["max_steps"] for e in runs} == {50}  # clamped as the reference clamps


def _audit(root: Path) -> list[dict[str, Any]]:
    path = root / ".proctor" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@FUZZ
@given(value=VALUES)
def test_directive_tool_arguments_are_refused_with_a_code(value: Any) -> None:
    """Whatever a client sends, the check answers nothing but ``arguments_invalid``."""
    from proctor.errors import UsageError
    from proctor.mcp.directive_tools import TOOLS
    from proctor.mcp.turn_declarations import check_arguments

    for name in TOOLS:
        try:
            check_arguments(name, value, TOOLS)
        except UsageError as exc:
            assert exc.code == "arguments_invalid"


API_DIRECTIVE = """---
id: api_call
description: Call the team API and report what it says
tools: [http_request]
category: task
---
# API call

Call the API with the alias `api_token`, then report.
"""


def test_a_host_worked_turn_delivers_an_alias_to_the_api_it_names(ws: Ws) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from mcp import Client

    secret = "mcp-alias-material-83c1"
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/me"
    (ws.root / "directives").mkdir()
    (ws.root / "directives" / "api_call.md").write_text(API_DIRECTIVE, encoding="utf-8")
    (ws.root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n', encoding="utf-8")
    results: dict[str, Any] = {}

    async def go() -> None:
        params = stdio_params(
            ws, "--directives", *ws.allow(), env={"AURO_SECRET_API_TOKEN": secret}
        )
        async with Client(recorder_for(params)) as client:
            with anyio.fail_after(90):
                await client.call_tool(
                    "run_directive", {"directive_id": "api_call", "request": "call it"}
                )
                results["status"] = (
                    await client.call_tool("turn_status", {"turn": "work"})
                ).structured_content
                call = {"url": url, "auth_alias": "api_token", "auth_scheme": "token"}
                results["call"] = await client.call_tool(
                    "turn_call",
                    {"turn": "work", "tool": "http_request", "args": call, "call_id": "c1"},
                )
                results["done"] = (
                    await client.call_tool(
                        "turn_complete",
                        {"turn": "work", "output": {"done": True, "summary": "called"}},
                    )
                ).structured_content

    try:
        anyio.run(go)
    finally:
        server.shutdown()
        server.server_close()
    [entry] = results["status"]["calls"]
    assert entry["tool"] == "http.request" and entry["reference_tool"] == "http_request"
    assert "auth_alias" in entry["reference_input_schema"]["properties"]
    call = results["call"].structured_content
    assert call["status"] == "completed", call
    assert seen == [f"Token {secret}"]
    assert results["done"]["outcome"] == "completed"
    written = "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in ws.root.rglob("*") if p.is_file()
    )
    assert secret not in written + json.dumps(call) + json.dumps(results["done"])

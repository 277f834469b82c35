"""``proctor mcp --transport http``: a real server on a free loopback port, driven by the
official SDK client; the bearer check, the key and bind refusals.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from proctor.mcp.catalog import TURN_TOOL_NAMES
from proctor.runtime.records.audit import verify_chain
from tests.mcp.conftest import API_KEY, Ws, recorder_for

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_lists_and_calls_over_http_with_the_caller_audited(ws: Ws, http_server: Any) -> None:
    from mcp import Client
    from proctor.mcp import token_id

    ws.add_example("hello-world")
    server = http_server("hello-world")

    async def go() -> tuple[Any, Any, str, Any]:
        recorder = recorder_for(server.url)
        with anyio.fail_after(60):
            async with Client(recorder) as client:
                tools = await client.list_tools()
                results: list[Any] = []

                async def call(n: int) -> None:
                    results.append(
                        await client.call_tool("hello-world__greet", {"message": f"m{n}"})
                    )

                async with anyio.create_task_group() as group:
                    for n in range(4):
                        group.start_soon(call, n)
                version = client.protocol_version
        recorder.validate(version)
        return tools, results, version, recorder

    tools, results, version, _ = anyio.run(go)
    # Nothing beyond the skill named on the command line (and the turn tools of its runs).
    assert {t.name for t in tools.tools} == {"hello-world__greet"} | TURN_TOOL_NAMES
    assert all(
        r.structured_content and r.structured_content["outcome"] == "completed" for r in results
    ), [(r.structured_content, r.content) for r in results]
    assert sorted(r.structured_content["result"]["greet"]["text"] for r in results) == [
        "m0", "m1", "m2", "m3"
    ]  # fmt: skip
    assert len({r.structured_content["run_id"] for r in results}) == 4
    requests = [e for e in ws.audit() if e["event"] == "mcp_request"]
    assert requests and all(e["caller"]["token_id"] == token_id(API_KEY) for e in requests)
    assert all(e["caller"]["transport"] == "http" for e in requests)
    assert API_KEY not in (ws.root / ".proctor" / "audit.jsonl").read_text(encoding="utf-8")
    assert version == "2026-07-28"
    # Four runs at once in four sessions still leave one unbroken hash chain.
    report = verify_chain(ws.root / ".proctor" / "audit.jsonl")
    assert report.ok, report


def test_the_server_parses_http_and_runs_its_loop_in_c(ws: Ws, http_server: Any) -> None:
    # what the mcp extra installs is what a served call goes through: httptools' parser and
    # uvloop's loop, loaded in the serving process (in Python, h11 and asyncio's loop cost
    # about half a millisecond of server CPU per call more; bench/mcp_http.py)
    from proctor.mcp.http import http_protocol, loop_options

    ws.add_example("hello-world")
    server = http_server("hello-world")
    assert http_protocol() == "httptools" and loop_options() == {"use_uvloop": True}
    response = httpx.post(
        server.url,
        json=INITIALIZE,
        headers={**HEADERS, "Authorization": f"Bearer {API_KEY}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    maps = Path(f"/proc/{server.proc.pid}/maps").read_text(encoding="utf-8")
    assert "/httptools/parser/parser." in maps and "/uvloop/loop." in maps


@pytest.mark.parametrize(
    ("authorization", "reason"),
    [
        (None, "missing"),
        ("Basic dXNlcjpwYXNz", "malformed"),
        ("Bearer " + API_KEY[:-1] + "X", "mismatch"),
        ("Bearer " + API_KEY + "0", "mismatch"),
    ],
)
def test_a_bad_bearer_token_gets_401_and_is_audited(
    ws: Ws, http_server: Any, authorization: str | None, reason: str
) -> None:
    ws.add_example("hello-world")
    server = http_server("hello-world")
    headers = dict(HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "hello-world__greet", "arguments": {"message": "x"}},
    }
    with httpx.Client(timeout=30) as client:
        first = client.post(server.url, headers=headers, content=json.dumps(INITIALIZE))
        second = client.post(server.url, headers=headers, content=json.dumps(call))
        good = client.post(
            server.url,
            headers={**HEADERS, "Authorization": f"Bearer {API_KEY}"},
            content=json.dumps(INITIALIZE),
        )
    assert first.status_code == 401 and second.status_code == 401
    assert first.headers["www-authenticate"].startswith("Bearer")
    assert good.status_code == 200
    events = ws.audit()
    refused = [e for e in events if e["event"] == "mcp_auth_refused"]
    # the first refusal from a source is written at once; the next in its minute is counted
    assert [(e["reason"], e["count"]) for e in refused] == [(reason, 1)]
    assert all(e["peer"] == "127.0.0.1" for e in refused)
    # Nothing behind the check saw the refused requests: one initialize, no run.
    assert [e["method"] for e in events if e["event"] == "mcp_request"] == ["initialize"]
    assert not any(e["event"] == "run_started" for e in events)
    _stop(server)
    refused = [e for e in ws.audit() if e["event"] == "mcp_auth_refused"]
    assert [(e["count"], e.get("reasons")) for e in refused] == [(1, None), (1, {reason: 1})]


def _stop(server: Any) -> None:
    server.proc.terminate()
    server.proc.wait(timeout=30)  # uvicorn shuts down, then dies of the SIGTERM it caught


def test_a_thousand_unauthenticated_requests_add_two_audit_lines(ws: Ws, http_server: Any) -> None:
    ws.add_example("hello-world")
    server = http_server("hello-world")
    before = len(ws.audit())
    reasons = [None, "Basic dXNlcjpwYXNz", "Bearer " + "x" * 24]
    with httpx.Client(timeout=30) as client:
        for n in range(1000):
            auth = reasons[n % 3]
            headers = dict(HEADERS) if auth is None else {**HEADERS, "Authorization": auth}
            r = client.post(server.url, headers=headers, content=json.dumps(INITIALIZE))
            assert r.status_code == 401
    _stop(server)
    added = ws.audit()[before:]
    refused = [e for e in added if e["event"] == "mcp_auth_refused"]
    assert len(refused) == 2, refused
    assert sum(e["count"] for e in refused) == 1000
    assert refused[1]["reasons"] == {"malformed": 333, "mismatch": 333, "missing": 333}
    assert added == refused  # nothing else: no request reached the MCP app
    assert {e["peer"] for e in refused} == {"127.0.0.1"}
    assert verify_chain(ws.root / ".proctor" / "audit.jsonl").ok


def test_a_client_cannot_name_its_own_address_in_the_audit_log(ws: Ws, http_server: Any) -> None:
    # the log names the peer the connection came from: a forwarding header a client writes
    # itself (any local program can) neither replaces that address nor opens a window of its
    # own for each address it claims
    ws.add_example("hello-world")
    server = http_server("hello-world")
    before = len(ws.audit())
    forged = ["203.0.113.9", "198.51.100.7, 10.0.0.1"]
    with httpx.Client(timeout=30) as client:
        for n, claimed in enumerate(forged * 5):
            headers = {
                **HEADERS,
                "X-Forwarded-For": claimed,
                "X-Forwarded-Proto": "https",
                "Forwarded": f"for={claimed.split(',')[0]}",
                "Authorization": f"Bearer wrong{n}",
            }
            r = client.post(server.url, headers=headers, content=json.dumps(INITIALIZE))
            assert r.status_code == 401
    _stop(server)
    refused = [e for e in ws.audit()[before:] if e["event"] == "mcp_auth_refused"]
    assert [(e["peer"], e["count"]) for e in refused] == [("127.0.0.1", 1), ("127.0.0.1", 9)]


def test_refusals_coalesce_per_source_per_window() -> None:
    from proctor.mcp.http import OTHER_SOURCES, RefusalCoalescer

    now = [0.0]
    coalescer = RefusalCoalescer(window=60.0, max_sources=2, clock=lambda: now[0])
    first = coalescer.refused("10.0.0.1", "missing", "POST", "/mcp")
    assert [(e["peer"], e["count"]) for e in first] == [("10.0.0.1", 1)]
    for _ in range(9):
        assert coalescer.refused("10.0.0.1", "mismatch", "POST", "/mcp") == []
    assert len(coalescer.refused("10.0.0.2", "missing", "GET", "/")) == 1
    # a third source shares the overflow window, so many addresses cannot multiply lines
    assert [e["peer"] for e in coalescer.refused("10.0.0.3", "missing", "GET", "/")] == [
        OTHER_SOURCES
    ]
    assert coalescer.refused("10.0.0.4", "missing", "GET", "/") == []
    now[0] = 59.9
    assert coalescer.refused("10.0.0.1", "missing", "POST", "/mcp") == []
    now[0] = 60.0  # the windows end: their counts are written, and a new window opens
    events = coalescer.refused("10.0.0.1", "missing", "POST", "/mcp")
    assert [(e["peer"], e["count"], e.get("reasons")) for e in events] == [
        ("10.0.0.1", 10, {"mismatch": 9, "missing": 1}),
        (OTHER_SOURCES, 1, {"missing": 1}),  # 10.0.0.2 had nothing after its first: no line
    ]  # and 10.0.0.1's new window opens without a line: one line per source per window
    assert coalescer.refused("10.0.0.1", "missing", "POST", "/mcp") == []
    # a source refused every second for ten minutes writes one line a minute, and together
    # they count every refusal (2 above, 600 here)
    lines = []
    for second in range(60, 660):
        now[0] = float(second)
        lines += coalescer.refused("10.0.0.1", "missing", "POST", "/")
    lines += coalescer.flush()
    assert [e["peer"] for e in lines] == ["10.0.0.1"] * 10
    assert sum(e["count"] for e in lines) == 602
    assert coalescer.flush() == []
    # after a quiet window, the next refusal is written at once again
    now[0] = 2000.0
    assert [e["count"] for e in coalescer.refused("10.0.0.1", "missing", "POST", "/")] == [1]


@pytest.mark.parametrize(
    ("args", "key", "code"),
    [
        ((), None, "mcp_api_key_missing"),
        ((), "", "mcp_api_key_missing"),
        ((), "clé-non-ascii-0123456789", "mcp_api_key_invalid"),
        ((), "short", "mcp_api_key_invalid"),
        ((), "has space 0123456789abc", "mcp_api_key_invalid"),
        (("--host", "0.0.0.0"), API_KEY, "mcp_public_url_required"),
    ],
)
def test_the_http_server_refuses_to_start(
    ws: Ws, args: tuple[str, ...], key: str | None, code: str
) -> None:
    ws.add_example("hello-world")
    env = {} if key is None else {"PROCTOR_MCP_API_KEY": key}
    proc = ws.proctor("mcp", "hello-world", "--transport", "http", "--port", "0", *args, env=env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert f"error[{code}]" in err
    assert "serving" not in err and out == ""
    if key:
        assert key not in err
    assert not any(e["event"].startswith("mcp_server") for e in ws.audit())


def test_a_public_bind_needs_and_accepts_a_public_url(ws: Ws) -> None:
    from proctor.errors import UsageError
    from proctor.mcp import check_http_settings

    env = {"PROCTOR_MCP_API_KEY": API_KEY}
    settings = check_http_settings("0.0.0.0", 0, "https://mcp.example.com", env)
    assert "mcp.example.com" in settings.allowed_hosts
    assert settings.allowed_origins == ("https://mcp.example.com",)
    with pytest.raises(UsageError):
        check_http_settings("0.0.0.0", 0, "ftp://x", env)
    assert check_http_settings("::1", 0, None, env).public_url is None


def test_a_foreign_host_or_origin_is_refused_and_other_paths_are_not_served(
    ws: Ws, http_server: Any
) -> None:
    # the DNS-rebinding checks reach the SDK's session manager (proctor.mcp.endpoint.McpEndpoint
    # serves it without the SDK's Starlette app), after the bearer check
    ws.add_example("hello-world")
    server = http_server("hello-world")
    good = {**HEADERS, "Authorization": f"Bearer {API_KEY}"}
    body = json.dumps(INITIALIZE)
    with httpx.Client(timeout=30) as client:
        host = client.post(server.url, headers={**good, "Host": "evil.example:80"}, content=body)
        origin = client.post(
            server.url, headers={**good, "Origin": "http://evil.example"}, content=body
        )
        elsewhere = client.post(server.url.replace("/mcp", "/other"), headers=good, content=body)
        unauthenticated = client.post(server.url.replace("/mcp", "/other"), content=body)
        served = client.post(server.url, headers=good, content=body)
    assert (host.status_code, origin.status_code) == (421, 403)
    assert elsewhere.status_code == 404 and unauthenticated.status_code == 401
    assert served.status_code == 200, served.text
    requests = [e["method"] for e in ws.audit() if e["event"] == "mcp_request"]
    assert requests == ["initialize"]

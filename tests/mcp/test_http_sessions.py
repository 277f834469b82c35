""":class:`proctor.mcp.sessions.HandshakeSessions`: a handshake-era session (``Mcp-Session-Id``)
held by proctor answers every request as the SDK's own session manager answers it (the same
status, headers and body, event stream and all), whether the request is answered on proctor's
path or handed to the session's SDK transport; a request naming a session that is not the
caller's, forged, closed or expired runs nothing. ASGI-level, the same small SDK server behind
both stacks; then an elicitation over the handshake protocol on a served endpoint."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from proctor.mcp import sessions as sessions_module
from proctor.mcp.endpoint import McpEndpoint
from proctor.mcp.exchange import ModernExchange
from proctor.mcp.frames import MAX_BODY, StrictFrames
from proctor.mcp.sessions import HandshakeSessions
from tests.mcp.conftest import API_KEY, Ws
from tests.mcp.lifespan import running

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*"],
    allowed_origins=["http://127.0.0.1:*"],
)
VERSION = "2025-11-25"
HEADERS = {
    "host": "127.0.0.1:8000",
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
}


class Tools:
    """A small SDK server's tools: what ran, and on which path."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.paths: list[str] = []  # the dispatch context each call had
        self.cancelled: list[str] = []
        self.started = anyio.Event()

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        self.ran.append(name)
        self.paths.append(type(ctx.session._request_outbound).__name__)
        if name == "slow":  # reports progress, then answers
            await ctx.session.report_progress(1.0, None, "working")
            await ctx.session.report_progress(2.0, 3.0, None)
        elif name == "hang":
            self.started.set()
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(name)
                raise
        elif name == "boom":
            raise RuntimeError("a handler's own failure")
        return types.CallToolResult(
            content=[types.TextContent(text=f"done {name}")],
            structured_content={"name": name, "none": None, "text": "h\u00e9llo \u2603", "f": 0.1},
        )

    async def list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="slow", input_schema={"type": "object"})]
        )


def _server(tools: Tools) -> Server[Any]:
    server: Server[Any] = Server("t", on_list_tools=tools.list)
    server.add_request_handler("tools/call", types.CallToolRequestParams, tools.call)
    return server


@contextlib.asynccontextmanager
async def both(tools: Tools, idle: float | None = 1800) -> AsyncIterator[tuple[Any, Any]]:
    """Proctor's stack (its sessions, its exchange, the SDK's manager behind them) and the
    SDK's manager alone, the same server behind each, lifespans started."""
    server = _server(tools)
    manager = StreamableHTTPSessionManager(
        app=server, security_settings=SECURITY, max_request_body_size=MAX_BODY,
        session_idle_timeout=idle,
    )  # fmt: skip
    sessions = HandshakeSessions(server, SECURITY, max_body=MAX_BODY, idle_timeout=idle)
    exchange = ModernExchange(server, SECURITY, manager.handle_request)
    ours = McpEndpoint(manager, exchange, sessions)
    sdk = McpEndpoint(
        StreamableHTTPSessionManager(
            app=server,
            security_settings=SECURITY,
            max_request_body_size=MAX_BODY,
            session_idle_timeout=idle,
        )
    )
    async with running(ours), running(sdk):
        audit = lambda *a, **k: None  # noqa: E731
        yield StrictFrames(ours, audit), StrictFrames(sdk, audit)


async def _send(
    app: Any,
    body: Any,
    headers: dict[str, str],
    method: str = "POST",
    user: Any = None,
) -> tuple[int, dict[str, str], bytes]:
    raw = b"" if body is None else json.dumps(body).encode()
    scope = {
        "type": "http", "method": method, "path": "/mcp", "raw_path": b"/mcp",
        "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
        "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 40000),
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }  # fmt: skip
    if user is not None:
        scope["user"] = user
    inbox = [{"type": "http.request", "body": raw, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        await anyio.sleep_forever()
        return {}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(10):
        await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    head = {k.decode(): v.decode() for k, v in start["headers"]}
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], head, data


async def _open(app: Any, capabilities: dict[str, Any] | None = None, user: Any = None) -> str:
    """A session opened as a client opens one; its id."""
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": capabilities or {},
                   "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    status, head, _ = await _send(app, init, HEADERS, user=user)
    assert status == 200, status
    sid = head["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, _ = await _send(app, note, _in(sid), user=user)
    assert status == 202
    return sid


def _in(sid: str, **more: str) -> dict[str, str]:
    return {**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": VERSION, **more}


def _call(name: str, rid: int = 7, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"x": 1}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def _same(ours: tuple[int, dict[str, str], bytes], theirs: tuple[int, dict[str, str], bytes],
          ids: tuple[str, str]) -> None:  # fmt: skip
    """The same answer, the session ids aside."""
    assert ours[0] == theirs[0], (ours, theirs)
    mine, sdks = dict(ours[1]), dict(theirs[1])
    if "mcp-session-id" in mine:
        # a session of its own when the request named none (each side minted one)
        ids = ids if ids[0] else (mine["mcp-session-id"], sdks["mcp-session-id"])
        assert mine.pop("mcp-session-id") == ids[0]
        assert sdks.pop("mcp-session-id") == ids[1]
    assert list(mine.items()) == list(sdks.items())
    assert ours[2].replace(ids[0].encode(), b"<sid>") == theirs[2].replace(
        ids[1].encode(), b"<sid>"
    )


CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "call": (_call("plain"), {}),
    "list": ({"jsonrpc": "2.0", "id": "a", "method": "tools/list"}, {}),
    "ping": ({"jsonrpc": "2.0", "id": 3, "method": "ping"}, {}),
    "unknown method": ({"jsonrpc": "2.0", "id": 3, "method": "nothing/here"}, {}),
    "handler fails": (_call("boom"), {}),
    "invalid params": ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}, {}),
    "progress": (_call("slow", progressToken="p1"), {}),
    "progress without a token": (_call("slow"), {}),
}
REFUSED: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "foreign host": (_call("plain"), {"host": "evil.example:80"}),
    "foreign origin": (_call("plain"), {"origin": "http://evil.example"}),
    "no event stream accepted": (_call("plain"), {"accept": "application/json"}),
    "not json typed": (_call("plain"), {"content-type": "text/plain"}),
    "not json-rpc": ({"jsonrpc": "1.0", "id": 3, "method": "ping"}, {}),
    "a notification": ({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}, {}),
    "a stray response": ({"jsonrpc": "2.0", "id": 99, "result": {}}, {}),
    "initialize again": (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_request_on_a_session_is_answered_as_the_sdk_answers_it(case: str) -> None:
    body, extra = CASES[case]
    tools = Tools()

    async def go() -> Any:
        async with both(tools) as (ours, sdk):
            ids = (await _open(ours), await _open(sdk))
            mine = await _send(ours, body, _in(ids[0], **extra))
            theirs = await _send(sdk, body, _in(ids[1], **extra))
            return mine, theirs, ids

    mine, theirs, ids = anyio.run(go)
    _same(mine, theirs, ids)
    assert mine[1]["content-type"] == "text/event-stream"
    if tools.paths:  # answered on proctor's path (the SDK's side ran the dispatcher's)
        assert tools.paths[0] == "Call" and tools.paths[1] != "Call", tools.paths
    if case == "progress":
        events = [e for e in mine[2].decode().split("\r\n\r\n") if e]
        assert len(events) == 3 and '"notifications/progress"' in events[0], events
    if case == "call":
        assert json.loads(mine[2].decode().split("data: ", 1)[1])["result"]["structuredContent"][
            "text"
        ] == ("h\u00e9llo \u2603")


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_proctors_path_does_not_take_gets_the_sdk_transports_answer(case: str) -> None:
    body, extra = REFUSED[case]
    tools = Tools()

    async def go() -> Any:
        async with both(tools) as (ours, sdk):
            ids = (await _open(ours), await _open(sdk))
            return (
                await _send(ours, body, _in(ids[0], **extra)),
                await _send(sdk, body, _in(ids[1], **extra)),
                ids,
            )

    mine, theirs, ids = anyio.run(go)
    _same(mine, theirs, ids)
    assert "Call" not in tools.paths


def test_a_request_before_the_handshake_completes_is_answered_as_the_sdk_answers_it() -> None:
    async def go() -> Any:
        async with both(Tools()) as (ours, sdk):
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": VERSION, "capabilities": {},
                               "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
            ids = []
            for app in (ours, sdk):
                ids.append((await _send(app, init, HEADERS))[1]["mcp-session-id"])
            return [await _send(app, _call("plain"), _in(sid)) for app, sid in
                    zip((ours, sdk), ids, strict=True)], tuple(ids)  # fmt: skip

    (mine, theirs), ids = anyio.run(go)
    _same(mine, theirs, ids)


def test_a_session_without_an_id_or_with_an_unknown_one_is_answered_as_the_sdk_answers_it() -> None:
    tools = Tools()

    async def go() -> list[Any]:
        async with both(tools) as (ours, sdk):
            out = []
            for headers in (HEADERS, _in("0" * 32), _in("not a session")):
                out.append((await _send(ours, _call("plain"), headers),
                            await _send(sdk, _call("plain"), headers)))  # fmt: skip
            get = {"host": "127.0.0.1:8000", "accept": "text/event-stream"}
            out.append((await _send(ours, None, get, "GET"), await _send(sdk, None, get, "GET")))
            return out

    for mine, theirs in anyio.run(go):
        _same(mine, theirs, ("", ""))
        assert mine[0] in (400, 404), mine
    assert tools.ran == []


def test_cancelling_a_request_ends_its_stream_as_the_sdk_ends_it() -> None:
    tools = Tools()

    async def one(app: Any, sid: str) -> Any:
        tools.started = anyio.Event()
        answer: list[Any] = []

        async def call() -> None:
            answer.append(await _send(app, _call("hang", rid=5), _in(sid)))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await tools.started.wait()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 5, "reason": "no"}}  # fmt: skip
            assert (await _send(app, cancel, _in(sid)))[0] == 202
        return answer[0]

    async def go() -> Any:
        async with both(tools) as (ours, sdk):
            ids = (await _open(ours), await _open(sdk))
            return await one(ours, ids[0]), await one(sdk, ids[1]), ids

    mine, theirs, ids = anyio.run(go)
    _same(mine, theirs, ids)
    assert b'"code":-32800' in mine[2]
    assert tools.cancelled == ["hang", "hang"] and tools.paths[0] == "Call"


def test_a_client_that_may_be_asked_is_served_by_the_sdks_transport() -> None:
    # an elicitation waits on the client's answer, which the session's dispatcher correlates:
    # such a client's requests all go to the SDK's transport (here it answers with an error,
    # the client not being there to answer, the same on both sides)
    tools = Tools()

    async def go() -> Any:
        async with both(tools) as (ours, sdk):
            caps = {"elicitation": {"form": {}}}
            ids = (await _open(ours, caps), await _open(sdk, caps))
            return (
                await _send(ours, _call("plain"), _in(ids[0])),
                await _send(sdk, _call("plain"), _in(ids[1])),
                ids,
            )

    mine, theirs, ids = anyio.run(go)
    _same(mine, theirs, ids)
    assert "Call" not in tools.paths and tools.ran == ["plain", "plain"]


def _user(client: str) -> AuthenticatedUser:
    return AuthenticatedUser(AccessToken(token="t", client_id=client, scopes=[]))


def test_another_callers_forged_closed_or_expired_session_runs_nothing() -> None:
    """Attacks on a session's id: the id of a session another credential opened, a forged id,
    the id of a session its client closed (DELETE) and of one that expired. Each is answered
    404 as the SDK answers it, and no handler runs."""
    tools = Tools()

    async def go() -> list[tuple[int, bytes]]:
        async with both(tools, idle=0.2) as (ours, _):
            out = []
            theirs = await _open(ours, user=_user("alice"))
            out.append(await _send(ours, _call("plain"), _in(theirs), user=_user("mallory")))
            out.append(await _send(ours, _call("plain"), _in(theirs)))  # no credential at all
            out.append(await _send(ours, _call("plain"), _in(theirs[:-1] + "0")))
            closed = await _open(ours)
            status, _, _ = await _send(ours, None, _in(closed), "DELETE")
            assert status == 200
            out.append(await _send(ours, _call("plain"), _in(closed)))
            expired = await _open(ours)
            with anyio.fail_after(5):
                while expired in ours.app.sessions._sessions:
                    await anyio.sleep(0.05)
            out.append(await _send(ours, _call("plain"), _in(expired)))
            return [(s, d) for s, _, d in out]

    answers = anyio.run(go)
    assert [s for s, _ in answers] == [404] * 5, answers
    assert all(b'"Session not found"' in d or b"Invalid or expired" in d for _, d in answers)
    assert tools.ran == []


def test_a_session_that_ends_under_a_request_cancels_it(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = Tools()

    async def go() -> Any:
        async with both(tools) as (ours, _):
            sid = await _open(ours)
            answer: list[Any] = []

            async def call() -> None:
                answer.append(await _send(ours, _call("hang"), _in(sid)))

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await tools.started.wait()
                assert (await _send(ours, None, _in(sid), "DELETE"))[0] == 200
            return answer[0]

    status, head, data = anyio.run(go)
    assert status == 200 and head["content-type"] == "text/event-stream" and data == b""
    assert tools.cancelled == ["hang"]


def test_a_long_request_is_pinged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions_module, "PING_EVERY", 0.05)
    tools = Tools()

    async def go() -> Any:
        async with both(tools) as (ours, _):
            sid = await _open(ours)
            answer: list[Any] = []

            async def call() -> None:
                answer.append(await _send(ours, _call("hang", rid=9), _in(sid)))

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await tools.started.wait()
                await anyio.sleep(0.2)
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 9}}  # fmt: skip
                await _send(ours, cancel, _in(sid))
            return answer[0]

    status, _, data = anyio.run(go)
    assert status == 200 and data.startswith(b": ping\r\n\r\n") and b'"code":-32800' in data


def test_an_elicitation_over_the_handshake_protocol_reaches_the_client(
    ws: Ws, http_server: Any
) -> None:
    """The official client on the handshake protocol with an elicitation callback, over a
    served endpoint: the approval is asked on the call's own stream and the run seals."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp_types import ElicitResult

    from tests.mcp.test_elicitation import PAGES

    ws.add_skill("pages", PAGES)
    (ws.root / "page.txt").write_text("old line\n", encoding="utf-8")
    server = http_server("skills/pages", "--trust-client-approvals")
    seen: list[Any] = []

    async def on_elicit(context: Any, params: Any) -> Any:
        seen.append(params)
        return ElicitResult(action="accept", content={"approve": True})

    async def go() -> tuple[dict[str, Any], str]:
        with anyio.fail_after(90):
            headers = {"Authorization": f"Bearer {API_KEY}"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                Client(
                    streamable_http_client(server.url, http_client=http),
                    mode="legacy",
                    elicitation_callback=on_elicit,
                ) as client,
            ):
                result = await client.call_tool("pages__write", {"text": "new line\n"})
                assert result.structured_content is not None
                return dict(result.structured_content), str(client.protocol_version)

    doc, version = anyio.run(go)
    assert version == VERSION and len(seen) == 1
    assert doc["status"] == "sealed" and doc["outcome"] == "completed", doc
    assert (ws.root / "page.txt").read_text() == "new line\n"

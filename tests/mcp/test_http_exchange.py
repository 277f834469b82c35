""":class:`proctor.mcp.exchange.ModernExchange`: a 2026-07-28 request over HTTP answered by
proctor exactly as the SDK's own entry answers it (the same status, type and body: JSON, or an
event stream once the handler reports progress or stays silent), a client that goes away
cancels the handler, and anything the exchange does not take (a refused Host, an Accept
without the event stream, a routing header that disagrees, a notification...) reaches the
SDK's entry and gets its answer. ASGI-level, with a small SDK server; then an approval relayed
over a served endpoint with the official client's default protocol."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from proctor.mcp import exchange as exchange_module
from proctor.mcp.endpoint import McpEndpoint
from proctor.mcp.exchange import ModernExchange
from proctor.mcp.frames import MAX_BODY, StrictFrames, refusal
from tests.fuzzing import FUZZ, mutated
from tests.mcp.conftest import API_KEY, Ws
from tests.mcp.lifespan import running

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*"],
    allowed_origins=["http://127.0.0.1:*"],
)
VERSION = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}


class Tools:
    """A small SDK server's tools: what each call did."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.torn: list[str] = []  # the teardowns a connection ran

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        if name == "slow":  # reports progress, then answers
            await ctx.session.report_progress(1.0, None, "working")
            await ctx.session.report_progress(2.0, 3.0, None)
        elif name == "silent":  # works without a word past the ping interval
            await anyio.sleep(0.35)
        elif name == "hang":
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(name)
                raise
        elif name == "boom":
            raise RuntimeError("a handler's own failure")
        elif name == "teardown":  # leaves its connection a teardown, then answers or waits
            # (a handler reaches its connection through its session)
            ctx.session._connection.exit_stack.callback(self.torn.append, name)
            if params.arguments and params.arguments.get("wait"):
                await anyio.sleep(30)
        return types.CallToolResult(
            content=[types.TextContent(text=f"done {name}")],
            structured_content={"name": name, "none": None, "text": "h\u00e9llo \u2603"},
        )

    async def list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        schema = {"type": "object"}
        return types.ListToolsResult(tools=[types.Tool(name="slow", input_schema=schema)])


@contextlib.asynccontextmanager
async def serving(tools: Tools) -> AsyncIterator[tuple[Any, Any, list[Any]]]:
    """The stack proctor serves (the strict frame reader, the endpoint, the exchange in front
    of the SDK's manager) with its lifespan started; yields it, the manager's own entry, and
    the requests the exchange handed to that entry."""
    server: Server[Any] = Server(
        "t", on_list_tools=tools.list, get_tool_input_schema=lambda name: None
    )
    server.add_request_handler("tools/call", types.CallToolRequestParams, tools.call)
    manager = StreamableHTTPSessionManager(
        app=server, security_settings=SECURITY, max_request_body_size=MAX_BODY
    )
    handed: list[Any] = []

    async def fallback(scope: Any, receive: Any, send: Any) -> None:
        handed.append(scope)
        await manager.handle_request(scope, receive, send)

    endpoint = McpEndpoint(manager, ModernExchange(server, SECURITY, fallback))
    app = StrictFrames(endpoint, lambda *a, **k: None)
    async with running(endpoint):
        yield app, manager.handle_request, handed


def _request(method: str, params: dict[str, Any], rid: int = 1, **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": ENVELOPE}}
    sent = {
        "host": "127.0.0.1:8000",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": VERSION,
        "mcp-method": method,
    }
    if "name" in params:
        sent["mcp-name"] = params["name"]
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    return body, sent


async def _post(
    app: Any,
    body: Any,
    headers: dict[str, str],
    leave_after: float | None = None,
    sends: int | None = None,
) -> tuple[int, dict[str, str], bytes, list[dict[str, Any]]]:
    """Post ``body``; the client goes away after ``leave_after`` seconds, and its connection
    fails after ``sends`` messages of the answer."""
    raw = json.dumps(body).encode()
    scope = {
        "type": "http", "method": "POST", "path": "/mcp", "raw_path": b"/mcp",
        "query_string": b"", "root_path": "", "scheme": "http", "http_version": "1.1",
        "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 40000),
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }  # fmt: skip
    inbox = [{"type": "http.request", "body": raw, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        if leave_after is None:
            await anyio.sleep_forever()
        await anyio.sleep(leave_after)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if sends is not None and len(sent) >= sends:
            raise OSError("the connection broke")
        sent.append(message)

    with anyio.fail_after(10):
        await app(scope, receive, send)
    starts = [m for m in sent if m["type"] == "http.response.start"]
    if not starts:
        return 0, {}, b"", sent
    head = {k.decode(): v.decode() for k, v in starts[0]["headers"]}
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return starts[0]["status"], head, data, sent


def _events(data: bytes) -> list[str]:
    """An event stream's events, pings left out."""
    return [e for e in data.decode().split("\r\n\r\n") if e and not e.startswith(":")]


CASES = {
    "discover": _request("server/discover", {}),
    "list": _request("tools/list", {}),
    "call": _request("tools/call", {"name": "plain", "arguments": {"x": 1}}),
    "unknown method": _request("nothing/here", {}),
    "handler fails": _request("tools/call", {"name": "boom", "arguments": {}}),
    "progress": (
        {**_request("tools/call", {"name": "slow"})[0]},
        _request("tools/call", {"name": "slow"})[1],
    ),
}
CASES["progress"][0]["params"]["_meta"] = {**ENVELOPE, "progressToken": "p1"}


def test_a_teardown_a_handler_leaves_runs_when_it_answers_or_is_cancelled() -> None:
    # the exchange unwinds a connection's stack only when something was pushed on it; what
    # was pushed runs as the SDK's entry runs it, answered or cancelled
    tools = Tools()

    async def go() -> tuple[int, int]:
        async with serving(tools) as (app, _, _):
            answered = await _post(app, *_request("tools/call", {"name": "teardown"}))
            call = _request("tools/call", {"name": "teardown", "arguments": {"wait": True}})
            gone = await _post(app, *call, leave_after=0.05)
        return answered[0], gone[0]

    assert anyio.run(go) == (200, 0)
    assert tools.torn == ["teardown", "teardown"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_exchange_answers_as_the_sdks_entry_does(case: str) -> None:
    body, headers = CASES[case]

    async def go() -> tuple[Any, Any, list[Any]]:
        async with serving(Tools()) as (app, sdk, handed):
            ours = await _post(app, body, headers)
            theirs = await _post(sdk, body, headers)
            return ours, theirs, handed

    ours, theirs, handed = anyio.run(go)
    assert handed == []  # the exchange answered it
    assert ours[0] == theirs[0] and ours[1]["content-type"] == theirs[1]["content-type"]
    if ours[1]["content-type"] == "text/event-stream":
        assert _events(ours[2]) == _events(theirs[2])
    else:
        assert ours[2] == theirs[2]
        assert ours[1]["content-length"] == str(len(ours[2]))
    if case == "progress":  # the notifications first, then the result: an event stream
        events = _events(ours[2])
        assert len(events) == 3 and '"notifications/progress"' in events[0], events
        assert '"result"' in events[2]
    if case == "call":
        assert json.loads(ours[2])["result"]["structuredContent"]["none"] is None


def test_a_silent_handler_gets_an_event_stream_with_pings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange_module, "PING_EVERY", 0.1)
    body, headers = _request("tools/call", {"name": "silent"})

    async def go() -> Any:
        async with serving(Tools()) as (app, _, handed):
            return await _post(app, body, headers), handed

    (status, head, data, _), handed = anyio.run(go)
    assert handed == [] and status == 200 and head["content-type"] == "text/event-stream"
    assert data.startswith(b": ping\r\n\r\n")
    (event,) = _events(data)
    assert json.loads(event.split("data: ", 1)[1])["result"]["structuredContent"]["name"] == (
        "silent"
    )


def test_a_client_that_goes_away_cancels_the_handler_and_gets_nothing() -> None:
    tools = Tools()
    body, headers = _request("tools/call", {"name": "hang"})

    async def go() -> Any:
        async with serving(tools) as (app, _, handed):
            return await _post(app, body, headers, leave_after=0.2), handed

    (status, _, _, sent), handed = anyio.run(go)
    assert handed == [] and tools.cancelled == ["hang"]
    assert status == 0 and sent == []


def test_a_connection_that_breaks_under_a_ping_cancels_the_handler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the stream's head went out, its first ping did not: the handler is cancelled (its run
    # stopped and recorded) and nothing more is written, as when the client goes away
    monkeypatch.setattr(exchange_module, "PING_EVERY", 0.1)
    tools = Tools()
    body, headers = _request("tools/call", {"name": "hang"})

    async def go() -> Any:
        async with serving(tools) as (app, _, handed):
            return await _post(app, body, headers, sends=1), handed

    (status, _, data, sent), handed = anyio.run(go)
    assert handed == [] and tools.cancelled == ["hang"]
    assert status == 200 and data == b"" and len(sent) == 1


REFUSED = {
    "foreign host": {"host": "evil.example:80"},
    "foreign origin": {"origin": "http://evil.example"},
    "no event stream accepted": {"accept": "application/json"},
    "method header disagrees": {"mcp-method": "tools/list"},
    "name header disagrees": {"mcp-name": "other"},
    "unknown version": {"mcp-protocol-version": "2099-01-01"},
    "not json typed": {"content-type": "text/plain"},
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_exchange_does_not_take_gets_the_sdks_answer(case: str) -> None:
    body, headers = _request("tools/call", {"name": "plain"})
    headers = {**headers, **REFUSED[case]}

    async def go() -> Any:
        async with serving(Tools()) as (app, sdk, handed):
            return await _post(app, body, headers), await _post(sdk, body, headers), handed

    ours, theirs, handed = anyio.run(go)
    assert len(handed) == 1  # handed to the SDK's entry, body and all
    assert ours[0] == theirs[0] and ours[0] >= 400 and ours[2] == theirs[2]


def test_a_notification_gets_the_sdks_202() -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}
    _, headers = _request("notifications/initialized", {})

    async def go() -> Any:
        async with serving(Tools()) as (app, _, handed):
            return await _post(app, body, headers), handed

    (status, _, _, _), handed = anyio.run(go)
    assert status == 202 and len(handed) == 1


def test_an_approval_is_relayed_over_http_with_the_clients_default_protocol(
    ws: Ws, http_server: Any
) -> None:
    """The official client's default ('auto': 2026-07-28) over a served endpoint: the write
    pauses as ``input_required``, the client's elicitation answer comes back as the retry's
    request state, and with the opt-in the run continues once and seals."""
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
    decided = [e["decided_by"] for e in ws.audit() if e["event"] == "decision_recorded"]
    assert len(decided) == 1 and decided[0].startswith("client-relayed:"), decided


@FUZZ
@given(
    st.one_of(
        mutated(_request("tools/call", {"name": "plain", "arguments": {"x": 1}})[0]),
        mutated(_request("tools/list", {})[0]),
        mutated(_request("server/discover", {})[0]),
    )
)
def test_any_request_body_gets_the_sdks_answer(body: Any) -> None:
    """A hostile or careless body (a subtree replaced, a key dropped) gets the very answer the
    SDK's own entry gives it, whether the exchange takes it or hands it on; never a 500."""
    method = body.get("method") if isinstance(body, dict) else None
    _, headers = _request(method if isinstance(method, str) else "tools/call", {"name": "plain"})
    if refusal(json.dumps(body)) is not None:
        return  # refused by the strict frame reader before either entry reads it

    async def go() -> Any:
        async with serving(Tools()) as (app, sdk, _):
            return await _post(app, body, headers), await _post(sdk, body, headers)

    ours, theirs = anyio.run(go)
    assert ours[0] == theirs[0] and ours[0] != 500, (ours, theirs)
    assert ours[1].get("content-type") == theirs[1].get("content-type")
    if ours[1].get("content-type") == "text/event-stream":
        assert _events(ours[2]) == _events(theirs[2])
    else:
        assert json.loads(ours[2] or b"null") == json.loads(theirs[2] or b"null")

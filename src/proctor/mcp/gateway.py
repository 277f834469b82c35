"""``proctor mcp --gateway``: the workspace's upstream MCP servers, governed, for any MCP client.

Each pinned upstream tool is served as ``<server>__<tool>`` with its pinned description
(labelled as untrusted upstream text), input and output schemas and annotations. When the
gateway starts, every configured server is started once and each tool it lists that is not
pinned yet is pinned (first use); a tool whose definition changed since its pin stays served
as pinned, and its calls are refused ``tool_definition_changed`` until a person approves the
change (``proctor mcp diff`` / ``approve``).

A client session is one run: the gateway's package (written to ``.proctor/gateway/``, one
agent method whose allowance is exactly the served tools) is run when the session's first
call comes, and each call is a call of that run's turn, admitted like any other (scope,
schema, policy, the approval floor with the exact arguments, budgets, rate limits), audited
and recorded. A write under ``effects: ask`` waits for a person: the client is asked through
elicitation as for served skills (:class:`~proctor.mcp.approvals.ApprovalRelay`), and the call
waits, with progress, until a person decides (``proctor approve``, the console), then runs
once or answers ``approval_declined``. When the server stops, each session's run ends its
turn and seals with a receipt (``proctor history`` lists it as ``mcp-gateway#session``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types as types

from proctor.errors import ProctorError, UsageError
from proctor.mcp.approvals import ApprovalRelay
from proctor.mcp.shared import ServerConfig, TurnHost

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

    from proctor.runtime.engine.session import Session
    from proctor.runtime.gateway.upstreams import Upstreams, UpstreamTool

__all__ = ["GatewayTools", "gateway_name", "open_gateway"]


class GatewayHost(TurnHost, Protocol):
    """What the gateway uses of the server dispatching to it."""

    config: ServerConfig
    approvals: ApprovalRelay


SEPARATOR = "__"
TURN = "serve"
WAIT_POLL = 0.25
BUSY_WAIT = 60.0


def gateway_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` (a server name never holds ``__``)."""
    return f"{server}{SEPARATOR}{tool}"


def _package(root: Path, tools: list[str]) -> Path:
    """Write the gateway's package for ``tools`` (one folder per distinct tool set)."""
    from proctor.receipts.canonical import digest

    folder = root / ".proctor" / "gateway" / digest(sorted(tools))[7:23]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        "---\nname: mcp-gateway\ndescription: An MCP client's session through proctor's"
        " gateway to upstream MCP servers.\n---\n",
        encoding="utf-8",
    )
    allowance = json.dumps(sorted(tools))
    (folder / "run.yaml").write_text(
        "minimum_proctor: 0.1.0\n"
        "default_method: session\n"
        "methods:\n"
        "  session:\n"
        "    description: One MCP client session; each call one governed upstream call.\n"
        "    inputs: {type: object, properties: {client: {type: string}}}\n"
        "    steps:\n"
        f"      - id: {TURN}\n"
        "        agent:\n"
        "          instructions: An MCP client calls upstream tools through the gateway.\n"
        "          inputs: {client: $input.client}\n"
        f"          calls: {{tools: {allowance}}}\n"
        "          output:\n"
        "            type: object\n"
        "            properties: {calls: {type: integer}}\n"
        "            required: [calls]\n",
        encoding="utf-8",
    )
    return folder


def open_gateway(
    workspace: Any, environ: Mapping[str, str], config: Path | None, report: Any
) -> GatewayTools:
    """Read the upstreams, pin what is new, and build the gateway's tools.

    Raises:
        UsageError: ``mcp_no_upstreams``.
        ParseError, ConfigError: the configuration or the lock is refused.
    """
    from proctor.runtime.gateway.upstreams import CONFIG_ENV, shared_upstreams

    env = dict(environ)
    if config is not None:
        env[CONFIG_ENV] = str(config.resolve())
    upstreams = shared_upstreams(workspace, env)
    if upstreams is None:
        raise UsageError(
            "--gateway serves the workspace's upstream MCP servers and it has no .mcp.json"
            " (or name one with --config)",
            code="mcp_no_upstreams",
        )
    for server in upstreams.config.servers:
        try:
            upstreams.pin_new(server)
        except ProctorError as exc:
            report(
                f"proctor mcp: upstream {server!r} could not be listed [{exc.code}]:"
                f" {exc.message}; its pinned tools are served as pinned"
            )
    return GatewayTools(upstreams, _package(workspace.root, sorted(upstreams.tools())))


def session_key(ctx: ServerRequestContext[Any, Any], transport: str) -> tuple[str, ...]:
    """The client session a call belongs to: its run is the session's run.

    The SDK builds a request's ``ctx.session`` afresh for every request (and on the 2026-07-28
    protocol a connection too), so neither names a client session. Over stdio the process
    serves one client: every call is its session's. Over streamable HTTP a session is the
    ``Mcp-Session-Id`` the transport gave (the handshake protocol); the stateless protocol has
    none, so a client there is its bearer key's token id and the name it gives in its
    ``clientInfo``.
    """
    if transport == "stdio":
        return ("stdio",)
    request = ctx.request
    headers = getattr(request, "headers", None)
    session_id = None if headers is None else headers.get("mcp-session-id")
    if session_id:
        return ("http-session", str(session_id)[:200])
    scope = getattr(request, "scope", None)
    token = scope.get("proctor.token_id") if isinstance(scope, Mapping) else None
    params = ctx.session.client_params
    client = "" if params is None or params.client_info is None else params.client_info.name
    return ("http-client", str(token or ""), str(client)[:200])


class GatewayTools:
    """The served upstream tools and the run of each client session."""

    def __init__(self, upstreams: Upstreams, package: Path) -> None:
        self.upstreams = upstreams
        self.package = package
        self.tools: dict[str, UpstreamTool] = {
            gateway_name(t.server, t.upstream_name): t for t in upstreams.tools().values()
        }
        self.runs: dict[tuple[str, ...], str] = {}  # client session (session_key) -> run id
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._opening = threading.Lock()  # one run per session, even when its first calls race

    def serves(self, name: str) -> bool:
        """Whether ``name`` is a served upstream tool."""
        return name in self.tools

    def tool_list(self) -> list[types.Tool]:
        """The pinned declarations, as ``<server>__<tool>``."""
        out = []
        for name, tool in sorted(self.tools.items()):
            definition = tool.definition
            annotations = definition.get("annotations")
            out.append(
                types.Tool(
                    name=name,
                    title=definition.get("title"),
                    description=tool.description,
                    input_schema=tool.schema,
                    output_schema=definition.get("outputSchema"),
                    annotations=None
                    if not isinstance(annotations, dict)
                    else types.ToolAnnotations.model_validate(annotations),
                )
            )
        return out

    def _run_of(
        self, ctx: ServerRequestContext[Any, Any], host: GatewayHost, key: tuple[str, ...]
    ) -> str:
        with self._opening:
            with self._lock:
                found = self.runs.get(key)
            if found is not None:
                return found
            return self._open_run(ctx, host, key)

    def _open_run(
        self, ctx: ServerRequestContext[Any, Any], host: GatewayHost, key: tuple[str, ...]
    ) -> str:
        client = ""
        params = ctx.session.client_params
        if params is not None and params.client_info is not None:
            client = str(params.client_info.name)[:200]

        def start(session: Session) -> str:
            envelope = session.run(
                str(self.package), inputs={"client": client}, authority=host.config.authority
            )
            if envelope.run_id is None or envelope.status != "needs_agent":
                raise ProctorError(
                    f"the gateway's session run did not open ({envelope.status})",
                    code="gateway_run_not_opened",
                )
            return envelope.run_id

        run_id = host.pool.use(start)
        with self._lock:
            self.runs[key] = run_id
        host.config.runs[run_id] = None
        return run_id

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: dict[str, Any],
        host: GatewayHost,
        client: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """One client call: admitted as a call of the session run's turn; a change waits for a
        person's decision (``client``: the client's name and version, for the audit log)."""
        tool = self.tools[name]
        key = session_key(ctx, host.config.transport)
        with self._lock:  # the session's run, once it has one, without a thread hop
            known = self.runs.get(key)
        try:
            run_id: str = (
                known
                if known is not None
                else await anyio.to_thread.run_sync(lambda: self._run_of(ctx, host, key))
            )
        except ProctorError as exc:
            return _error(exc.code, exc.message)
        with self._lock:
            n = self.calls[run_id] = self.calls.get(run_id, 0) + 1
        call_id = f"c{n}"

        def once(stop: threading.Event) -> Any:
            def go(session: Session) -> Any:
                return session.turn_call(run_id, TURN, tool.name, arguments, call_id, stop=stop)

            # a person's decision drives the run on in its own process, holding the run's lease
            # for a moment: the call waits for it rather than failing run_busy
            deadline = time.monotonic() + BUSY_WAIT
            while True:
                try:
                    return host.pool.use(go)
                except ProctorError as exc:
                    if exc.code != "run_busy" or time.monotonic() > deadline or stop.is_set():
                        raise
                stop.wait(WAIT_POLL)

        try:
            outcome = await host.run_in_worker(once)
        except ProctorError as exc:
            return _error(exc.code, exc.message)
        if outcome.error and outcome.error.get("code") == "approval_pending":
            details = outcome.error.get("details") or {}
            address = str(details.get("address") or "")
            digest = str(details.get("request_digest") or "")
            await self._ask(ctx, host, run_id, address, client)
            decided = await self._decided(host, run_id, address, digest)
            if not decided:
                return _error(
                    "approval_pending",
                    f"{tool.name} waits for a person's approval at {address} of run {run_id}"
                    " (proctor approve, or the console); nothing was sent",
                )
            try:
                outcome = await host.run_in_worker(once)
            except ProctorError as exc:
                return _error(exc.code, exc.message)
        if outcome.status != "completed":
            error = outcome.error or {}
            return _error(str(error.get("code") or outcome.status), str(error.get("message")))
        result = outcome.result if isinstance(outcome.result, dict) else {}
        content = result.get("content") if isinstance(result.get("content"), list) else []
        structured = result.get("structured_content")
        # the wire form, not a model: the SDK checks it against the protocol's schema either
        # way, and a model would be validated here, dumped, then checked again
        return {
            "content": content,
            **({"structuredContent": structured} if isinstance(structured, dict) else {}),
            "isError": False,
            "resultType": "complete",
        }

    async def _ask(
        self,
        ctx: ServerRequestContext[Any, Any],
        host: GatewayHost,
        run_id: str,
        address: str,
        client: Mapping[str, Any] | None,
    ) -> None:
        """Relay the approval to the client as served skills do (elicitation; a form answer
        counts only under ``--trust-client-approvals``)."""

        def envelope(session: Session) -> dict[str, Any]:
            return session.envelope(run_id).to_json()

        doc = await anyio.to_thread.run_sync(lambda: host.pool.use(envelope))
        doc["requests"] = [r for r in doc.get("requests") or [] if r.get("address") == address]
        if not ctx.session.can_send_request:
            return
        try:
            await host.approvals.relay(ctx, doc, host, client)
        except Exception:  # a client that cannot answer leaves the decision to a person
            return

    async def _decided(self, host: GatewayHost, run_id: str, address: str, digest: str) -> bool:
        """Wait (reporting progress) until the request is no longer open; False after the
        relay's wait bound."""

        def check(session: Session) -> bool:
            return not any(
                r.address == address and r.request_digest == digest and r.state == "open"
                for r in session.store.requests(run_id)
            )

        with anyio.move_on_after(host.approvals.wait_seconds):
            while True:
                if await anyio.to_thread.run_sync(lambda: host.pool.use(check)):
                    return True
                await anyio.sleep(WAIT_POLL)
        return False

    def seal_all(self, host: GatewayHost) -> None:
        """End each session's run: its turn answered with the number of calls, sealed with a
        receipt (a run still waiting on a person is closed ``superseded``)."""
        with self._lock:
            runs = list(self.runs.values())
            self.runs.clear()

        for run_id in runs:
            calls = self.calls.get(run_id, 0)

            def seal(session: Session, run_id: str = run_id, calls: int = calls) -> None:
                envelope = session.envelope(run_id).to_json()
                if envelope.get("status") == "sealed":
                    return
                turn = next(
                    (r for r in envelope.get("requests") or [] if r.get("address") == TURN), None
                )
                if envelope.get("status") != "needs_agent" or turn is None:
                    session.resume(run_id, {"close": {"outcome": "superseded"}})
                    return
                answer = {"request_digest": turn["request_digest"], "value": {"calls": calls}}
                session.resume(run_id, {"answers": {TURN: answer}})

            try:
                host.pool.use(seal)
            except ProctorError as exc:
                host.audit("mcp_gateway_seal_failed", run_id, code=exc.code)


def _error(code: str, message: str) -> types.CallToolResult:
    from proctor.runtime.boundary.sanitize import scrub_text

    return types.CallToolResult(
        content=[types.TextContent(text=f"error[{code}]: {scrub_text(message)}")], is_error=True
    )

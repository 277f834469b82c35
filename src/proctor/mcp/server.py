"""The MCP server: served skills as tools, each call a run through the normal driver path.

Built on the official SDK's low-level :class:`mcp.server.Server` (handlers ``on_list_tools``
and ``on_call_tool``, plus a context-tier middleware that writes every request's caller
identity to the audit log). The SDK owns the protocol (JSON-RPC framing, version
negotiation, cancellation); this module owns what a call means.

The catalog follows the served packages: ``tools/list`` (and a ``tools/call`` naming a tool the
catalog lacks) reads the packages' digests again and rebuilds the catalog when one changed;
the built tool list is kept until then. A call runs the package as its files are now.

A call runs in a worker thread with a :class:`proctor.runtime.engine.session.Session` of its own
from a
small pool (the audit log's lock is per open file, so two threads never share one). When the
client cancels the call (``notifications/cancelled``) or goes away (end of input, then
SIGTERM), the run is asked to stop, the process tree of a command it is running is killed and
the call settled ``cancelled``, and the handler waits for the run to be recorded ``stopped``
before the cancellation completes (:mod:`proctor.runtime.admission.cancelled`).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from proctor._version import __version__
from proctor.contracts.json_strict import check_value
from proctor.errors import ParseError, ProctorError
from proctor.mcp.approvals import PROGRESS_EVERY, ApprovalRelay
from proctor.mcp.shared import (
    ServerConfig,
    SessionPool,
    compact_nullables,
    error_result,
    run_content,
    tool_result,
)
from proctor.runtime.tools.process import enter_stop_scope, stop_scoped

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult

    from proctor.mcp.catalog import Catalog, SkillTool
    from proctor.mcp.core_tools import CoreTools
    from proctor.mcp.directive_tools import DirectiveExposure, DirectiveTools
    from proctor.mcp.gateway import GatewayTools
    from proctor.mcp.turns import TurnTools
    from proctor.mcp.workers import WorkerSeat
    from proctor.runtime.engine.session import Session

__all__ = ["ProctorServer", "tracing_configured"]

T = TypeVar("T")
_WORKERS = 32
_REQUEST_LINE: contextvars.ContextVar[list[dict[str, Any]]] = contextvars.ContextVar(
    "proctor_request_line"
)
"""A ``tools/call``'s ``mcp_request`` fields while no one has written them (emptied by the
writer): the call's own session writes them when a worker runs the call (see
:meth:`ProctorServer._audit_middleware`)."""
X_MCP_HEADER = "x-mcp-header"
"""The schema annotation that declares an ``Mcp-Param-*`` header (the 2026-07-28 protocol)."""

SERVER_NAME = "proctor"
INSTRUCTIONS = (
    "Each tool runs one method of a governed skill: every call is admitted, recorded and"
    " receipted by proctor. A run that pauses returns its requests; approvals are decided by"
    " a person (`proctor approve`, the console), never by this client's own answer unless the"
    " operator opted in."
)


def _client_info(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any] | None:
    info: Any = None
    if ctx.meta is not None:
        info = ctx.meta.get("io.modelcontextprotocol/clientInfo")
    if info is None and ctx.method == "initialize" and ctx.params:
        info = ctx.params.get("clientInfo")
    if info is None and ctx.session.client_params is not None:
        info = ctx.session.client_params.client_info
    if info is None:
        return None
    if hasattr(info, "model_dump"):
        info = info.model_dump(mode="json", exclude_none=True)
    if not isinstance(info, Mapping):
        return None
    return {k: str(info[k])[:200] for k in ("name", "version") if k in info}


class _Finish:
    """What a call's task waits on until its worker is done, set from the worker's thread.

    On asyncio the worker only schedules the set (``call_soon_threadsafe``) and goes back to
    its pool (the loop outlives every call it awaits), and the task waits on a future of the
    loop with, for the progress ticks, a timer of the loop: no event, no cancel scope per
    wait (this is on every ``tools/call``). Elsewhere (trio) the worker waits for the loop to
    run the set (``anyio.from_thread.run_sync``) and the task waits on an anyio event.
    """

    def __init__(self) -> None:
        self._done = False
        self._waiter: asyncio.Future[None] | None = None
        self._event: anyio.Event | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # another backend (trio)
            self._loop = None
            self._event = anyio.Event()
            self._token = anyio.lowlevel.current_token()

    def set(self) -> None:
        """Called by the worker once the call's outcome is recorded."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._settle)
        elif self._event is not None:
            anyio.from_thread.run_sync(self._event.set, token=self._token)

    def _settle(self) -> None:
        self._done = True
        _resolve(self._waiter)

    async def wait(self, timeout: float | None = None) -> bool:
        """Until the worker is done or ``timeout`` seconds have passed; whether it is done."""
        if self._event is not None:
            with anyio.move_on_after(timeout):
                await self._event.wait()
            return self._event.is_set()
        if self._done or self._loop is None:
            return self._done
        self._waiter = waiter = self._loop.create_future()
        timer = None if timeout is None else self._loop.call_later(timeout, _resolve, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return self._done


def _resolve(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _in_scope(fn: Callable[[threading.Event], T], stop: threading.Event) -> T:
    enter_stop_scope(stop)  # the programs this call starts are its own, as on a worker
    return fn(stop)


def tracing_configured() -> bool:
    """Whether an OpenTelemetry tracer provider is installed (the API's global is set), so the
    SDK's spans would be recorded somewhere; True when that cannot be told (the spans stay)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return True
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _span_middleware() -> type | None:
    """The SDK's span middleware class, or None where this SDK has none by that name (a private
    module of the SDK: another version keeps its middleware, spans and all)."""
    try:
        from mcp.server._otel import OpenTelemetryMiddleware
    except ImportError:
        return None
    return OpenTelemetryMiddleware


def _directive_tools(
    config: ServerConfig, exposure: DirectiveExposure, signer: Any
) -> DirectiveTools:
    """The directive tools, each call on a directive session of its own (writes confined to
    ``output/`` and ``drafts/``; the sandbox required, as for every run a client proposes)."""
    from proctor.mcp.directive_tools import DirectiveTools
    from proctor.runtime.agents.sessions import DirectiveSession

    def session(agent: Any) -> DirectiveSession:
        return DirectiveSession(
            config.workspace,
            environ=config.environ,
            signer=signer,
            agent_driver=agent,
            sandbox_default="required",
            managed=True,
        )

    return DirectiveTools(config, exposure, session)


def _declares_header(schema: Any) -> bool:
    """Whether ``x-mcp-header`` is a key anywhere in ``schema`` (a superset of the positions
    where the SDK reads it as a header declaration)."""
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if X_MCP_HEADER in node:
                return True
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return False


def _progress(ctx: ServerRequestContext[Any, Any]) -> Callable[[int], Awaitable[None]]:
    """Progress notifications of a working call (a no-op for a client that sent no token)."""

    def report(count: int) -> Awaitable[None]:
        return ctx.session.report_progress(float(count), None, "working")

    return report


class ProctorServer:
    """Builds the SDK server for one configuration and answers its calls.

    Raises nothing at construction; :meth:`close` releases the sessions.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        turns: TurnTools | None = None,
        directives: DirectiveExposure | None = None,
        gateway: GatewayTools | None = None,
        core: CoreTools | None = None,
    ) -> None:
        from proctor.runtime.engine.session import Session

        self.config = config
        self.turns = turns
        self.gateway = gateway
        self.core = core
        self.approvals = ApprovalRelay(config.console_url, config.trust_client_approvals)
        self._audit_lock = threading.Lock()
        self._audit_session = Session(config.workspace, environ=config.environ)
        # One signing key for every session, loaded (or created) once before serving: two
        # sessions creating the home's key at once would race on the file. A run a client
        # starts without --authority takes the managed default (effects: ask).
        signer = self._audit_session.signer
        self._catalog_lock = threading.Lock()
        self._workers_lock = threading.RLock()  # a signal handler may take it (stop_all)
        self._stops: set[threading.Event] = set()  # of the calls in flight
        self._on_loop = 0  # calls running on the event loop's thread now (run_on_loop)
        self._held_interrupt = False  # a signal came while one ran: raised when it returns
        self._executor: ThreadPoolExecutor | None = None
        self._catalog_failed: tuple[str, ...] | None = None
        self._listed: tuple[Catalog, list[types.Tool]] | None = None
        self._output_schema: dict[str, Any] | None = None
        self._schemas: dict[str, Mapping[str, Any]] = {}
        # among several HTTP workers, the key they all seal request state with
        self.request_state_key: bytes | None = None
        # MCP clients propose what runs: their processes need the sandbox (docs/sandbox.md)
        self.pool = SessionPool(
            lambda: Session(
                config.workspace,
                environ=config.environ,
                signer=signer,
                sandbox_default="required",
                managed=True,
            ),
            config.pool_size,
        )
        self.directives: DirectiveTools | None = None
        if directives is not None:
            self.directives = _directive_tools(config, directives, signer)

    # -- audit -----------------------------------------------------------------------------

    def audit(self, event: str, run_id: str | None = None, **fields: Any) -> None:
        """Write one audit event (serialized: the log's file lock is per open file)."""
        with self._audit_lock:
            self._audit_session.audit.emit(event, run_id=run_id, step_index=None, **fields)

    async def _audit_middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        caller: dict[str, Any] = {"transport": self.config.transport, "token_id": None}
        request = ctx.request
        scope = getattr(request, "scope", None)
        if isinstance(scope, Mapping):
            caller["token_id"] = scope.get("proctor.token_id")
        fields: dict[str, Any] = {
            "method": ctx.method,
            "request_id": None if ctx.request_id is None else str(ctx.request_id),
            "caller": {**caller, "client": _client_info(ctx)},
            "protocol_version": ctx.protocol_version,
        }
        if ctx.method != "tools/call":
            # In the loop, not on a worker thread: one local append (no fsync) costs less than
            # the thread hop, and this runs for every request.
            self.audit("mcp_request", **fields)
            return await call_next(ctx)
        if ctx.params:
            fields["tool"] = str(ctx.params.get("name"))[:200]
        # A call a worker runs at once, and a core tool's call, has its line written by the
        # session that makes it, just before the run or the call: a line another session
        # wrote in between would make that session read the log back to chain its next line
        # and to find its head when it seals. Any other call has it written
        # before anything else of the call is (_call_tool), or here if the call never got
        # there; always exactly once.
        held = [fields]
        token = _REQUEST_LINE.set(held)
        try:
            return await call_next(ctx)
        finally:
            _REQUEST_LINE.reset(token)
            self._write_request_line(held)

    def _write_request_line(self, held: list[dict[str, Any]] | None) -> None:
        """Write a call's ``mcp_request`` line here, if no one has yet."""
        if held:
            self.audit("mcp_request", **held.pop())

    # -- the SDK server --------------------------------------------------------------------

    def build(self) -> Server[Any]:
        """The low-level SDK server with proctor's handlers and audit middleware."""
        server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            get_tool_input_schema=self.input_schema,
        )
        # Registered as a plain handler, so a call may answer with the result's wire form (the
        # SDK validates that against the protocol's schema as it would a model's dump).
        server.add_request_handler("tools/call", types.CallToolRequestParams, self._call_tool)
        span_middleware = _span_middleware()
        if span_middleware is not None and not tracing_configured():
            # The SDK's span per message does nothing without a tracer provider, at a cost on
            # every request; with one installed before the server is built, it stays.
            server.middleware[:] = [
                m for m in server.middleware if not isinstance(m, span_middleware)
            ]
        server.middleware.append(self._audit_middleware)
        # input_required state names a run and a request: sealed and verified by the SDK
        security = (
            RequestStateSecurity.ephemeral()
            if self.request_state_key is None
            else RequestStateSecurity(keys=[self.request_state_key])
        )
        server.middleware.append(RequestStateBoundary(security, default_audience=SERVER_NAME))
        return server

    def share_among_workers(self, seat: WorkerSeat) -> None:
        """Serve as one of several processes (:mod:`proctor.mcp.workers`): request state
        sealed with the key they share, and the turn tools' runs those any of them opened."""
        from proctor.mcp.workers import SharedRuns

        self.request_state_key = seat.state_key
        shared = SharedRuns(seat.folder / "runs")
        for run_id in self.config.runs:
            shared[run_id] = None
        self.config.runs = shared

    def catalog(self) -> Catalog:
        """The served tools as the packages are now.

        When a served package's files differ from the ones the catalog was built from, the
        catalog is rebuilt (credential readiness decided again from a new snapshot) and the
        change audited (``mcp_catalog_changed``). A changed package that no longer loads
        keeps the last good catalog and is audited once (``mcp_catalog_refused``, its code);
        its calls then fail as the run refuses the package.
        """
        config = self.config
        if not config.refs:
            return config.catalog
        from proctor.mcp.catalog import load_catalog, package_digests

        refs = list(config.refs)
        root = config.workspace.root
        cwd = config.cwd or root
        with self._catalog_lock:
            now = package_digests(refs, cwd=cwd, workspace_root=root)
            if now in (config.catalog.digests, self._catalog_failed):
                return config.catalog
            try:
                fresh = load_catalog(refs, cwd=cwd, workspace_root=root, environ=config.environ)
            except ProctorError as exc:
                self._catalog_failed = now
                self.audit("mcp_catalog_refused", code=exc.code)
                return config.catalog
            self._catalog_failed = None
            config.catalog = fresh
            self.audit("mcp_catalog_changed", tools=sorted(fresh.tools))
            return fresh

    def tool_list(self, catalog: Catalog | None = None) -> list[types.Tool]:
        """Every tool this server offers: the served skills, then the turn tools (built once
        per catalog)."""
        catalog = self.config.catalog if catalog is None else catalog
        listed = self._listed
        if listed is None or listed[0] is not catalog:
            if self._output_schema is None:
                from proctor.contracts.envelope import run_envelope_schema

                self._output_schema = compact_nullables(run_envelope_schema())
            output = self._output_schema
            tools = [
                types.Tool(
                    name=t.name,
                    title=f"{t.skill}#{t.method}",
                    description=t.description,
                    input_schema=t.input_schema,
                    output_schema=output,
                    annotations=types.ToolAnnotations.model_validate(t.annotations or {}),
                )
                for t in catalog.tools.values()
            ]
            if self.directives is not None:
                tools.extend(self.directives.tool_list())
            if self.gateway is not None:
                tools.extend(self.gateway.tool_list())
            if self.core is not None:
                tools.extend(self.core.tool_list())
            if self.turns is not None:
                tools.extend(self.turns.tool_list())
            listed = self._listed = (catalog, tools)
            # only a schema that declares a header parameter has headers to check
            self._schemas = {
                t.name: t.input_schema for t in tools if _declares_header(t.input_schema)
            }
        return list(listed[1])

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        """The input schema a served tool is listed with, or ``None``: not served, or its
        schema declares no ``Mcp-Param-*`` header (``x-mcp-header`` nowhere in it).

        The SDK's streamable HTTP transport asks this before each ``tools/call`` of the
        2026-07-28 protocol, to check the call's ``Mcp-Param-*`` headers; without it, the SDK
        runs the whole ``tools/list`` handler (the catalog's digests read again, the request
        audited) for every call. Against a schema without the annotation the check passes
        whatever the headers say, after two walks of the schema on every call; ``None`` skips
        them with the same answer. The list is the one last built; a tool added since is
        ``None`` here, and the call itself then finds it (:meth:`catalog`).
        """
        self.tool_list()
        return self._schemas.get(name)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        catalog = await anyio.to_thread.run_sync(self.catalog)
        return types.ListToolsResult(tools=self.tool_list(catalog))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """Answer one ``tools/call``: a run's envelope as the wire form of a ``CallToolResult``
        (:func:`proctor.mcp.shared.tool_result`), or a model the SDK dumps.

        Refused with a tool error: arguments nested too deep (``too_deep``), a tool whose
        credentials are missing (``needs_credential``), a run that refuses before it opens
        (its code). Refused with ``INVALID_PARAMS``: a tool this server does not serve.
        """
        arguments = dict(params.arguments or {})
        held = _REQUEST_LINE.get(None)
        try:
            # The transports refuse deeper frames (proctor.mcp.frames); this holds the bound
            # for any other way arguments arrive.
            check_value(arguments, source="the tool's arguments")
        except ParseError as exc:
            refused = exc
            self._write_request_line(held)
            await anyio.to_thread.run_sync(
                lambda: self.audit("mcp_tool_refused", tool=params.name[:200], code=refused.code)
            )
            return error_result(refused)
        name = params.name
        if self.core is not None and self.core.serves(name):
            # the call's session writes the request's line (see _audit_middleware)
            return await self.core.call(ctx, name, arguments, self, _client_info(ctx), held)
        other = self._other_kind(ctx, name, arguments)
        if other is not None:
            self._write_request_line(held)
            return await other
        tool = self.config.catalog.get(name)
        if tool is None:  # perhaps a method added since the catalog was built
            tool = (await anyio.to_thread.run_sync(self.catalog)).get(name)
        if tool is None or tool.missing or params.request_state is not None:
            self._write_request_line(held)
        if tool is None:
            await anyio.to_thread.run_sync(
                lambda: self.audit("mcp_tool_refused", tool=name[:200], code="tool_unknown")
            )
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name[:200]}")
        if tool.missing:
            return self._needs_credential(tool)
        if params.request_state is not None:  # a retry after input_required (approvals)
            try:
                resumed = await self.approvals.resume(
                    ctx, params.request_state, params.input_responses, self, _client_info(ctx)
                )
            except ProctorError as exc:
                return error_result(exc)
            return tool_result(resumed, self.config.console_url)
        # the run's session writes the request's line, just before the run (see
        # _audit_middleware)
        line = held.pop() if held else None
        doc = await self.run_in_worker(
            lambda stop: self._run(tool, arguments, stop, line), report=_progress(ctx)
        )
        return await self._answer(ctx, doc)

    def _other_kind(
        self, ctx: ServerRequestContext[Any, Any], name: str, arguments: dict[str, Any]
    ) -> Awaitable[types.CallToolResult | dict[str, Any]] | None:
        """The call, not yet started, of a tool another part of the server serves (the
        gateway, turns, directives; core tools are called before this is asked); ``None`` for
        a skill's tool."""
        if self.gateway is not None and self.gateway.serves(name):
            return self.gateway.call(ctx, name, arguments, self, _client_info(ctx))
        if self.turns is not None and self.turns.serves(name):
            return self.turns.call(name, arguments, self)
        if self.directives is not None and self.directives.serves(name):
            return self.directives.call(name, arguments, self, _progress(ctx))
        return None

    async def _answer(
        self, ctx: ServerRequestContext[Any, Any], doc: dict[str, Any] | ProctorError
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        """The result of a call whose run answered ``doc`` (or refused before it opened)."""
        if isinstance(doc, ProctorError):
            return error_result(doc)
        if doc.get("status") == "needs_approval":
            relayed = await self.approvals.relay(ctx, doc, self, _client_info(ctx))
            if isinstance(relayed, types.InputRequiredResult):
                return relayed
            doc = relayed
        run_id = doc.get("run_id")
        if isinstance(run_id, str) and doc.get("status") != "sealed":
            self.config.runs[run_id] = None
        return tool_result(doc, self.config.console_url)

    def _run(
        self,
        tool: SkillTool,
        arguments: dict[str, Any],
        stop: threading.Event,
        line: dict[str, Any] | None = None,
    ) -> dict[str, Any] | ProctorError:
        """Run ``tool`` on a session of the pool; with ``line``, that session first writes the
        request's ``mcp_request`` line (the same log object then counts both)."""

        held = [] if line is None else [line]

        def go(session: Session) -> dict[str, Any] | ProctorError:
            if held:
                session.audit.emit("mcp_request", run_id=None, step_index=None, **held.pop())
            try:
                envelope = session.run(tool.ref, inputs=arguments, **self._run_options(stop))
            except ProctorError as exc:
                return exc
            return envelope.to_json()

        try:
            return self.pool.use(go)
        finally:
            # no session ran the call (one could not be opened): the line is written anyway
            self._write_request_line(held)

    def _run_options(self, stop: threading.Event) -> dict[str, Any]:
        # The references start where the catalog resolved them (the folder the server was
        # started in), not at the process's current folder, read again for every call.
        options: dict[str, Any] = {"authority": self.config.authority, "stop": stop}
        if self.config.cwd is not None:
            options["cwd"] = self.config.cwd
        return options

    def _needs_credential(self, tool: SkillTool) -> types.CallToolResult:
        from proctor.contracts.envelope import RunEnvelope

        requests = [{"kind": "credential", **r.to_dict()} for r in tool.missing]
        doc = RunEnvelope(
            status="needs_credential",
            run_id=None,
            skill=tool.skill,
            method=tool.method,
            requests=requests,
            notes=["credentials are resolved when the server starts; restart it after setup"],
        ).to_json()
        self.audit(
            "mcp_needs_credential",
            tool=tool.name,
            requirements=[r.name for r in tool.missing],
        )
        return types.CallToolResult(
            content=run_content(doc),
            structured_content=doc,
            is_error=True,
        )

    async def run_in_worker(
        self,
        fn: Callable[[threading.Event], T],
        *,
        report: Callable[[int], Awaitable[None]] | None = None,
        every: float = PROGRESS_EVERY,
    ) -> T:
        """Run ``fn(stop)`` in a worker thread; on cancellation set ``stop``, wait, re-raise.

        The wait is what makes a cancelled call end, not hang in doubt: no new step starts,
        a command in flight has its whole process tree killed and its call settled
        ``cancelled``, the run is recorded ``stopped``, and only then is the request released.
        With ``report``, ``report(n)`` is awaited every ``every`` seconds while ``fn`` works
        (progress notifications); one that raises is not called again.

        ``fn`` always runs once submitted (a cancellation that comes first finds ``stop``
        set), and the awaiting task is woken by the worker itself: a call costs one hop
        there and one back, and no task of its own (this is on every ``tools/call``). On
        asyncio the worker only schedules the wake-up and goes back to its pool, rather than
        blocking until the loop has run it (it would then need waking again, and the GIL, while
        the loop answers the call).
        """
        stop = threading.Event()
        finish = _Finish()
        outcome: list[tuple[bool, Any]] = []

        with self._workers_lock:
            self._stops.add(stop)

        def work() -> None:
            # the programs this call starts are its own: a cancel kills them, no other call's
            enter_stop_scope(stop)
            try:
                outcome.append((True, fn(stop)))
            except BaseException as exc:  # handed to the awaiting task below
                outcome.append((False, exc))
            finally:
                with self._workers_lock:
                    self._stops.discard(stop)
                finish.set()  # the awaiting task waits for this (shielded when cancelled)

        self._workers().submit(contextvars.copy_context().run, work)
        try:
            count = 0
            while not await finish.wait(every):
                count += 1
                if report is not None:
                    try:
                        await report(count)
                    except Exception:  # the client is gone or the channel closed
                        report = None
        except anyio.get_cancelled_exc_class():
            stop.set()
            stop_scoped(stop)  # a command in flight is killed, and its call settled cancelled
            with anyio.CancelScope(shield=True):
                await finish.wait()
            raise
        ok, value = outcome[0]
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def run_on_loop(self, fn: Callable[[threading.Event], T]) -> T:
        """Run ``fn(stop)`` here, on the event loop's thread, rather than on a worker: for a
        quick call of a read-only tool (:mod:`proctor.mcp.core_tools`), where the hop to a
        worker and back costs about a fifth of the whole call. The loop reads no other message
        meanwhile (a cancellation of this call finds it answered).

        A signal that ends the server while ``fn`` runs sets ``stop`` as for a worker's call
        (:meth:`stop_all`) and is held until ``fn`` returns: the call is never cut off halfway
        through its admission or its record.
        """
        stop = threading.Event()
        with self._workers_lock:
            self._stops.add(stop)
        self._on_loop += 1
        try:
            return contextvars.copy_context().run(_in_scope, fn, stop)
        finally:
            self._on_loop -= 1
            with self._workers_lock:
                self._stops.discard(stop)
            if self._held_interrupt and not self._on_loop:
                self._held_interrupt = False
                raise KeyboardInterrupt

    def hold_interrupt(self) -> bool:
        """For the signal handler: whether a call runs on the loop's thread now, so the
        interrupt is raised when it returns (:meth:`run_on_loop`) rather than inside it."""
        if self._on_loop:
            self._held_interrupt = True
            return True
        return False

    def stop_all(self) -> None:
        """End every call in flight (the server is terminating): each run stops before its
        next step, and each command a call is running has its process tree killed."""
        with self._workers_lock:
            stops = list(self._stops)
        for stop in stops:
            stop.set()
            stop_scoped(stop)

    def _workers(self) -> ThreadPoolExecutor:
        """The threads calls run on, started on first use (at most :data:`_WORKERS`; every
        call that drives a run also waits for one of the pool's sessions)."""
        with self._workers_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(_WORKERS, thread_name_prefix="proctor-mcp")
            return self._executor

    def seal_sessions(self) -> None:
        """Seal each client session's run (gateway, ``--tool``) with its receipt: the sessions
        end with the server. Runs sealed here are forgotten, so a second call seals nothing."""
        if self.gateway is not None:
            self.gateway.seal_all(self)
        if self.core is not None:
            self.core.seal_all(self)

    def close(self) -> None:
        """Release the sessions (every call has ended: its task waited for its worker)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self.seal_sessions()
        self.pool.close()
        self._audit_session.close()

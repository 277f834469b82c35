"""Streamable HTTP for ``proctor mcp --transport http``: the key, the bind, the bearer check.

The server refuses to start without ``PROCTOR_MCP_API_KEY`` (printable ASCII, at least 16
characters) and refuses a non-loopback bind unless ``--public-url`` names where clients reach
it (its host is then the only one the Host and Origin checks admit). Every HTTP request must
carry ``Authorization: Bearer <key>``; the comparison is over SHA-256 digests with
:func:`hmac.compare_digest`, so neither the length nor the content of the key leaks through
timing. An admitted request carries the key's token id to the request audit. A refused one
gets 401; refusals are coalesced into ``mcp_auth_refused`` audit events, one per source per
minute with a ``count`` (:class:`RefusalCoalescer`), so unauthenticated traffic cannot grow the
log without bound.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio

from proctor.contracts.values import dataclass, field
from proctor.errors import ConfigError, UsageError
from proctor.mcp.endpoint import MCP_PATH, respond
from proctor.mcp.shared import token_id
from proctor.runtime.listen import listen_tcp

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from proctor.mcp.server import ProctorServer
    from proctor.mcp.workers import WorkerSeat

__all__ = [
    "API_KEY_ENV",
    "BearerAuth",
    "HttpSettings",
    "RefusalCoalescer",
    "check_http_settings",
    "http_protocol",
    "loop_options",
    "serve_http",
]

API_KEY_ENV = "PROCTOR_MCP_API_KEY"
MIN_KEY_LENGTH = 16
COALESCE_SECONDS = 60.0
MAX_SOURCES = 64
OTHER_SOURCES = "(other sources)"


@dataclass(frozen=True)
class HttpSettings:
    """A checked HTTP configuration (valid by construction through :func:`check_http_settings`).

    Attributes:
        host, port: where to bind (port 0 picks a free one).
        key: the API key (never logged; its token id is).
        public_url: where clients reach a non-loopback bind, or ``None``.
        allowed_hosts, allowed_origins: what the Host and Origin checks admit.
        workers: how many processes serve the socket (:mod:`proctor.mcp.workers`).
    """

    host: str
    port: int
    key: str = ""
    public_url: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    workers: int = 1

    @property
    def token_id(self) -> str:
        """The key's public identity."""
        return token_id(self.key)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_http_settings(
    host: str, port: int, public_url: str | None, environ: Mapping[str, str], workers: int = 1
) -> HttpSettings:
    """Check everything the HTTP transport refuses to start without.

    Raises:
        ConfigError: ``mcp_api_key_missing`` (unset or empty), ``mcp_api_key_invalid`` (not
            printable ASCII, or shorter than 16 characters), ``mcp_public_url_required`` (a
            non-loopback bind without ``--public-url``).
        UsageError: ``mcp_public_url_invalid`` (not an http(s) URL with a host).
    """
    key = environ.get(API_KEY_ENV, "")
    if not key:
        raise ConfigError(
            f"the HTTP transport needs {API_KEY_ENV} (a bearer key of at least"
            f" {MIN_KEY_LENGTH} printable ASCII characters); refusing to start",
            code="mcp_api_key_missing",
        )
    if not all(0x21 <= ord(c) <= 0x7E for c in key) or len(key) < MIN_KEY_LENGTH:
        raise ConfigError(
            f"{API_KEY_ENV} must be printable ASCII without spaces and at least"
            f" {MIN_KEY_LENGTH} characters long; refusing to start",
            code="mcp_api_key_invalid",
        )
    loopback = _is_loopback(host)
    if not loopback and public_url is None:
        raise ConfigError(
            f"binding {host} is reachable beyond this machine; name where clients reach it"
            " with --public-url (https://...) or bind 127.0.0.1",
            code="mcp_public_url_required",
        )
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"] if loopback else []
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"] if loopback else []
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                "--public-url must be an http(s) URL naming a host", code="mcp_public_url_invalid"
            )
        hosts += [parts.netloc, f"{parts.hostname}:*"]
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return HttpSettings(host, port, key, public_url, tuple(hosts), tuple(origins), workers)


@dataclass
class _Window:
    opened: float
    last: dict[str, str]
    count: int = 0
    reasons: Counter[str] = field(default_factory=Counter)


class RefusalCoalescer:
    """Turns refused requests into one audit event per source per window (one more when an
    attack starts).

    A source's first refusal after a quiet window is written at once (``count: 1``), so an
    attack shows in the log as it starts. Every refusal after it is only counted, and written
    as one event (``count: n``, ``reasons`` by kind, ``coalesced: true``) when its window ends:
    at the next refusal after that (which then opens the next window without a line of its
    own), or at :meth:`flush` when the server stops. At most ``max_sources`` sources hold a
    window at once; refusals from any other source share one window under
    ``(other sources)``, so many addresses cannot multiply the events either.
    """

    def __init__(
        self,
        *,
        window: float = COALESCE_SECONDS,
        max_sources: int = MAX_SOURCES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._seconds = window
        self._max = max_sources
        self._clock = clock
        self._windows: dict[str, _Window] = {}

    def refused(self, peer: str, reason: str, method: str, path: str) -> list[dict[str, Any]]:
        """Count one refusal; the audit events (fields) to write now, oldest first."""
        now = self._clock()
        out, written = self._expire(now)
        tracked = peer in self._windows or len(self._windows) < self._max
        source = peer if tracked else OTHER_SOURCES
        window = self._windows.get(source)
        request = {"reason": reason, "method": method, "path": path}
        if window is None:
            window = self._windows[source] = _Window(now, request)
            if source not in written:
                out.append(self._event(source, request, 1, None))
                return out
        window.count += 1
        window.reasons[reason] += 1
        window.last = request
        return out

    def flush(self) -> list[dict[str, Any]]:
        """The events of every open window's coalesced refusals (the server is stopping)."""
        out = [self._summary(source, w) for source, w in self._windows.items() if w.count]
        self._windows.clear()
        return out

    def _expire(self, now: float) -> tuple[list[dict[str, Any]], set[str]]:
        out = []
        for source, window in list(self._windows.items()):
            if now - window.opened >= self._seconds:
                del self._windows[source]
                if window.count:
                    out.append(self._summary(source, window))
        return out, {e["peer"] for e in out}

    def _summary(self, source: str, window: _Window) -> dict[str, Any]:
        return self._event(source, window.last, window.count, dict(window.reasons))

    def _event(
        self, source: str, request: dict[str, str], count: int, reasons: dict[str, int] | None
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {
            **request,
            "peer": source,
            "count": count,
            "window_seconds": self._seconds,
            "caller": {"transport": "http", "token_id": None, "client": None},
        }
        if reasons is not None:
            # the refusals counted in the window; ``reason``, ``method`` and ``path`` are the
            # last one's
            fields["coalesced"] = True
            fields["reasons"] = dict(sorted(reasons.items()))
        return fields


class BearerAuth:
    """ASGI middleware: admits a request only with the right bearer token.

    A refused request never reaches the MCP app; it gets 401 with ``WWW-Authenticate: Bearer``
    and is audited with the reason (missing, malformed, mismatch) and the peer address,
    coalesced per source and minute (:class:`RefusalCoalescer`).
    """

    def __init__(
        self,
        app: ASGIApp,
        settings: HttpSettings,
        proctor: ProctorServer,
        coalescer: RefusalCoalescer | None = None,
    ) -> None:
        self.app = app
        self._digest = hashlib.sha256(settings.key.encode("ascii")).digest()
        self._token_id = settings.token_id
        self._proctor = proctor
        self.coalescer = coalescer or RefusalCoalescer()

    def write_events(self, events: list[dict[str, Any]]) -> None:
        """Write coalesced refusal events to the audit log (blocking: call from a thread)."""
        for fields in events:
            self._proctor.audit("mcp_auth_refused", **fields)

    def _reason(self, scope: Scope) -> str | None:
        headers = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        if not headers:
            return "missing"
        if len(headers) > 1:
            return "malformed"
        scheme, _, token = headers[0].partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return "malformed"
        presented = hashlib.sha256(token.strip()).digest()
        return None if hmac.compare_digest(presented, self._digest) else "mismatch"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        reason = self._reason(scope)
        if reason is None:
            scope["proctor.token_id"] = self._token_id
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("", 0)
        events = self.coalescer.refused(
            str(client[0]), reason, str(scope.get("method")), str(scope.get("path"))[:200]
        )
        if events:
            await anyio.to_thread.run_sync(lambda: self.write_events(events))
        body = json.dumps({"error": "unauthorized", "reason": reason}).encode()
        await respond(send, 401, body, headers=((b"www-authenticate", b'Bearer realm="proctor"'),))


def loop_options() -> dict[str, Any]:
    """``anyio.run``'s backend options for the MCP server, over HTTP or stdio: uvloop's loop
    where installed (the ``mcp`` extra installs it; a request crosses the loop several times),
    else asyncio's."""
    try:
        import uvloop  # noqa: F401  (only whether it is there)
    except ImportError:
        return {}
    return {"use_uvloop": True}


def http_protocol() -> str:
    """uvicorn's HTTP/1.1 implementation: ``httptools``, a C parser, where installed (the
    ``mcp`` extra installs it; h11's Python cost ~0.45 ms of server CPU a call), else h11."""
    try:
        import httptools  # noqa: F401  (only whether it is there)
    except ImportError:
        return "h11"
    return "httptools"


def build_app(
    proctor: ProctorServer, settings: HttpSettings, seat: WorkerSeat | None = None
) -> BearerAuth:
    """The SDK's streamable HTTP transport (its session manager, with proctor's own entry for
    2026-07-28 requests in front, :mod:`proctor.mcp.exchange`, and proctor's own handshake-era
    sessions, :mod:`proctor.mcp.sessions`) behind :class:`BearerAuth`
    (and, among several workers, :class:`~proctor.mcp.workers.SessionAffinity`)."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = proctor.build()
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(settings.allowed_hosts),
        allowed_origins=list(settings.allowed_origins),
    )
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from proctor.mcp.endpoint import McpEndpoint
    from proctor.mcp.exchange import ModernExchange
    from proctor.mcp.frames import MAX_BODY, StrictFrames
    from proctor.mcp.sessions import HandshakeSessions

    manager = StreamableHTTPSessionManager(
        app=server, security_settings=security, max_request_body_size=MAX_BODY
    )
    # 2026-07-28 requests are served by proctor in front of the manager, with its pieces
    exchange = ModernExchange(server, security, manager.handle_request)
    # and handshake-era sessions are held by proctor, each around the SDK's transport
    sessions = HandshakeSessions(server, security, max_body=MAX_BODY)
    # Behind the bearer check: an unauthenticated body is never read (nor forwarded).
    inner: ASGIApp = StrictFrames(McpEndpoint(manager, exchange, sessions), proctor.audit)
    if seat is not None:
        from proctor.mcp.workers import SessionAffinity

        inner = SessionAffinity(inner, seat)
    return BearerAuth(inner, settings, proctor)


async def serve_http(
    proctor: ProctorServer,
    settings: HttpSettings,
    handoff: tuple[WorkerSeat, socket.socket] | None = None,
    argv: list[str] | None = None,
) -> None:
    """Serve until interrupted; print the URL on stderr once the socket listens.

    With ``settings.workers`` above one, this process binds the socket and starts the other
    workers with the command line ``argv`` (:func:`proctor.mcp.workers.start_workers`); a
    started worker is given its seat and the socket (``handoff``).

    Raises:
        ConfigError: ``mcp_bind_failed`` when the address cannot be bound.
    """
    import uvicorn

    from proctor.mcp.workers import start_workers, watch_parent

    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    workers = None
    if handoff is None:
        try:
            # connections queue from now on, before uvicorn starts accepting
            sock = listen_tcp(settings.host, settings.port)
        except OSError as exc:
            raise ConfigError(
                f"cannot bind {settings.host}:{settings.port}: {exc.strerror}",
                code="mcp_bind_failed",
            ) from exc
        seat = None
        if settings.workers > 1:
            workers = start_workers(settings.workers, sock, settings.key, argv or sys.argv[1:])
            seat = workers.seat
    else:
        seat, sock = handoff
    port = sock.getsockname()[1]
    sockets = [sock]
    if seat is not None:
        proctor.share_among_workers(seat)
        sockets.append(seat.listen_unix())
    app = build_app(proctor, settings, seat)
    config = uvicorn.Config(
        app,
        http=http_protocol(),
        log_level="warning",
        access_log=False,  # requests are audited (mcp_request); the log would drop them anyway
        # the peer is the connection's: a forwarding header is the client's own word, and
        # would name any address it likes in the audit log (mcp_auth_refused)
        proxy_headers=False,
        server_header=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )

    class _Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets=sockets)
            # here, not after serve(): uvicorn raises the signal that stopped it again once
            # serve() ends, and the counts of the open windows would die with the process
            events = app.coalescer.flush()
            await anyio.to_thread.run_sync(lambda: app.write_events(events))
            # and the sessions' runs seal now, for the same reason
            await anyio.to_thread.run_sync(proctor.seal_sessions)
            if workers is not None:
                await anyio.to_thread.run_sync(workers.stop)

    server = _Server(config)
    shown = f"[{settings.host}]" if family == socket.AF_INET6 else settings.host
    placed: dict[str, Any] = {}
    if seat is not None:
        placed = {"worker": seat.index, "workers": seat.count}
    proctor.audit(
        "mcp_server_started",
        transport="http",
        bind=f"{shown}:{port}",
        public_url=settings.public_url,
        token_id=settings.token_id,
        tools=sorted(t.name for t in proctor.tool_list()),
        **placed,
    )
    if seat is None or seat.index == 0:
        sys.stderr.write(f"proctor mcp: serving http://{shown}:{port}{MCP_PATH}\n")
        sys.stderr.flush()

    def stop() -> None:
        server.should_exit = True

    try:
        async with anyio.create_task_group() as group:
            if seat is not None:
                group.start_soon(watch_parent, seat, stop)
            await server.serve(sockets=sockets)
            group.cancel_scope.cancel()
    finally:
        if workers is not None:  # serve() ended without a shutdown (a failed start)
            await anyio.to_thread.run_sync(workers.stop)

"""Streamable HTTP for ``proctor mcp --transport http``: the key, the bind, the bearer check.

The server refuses to start without ``PROCTOR_MCP_API_KEY`` (printable ASCII, at least 16
characters) and refuses a non-loopback bind unless ``--public-url`` names where clients reach
it (its host is then the only one the Host and Origin checks admit). Every HTTP request must
carry ``Authorization: Bearer <key>``; the comparison is over SHA-256 digests with
:func:`hmac.compare_digest`, so neither the length nor the content of the key leaks through
timing. A refused request gets 401 and an ``mcp_auth_refused`` audit event; an admitted one
carries the key's token id to the request audit.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

from proctor.errors import ConfigError, UsageError
from proctor.mcp.shared import token_id

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from proctor.mcp.server import ProctorServer

__all__ = ["API_KEY_ENV", "BearerAuth", "HttpSettings", "check_http_settings", "serve_http"]

API_KEY_ENV = "PROCTOR_MCP_API_KEY"
MIN_KEY_LENGTH = 16
MCP_PATH = "/mcp"


@dataclass(frozen=True)
class HttpSettings:
    """A checked HTTP configuration (valid by construction through :func:`check_http_settings`).

    Attributes:
        host, port: where to bind (port 0 picks a free one).
        key: the API key (never logged; its token id is).
        public_url: where clients reach a non-loopback bind, or ``None``.
        allowed_hosts, allowed_origins: what the Host and Origin checks admit.
    """

    host: str
    port: int
    key: str = ""
    public_url: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

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
    host: str, port: int, public_url: str | None, environ: Mapping[str, str]
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
    return HttpSettings(host, port, key, public_url, tuple(hosts), tuple(origins))


class BearerAuth:
    """ASGI middleware: admits a request only with the right bearer token.

    A refused request never reaches the MCP app; it gets 401 with ``WWW-Authenticate: Bearer``
    and is audited with the reason (missing, malformed, mismatch) and the peer address.
    """

    def __init__(self, app: ASGIApp, settings: HttpSettings, proctor: ProctorServer) -> None:
        self.app = app
        self._digest = hashlib.sha256(settings.key.encode("ascii")).digest()
        self._token_id = settings.token_id
        self._proctor = proctor

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
        await anyio.to_thread.run_sync(
            lambda: self._proctor.audit(
                "mcp_auth_refused",
                reason=reason,
                peer=str(client[0]),
                method=str(scope.get("method")),
                path=str(scope.get("path"))[:200],
                caller={"transport": "http", "token_id": None, "client": None},
            )
        )
        body = json.dumps({"error": "unauthorized", "reason": reason}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="proctor"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def build_app(proctor: ProctorServer, settings: HttpSettings) -> ASGIApp:
    """The Starlette app of the SDK's streamable HTTP transport behind :class:`BearerAuth`."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = proctor.build()
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(settings.allowed_hosts),
        allowed_origins=list(settings.allowed_origins),
    )
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=security, host=settings.host
    )
    from proctor.mcp.frames import StrictFrames

    # Behind the bearer check: an unauthenticated body is never read.
    return BearerAuth(StrictFrames(app, proctor.audit), settings, proctor)


async def serve_http(proctor: ProctorServer, settings: HttpSettings) -> None:
    """Serve until interrupted; print the URL on stderr once the socket listens.

    Raises:
        ConfigError: ``mcp_bind_failed`` when the address cannot be bound.
    """
    import uvicorn

    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host.strip("[]"), settings.port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot bind {settings.host}:{settings.port}: {exc.strerror}", code="mcp_bind_failed"
        ) from exc
    sock.listen(128)  # connections queue from now on, before uvicorn starts accepting
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build_app(proctor, settings),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    shown = f"[{settings.host}]" if family == socket.AF_INET6 else settings.host
    proctor.audit(
        "mcp_server_started",
        transport="http",
        bind=f"{shown}:{port}",
        public_url=settings.public_url,
        token_id=settings.token_id,
        tools=sorted(t.name for t in proctor.tool_list()),
    )
    sys.stderr.write(f"proctor mcp: serving http://{shown}:{port}{MCP_PATH}\n")
    sys.stderr.flush()
    await server.serve(sockets=[sock])

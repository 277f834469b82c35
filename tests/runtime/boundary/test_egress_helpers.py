"""Loopback servers that count what reaches them, for the egress and http.request tests.

No tests live here. Every server binds 127.0.0.1 on a free port and records each accepted
connection, request line, Host header, Authorization header and (for TLS) the SNI name, so a
test can prove a refused request never arrived.
"""

from __future__ import annotations

import datetime
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

Reply = tuple[int, dict[str, str], bytes]
Route = Callable[["Seen"], Reply]


@dataclass
class Seen:
    """One request a server received."""

    method: str
    path: str
    host: str | None
    authorization: str | None
    body: bytes


@dataclass
class Server:
    """A running loopback server and what it saw."""

    port: int
    connections: int = 0
    requests: list[Seen] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def origin(self) -> str:
        return f"127.0.0.1:{self.port}"


def echo(seen: Seen) -> Reply:
    """Reply with the Authorization header and the body the server received."""
    payload = (seen.authorization or "") + "|" + seen.body.decode("utf-8", "replace")
    return 200, {"Content-Type": "text/plain; charset=utf-8"}, payload.encode("utf-8")


@contextmanager
def serve(route: Route = echo, *, tls: ssl.SSLContext | None = None) -> Iterator[Server]:
    """Run a counting HTTP(S) server on 127.0.0.1 for the duration of the block."""
    state = Server(port=0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen = Seen(
                self.command,
                self.path,
                self.headers.get("Host"),
                self.headers.get("Authorization"),
                self.rfile.read(length) if length else b"",
            )
            with state.lock:
                state.requests.append(seen)
            status, headers, body = route(seen)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Counting(ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self) -> Any:
            sock, address = super().get_request()
            with state.lock:
                state.connections += 1
            return sock, address

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that aborts a TLS handshake is part of some tests

    server = Counting(("127.0.0.1", 0), Handler)
    if tls is not None:
        tls.sni_callback = lambda _sock, name, _ctx: state.sni.append(name)  # type: ignore[assignment]
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def self_signed(tmp: Path, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a fresh self-signed certificate for ``name``, and a client
    context that trusts exactly that certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp / "cert.pem").write_bytes(cert_pem)
    (tmp / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    client = ssl.create_default_context(cadata=cert_pem.decode("ascii"))
    return server, client


def sinkhole(server: Server) -> Callable[[ssl.SSLContext | bool], httpx.BaseTransport]:
    """A pool factory that sends every request the guard lets through to ``server``, whatever
    address it was checked for; so a counter of zero means nothing passed the guard."""

    class Sink(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport(proxy=None, retries=0)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            redirected = request.url.copy_with(scheme="http", host="127.0.0.1", port=server.port)
            return self.inner.handle_request(
                httpx.Request(
                    request.method, redirected, headers=request.headers, stream=request.stream
                )
            )

        def close(self) -> None:
            self.inner.close()

    return lambda _verify: Sink()

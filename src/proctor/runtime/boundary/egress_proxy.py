"""The egress proxy: a sandboxed process's only way out of its own network namespace.

A sandboxed process never shares the host's network namespace (``docs/sandbox.md``). When the
run's authority grants egress, proctor runs an :class:`EgressProxy` on the host for as long as
the process lives: it listens on a unix socket in a private folder that bubblewrap binds into
the sandbox (:mod:`proctor.runtime.boundary.netrelay`), and a small relay inside the sandbox
(:mod:`proctor.runtime.boundary.egress_forwarder`) accepts on ``127.0.0.1`` there and hands
each connection to it. ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``ALL_PROXY`` point at the relay.

The proxy speaks HTTP ``CONNECT`` (any TCP, TLS included), plain HTTP with an absolute URL
(``GET http://host/path``), and SOCKS5 ``CONNECT`` (told apart by the first byte). Every
connection passes the egress guard before anything is dialled
(:func:`proctor.runtime.boundary.egress.check_destination`: the run's allow-list, the name
resolved once, every address checked against the denied ranges), and the proxy dials the checked
address itself, never the name. Each decision, allowed or refused, is handed to the
``on_connection`` callback (the call's receipt and the audit log). Refused: a destination the
guard refuses, a request that is not one of the three forms, a SOCKS command other than
``CONNECT``; the client gets ``403`` (HTTP) or ``0x02`` (SOCKS) and nothing is dialled.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import EgressRefused
from proctor.runtime.boundary.egress import (
    EgressAllow,
    Resolver,
    SystemResolver,
    check_destination,
)
from proctor.runtime.boundary.netrelay import SOCKET_NAME, make_folder, pipe_both

__all__ = ["Connection", "EgressProxy"]

_HEAD_BYTES = 64 * 1024
# connections open at once; past it a new one is closed at once (a process cannot make proctor
# start threads without bound)
_MAX_OPEN = 256
_HEAD_SECONDS = 30.0
_DIAL_SECONDS = 10.0
_CHUNK = 64 * 1024
_HOP_HEADERS = frozenset(
    {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}
)


@dataclass(frozen=True)
class Connection:
    """One connection a sandboxed process asked for, and what the guard decided.

    Attributes:
        host: the destination as asked (a name, or an address; IPv6 in brackets).
        port: the destination port.
        protocol: ``connect`` (HTTP CONNECT), ``http`` (plain HTTP) or ``socks5``.
        address: the checked address dialled (``None`` when refused or nothing answered).
        allowed: the guard allowed it.
        refusal: why it was refused (the guard's ``kind``: ``address``, ``unresolved`` ...,
            or ``bad_request``); ``unreachable`` when allowed but no checked address
            answered; otherwise ``None``.
    """

    host: str
    port: int
    protocol: str
    address: str | None
    allowed: bool
    refusal: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The form receipts and audit events carry."""
        return {
            "host": self.host,
            "port": self.port,
            "protocol": self.protocol,
            "address": self.address,
            "allowed": self.allowed,
            "refusal": self.refusal,
        }


class _Refused(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class EgressProxy:
    """The proxy of one sandboxed process (see the module docstring).

    Use :meth:`start` before the process starts and :meth:`stop` once it has ended (or as a
    context manager); :meth:`stop` closes every connection still open, ends every thread and
    removes the folder, so nothing of the proxy outlives the process.

    Args:
        allow: the run's egress allow-list (its authority's grant).
        resolver: how names become addresses (default: the system resolver).
        on_connection: called once per connection asked for, from the proxy's threads.
        folder: an empty private folder to listen in, made by the caller (the command line
            of a process started elsewhere names it before the proxy starts); by default
            :meth:`start` makes one. Removed by :meth:`stop` either way.
    """

    def __init__(
        self,
        allow: EgressAllow,
        *,
        resolver: Resolver | None = None,
        on_connection: Callable[[Connection], None] | None = None,
        folder: Path | None = None,
    ) -> None:
        self.allow = allow
        self.resolver = resolver or SystemResolver()
        self.on_connection = on_connection
        self.folder: Path | None = folder
        self._listener: socket.socket | None = None
        self._wake = os.pipe()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._accepting: threading.Thread | None = None
        self._stopped = False

    @property
    def socket_path(self) -> Path:
        """The unix socket on the host."""
        assert self.folder is not None, "the proxy has not been started"
        return self.folder / SOCKET_NAME

    def start(self) -> EgressProxy:
        """Create the private folder and the socket, and start accepting."""
        if self.folder is None:
            self.folder = make_folder()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        listener.listen(64)
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, name="egress-proxy", daemon=True)
        self._accepting.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every open connection, wait for the threads, remove the
        folder. Safe to call more than once."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            live = list(self._open)
        os.write(self._wake[1], b"x")
        if self._accepting is not None:
            self._accepting.join()
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            threads = list(self._threads)
        # a thread still resolving a name or dialling cannot be interrupted; it holds no socket
        # the sandbox can reach and ends within its timeout, so the wait for it is bounded
        deadline = time.monotonic() + _DIAL_SECONDS
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._listener is not None:
            self._listener.close()
        for fd in self._wake:
            os.close(fd)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            ready, _, _ = select.select([self._listener.fileno(), self._wake[0]], [], [])
            if self._wake[0] in ready:
                return
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            with self._lock:
                if self._stopped:
                    client.close()
                    return
                if len(self._threads) >= _MAX_OPEN:
                    client.close()
                    continue
                self._open.add(client)
                thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
                self._threads.add(thread)
            thread.start()

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._stopped:
                return False
            self._open.add(sock)
            return True

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.settimeout(_HEAD_SECONDS)
            first = client.recv(1)
            if not first:
                return
            upstream = self._socks(client) if first == b"\x05" else self._http(client, first)
            if upstream is not None:
                client.settimeout(None)
                upstream.settimeout(None)
                pipe_both(client, upstream)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(client)
                if upstream is not None:
                    self._open.discard(upstream)
                self._threads.discard(threading.current_thread())
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()

    def _decide(self, host: str, port: int, protocol: str) -> socket.socket:
        """Check the destination, dial a checked address, report the decision.

        Raises:
            _Refused: the guard refused it, or nothing answered (``unreachable``).
        """
        try:
            if not 0 < port < 65536:
                raise _Refused("bad_request", "the port is not valid")
            try:
                addresses, _name = check_destination(host, port, self.allow, self.resolver)
            except EgressRefused as exc:
                raise _Refused(
                    str((exc.details or {}).get("kind") or "refused"), exc.message
                ) from exc
        except _Refused as refused:
            self._report(Connection(host, port, protocol, None, False, refused.kind))
            raise
        for address in addresses:
            try:
                upstream = socket.create_connection((str(address), port), timeout=_DIAL_SECONDS)
            except OSError:
                continue
            if not self._track(upstream):
                upstream.close()
                break
            self._report(Connection(host, port, protocol, str(address), True))
            return upstream
        self._report(Connection(host, port, protocol, None, True, "unreachable"))
        raise _Refused("unreachable", f"{host} port {port} did not answer")

    def _report(self, connection: Connection) -> None:
        if self.on_connection is not None:
            self.on_connection(connection)

    def _http(self, client: socket.socket, first: bytes) -> socket.socket | None:
        head, rest = _read_head(client, first)
        if head is None:
            _answer(client, 400, "the request is not an HTTP proxy request")
            return None
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3:
            _answer(client, 400, "malformed request line")
            return None
        method, target, version = parts
        try:
            if method == b"CONNECT":
                host, port = _host_port(target.decode("ascii"), None)
                upstream = self._decide(host, port, "connect")
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
                return upstream
            text = target.decode("ascii")
            if not text.lower().startswith("http://"):
                self._report(Connection("", 0, "http", None, False, "bad_request"))
                _answer(client, 400, "only http:// URLs and CONNECT go through this proxy")
                return None
            authority, _, path = text[len("http://") :].partition("/")
            if "@" in authority:
                self._report(Connection("", 0, "http", None, False, "userinfo"))
                _answer(client, 403, "credentials in the URL (userinfo) are not allowed")
                return None
            host, port = _host_port(authority, 80)
            upstream = self._decide(host, port, "http")
        except (UnicodeDecodeError, ValueError):
            _answer(client, 400, "malformed proxy target")
            return None
        except _Refused as refused:
            _answer(client, 403 if refused.kind != "unreachable" else 502, str(refused))
            return None
        kept = [line for line in lines[1:] if line and _header_name(line) not in _HOP_HEADERS]
        out = b"\r\n".join(
            [method + b" /" + path.encode("ascii") + b" " + version, *kept, b"Connection: close"]
        )
        upstream.sendall(out + b"\r\n\r\n" + rest)
        return upstream

    def _socks(self, client: socket.socket) -> socket.socket | None:
        count = _exact(client, 1)[0]
        methods = _exact(client, count)
        if 0 not in methods:
            client.sendall(b"\x05\xff")
            return None
        client.sendall(b"\x05\x00")
        version, command, _reserved, kind = _exact(client, 4)
        if kind == 1:
            host = socket.inet_ntop(socket.AF_INET, _exact(client, 4))
        elif kind == 4:
            host = "[" + socket.inet_ntop(socket.AF_INET6, _exact(client, 16)) + "]"
        elif kind == 3:
            host = _exact(client, _exact(client, 1)[0]).decode("ascii", "replace")
        else:
            client.sendall(b"\x05\x08\x00\x01" + bytes(6))
            return None
        port = int.from_bytes(_exact(client, 2), "big")
        if version != 5 or command != 1:  # CONNECT only: no BIND, no UDP ASSOCIATE
            self._report(Connection(host, port, "socks5", None, False, "bad_request"))
            client.sendall(b"\x05\x07\x00\x01" + bytes(6))
            return None
        try:
            upstream = self._decide(host, port, "socks5")
        except _Refused as refused:
            code = b"\x04" if refused.kind == "unreachable" else b"\x02"
            client.sendall(b"\x05" + code + b"\x00\x01" + bytes(6))
            return None
        client.sendall(b"\x05\x00\x00\x01" + bytes(6))
        return upstream


def _exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client closed the connection")
        data += chunk
    return data


def _read_head(sock: socket.socket, data: bytes) -> tuple[bytes | None, bytes]:
    """The request head (without its blank line) and whatever came after it."""
    while b"\r\n\r\n" not in data:
        if len(data) > _HEAD_BYTES:
            return None, b""
        chunk = sock.recv(_CHUNK)
        if not chunk:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _header_name(line: bytes) -> bytes:
    return line.partition(b":")[0].strip().lower()


def _host_port(text: str, default: int | None) -> tuple[str, int]:
    """``host:port`` (IPv6 in brackets) as the host the guard reads and the port.

    Raises:
        ValueError: no port where one is needed, or not a number.
    """
    if text.startswith("["):
        end = text.index("]")
        host, tail = text[: end + 1], text[end + 1 :]
    else:
        host, _, port_text = text.partition(":")
        tail = ":" + port_text if port_text else ""
    if not tail:
        if default is None:
            raise ValueError("no port")
        return host, default
    if not tail.startswith(":") or not tail[1:].isdigit():
        raise ValueError("bad port")
    return host, int(tail[1:])


def _answer(sock: socket.socket, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (message + "\n").encode("utf-8", "replace")
    with contextlib.suppress(OSError):
        sock.sendall(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("ascii")
            + body
        )

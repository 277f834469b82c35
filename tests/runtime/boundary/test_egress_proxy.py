"""The egress proxy on its own: real unix sockets, a real loopback server, no sandbox.

Each refusal is proved by the server's connection count staying at 0; each allowed connection
by the server's answer and the address the proxy reports it dialled.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.runtime.boundary.egress import StaticResolver
from proctor.runtime.boundary.egress_allow import EgressAllow
from proctor.runtime.boundary.egress_proxy import Connection, EgressProxy


class Server:
    """A loopback server that answers ``pong`` (or an HTTP response) and counts connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.seen: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            with conn:
                try:
                    data = conn.recv(4096)
                    self.seen.append(data)
                    if data.startswith(b"GET "):
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    else:
                        conn.sendall(b"pong\n")
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(5)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def _proxy(
    *allow: str, table: dict[str, list[str]] | None = None
) -> tuple[EgressProxy, list[Connection]]:
    seen: list[Connection] = []
    proxy = EgressProxy(
        EgressAllow.parse(allow),
        resolver=StaticResolver(table or {}),
        on_connection=seen.append,
    )
    return proxy.start(), seen


def _client(proxy: EgressProxy) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(proxy.socket_path))
    return sock


def _connect(proxy: EgressProxy, target: str) -> str:
    with _client(proxy) as sock:
        sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = sock.recv(4096).split(b"\r\n")[0].decode()
        if " 200 " not in head:
            return head
        sock.sendall(b"ping\n")
        return sock.recv(100).decode().strip()


def _socks(proxy: EgressProxy, name: str, port: int) -> str:
    with _client(proxy) as sock:
        sock.sendall(b"\x05\x01\x00")
        assert sock.recv(2) == b"\x05\x00"
        request = b"\x05\x01\x00\x03" + bytes([len(name)]) + name.encode()
        sock.sendall(request + struct.pack(">H", port))
        answer = sock.recv(10)
        if answer[1] != 0:
            return f"socks {answer[1]}"
        sock.sendall(b"ping\n")
        return sock.recv(100).decode().strip()


def test_the_loopback_is_refused_without_an_allow_entry(server: Server) -> None:
    proxy, seen = _proxy("10.20.0.0/16")
    try:
        assert _connect(proxy, f"127.0.0.1:{server.port}") == "HTTP/1.1 403 Forbidden"
        # another spelling of the same address is read the same way
        assert _connect(proxy, f"2130706433:{server.port}") == "HTTP/1.1 403 Forbidden"
        assert _socks(proxy, "127.0.0.1", server.port) == "socks 2"
    finally:
        proxy.stop()
    assert server.count == 0
    assert [(c.allowed, c.refusal, c.address) for c in seen] == [(False, "address", None)] * 3


def test_a_name_with_one_refused_address_is_refused_whole(server: Server) -> None:
    # DNS rebinding's shape: a public address and the loopback for one name
    proxy, seen = _proxy(table={"mixed.example": ["93.184.216.34", "127.0.0.1"]})
    try:
        assert _connect(proxy, f"mixed.example:{server.port}") == "HTTP/1.1 403 Forbidden"
        assert _socks(proxy, "nowhere.example", server.port) == "socks 2"
    finally:
        proxy.stop()
    assert server.count == 0
    assert [c.refusal for c in seen] == ["address", "unresolved"]


def test_an_allowed_destination_is_dialled_at_its_checked_address(server: Server) -> None:
    proxy, seen = _proxy("127.0.0.1", table={"svc.internal": ["127.0.0.1"]})
    try:
        assert _connect(proxy, f"127.0.0.1:{server.port}") == "pong"
        assert _socks(proxy, "svc.internal", server.port) == "pong"
        with _client(proxy) as sock:
            sock.sendall(
                f"GET http://svc.internal:{server.port}/a?b=1 HTTP/1.1\r\n"
                f"Host: svc.internal:{server.port}\r\nProxy-Connection: keep-alive\r\n"
                "Proxy-Authorization: Basic eDp5\r\n\r\n".encode()
            )
            assert sock.recv(4096).endswith(b"ok")
    finally:
        proxy.stop()
    assert server.count == 3
    get = server.seen[-1]
    assert get.startswith(b"GET /a?b=1 HTTP/1.1\r\n")
    assert b"proxy-" not in get.lower() and b"Connection: close" in get
    assert [(c.host, c.protocol, c.address) for c in seen] == [
        ("127.0.0.1", "connect", "127.0.0.1"),
        ("svc.internal", "socks5", "127.0.0.1"),
        ("svc.internal", "http", "127.0.0.1"),
    ]


def test_malformed_and_unsupported_requests_dial_nothing(server: Server) -> None:
    proxy, seen = _proxy("127.0.0.1")
    try:
        with _client(proxy) as sock:
            sock.sendall(f"GET https://127.0.0.1:{server.port}/ HTTP/1.1\r\n\r\n".encode())
            assert sock.recv(4096).startswith(b"HTTP/1.1 400")
        with _client(proxy) as sock:
            sock.sendall(f"GET http://u:p@127.0.0.1:{server.port}/ HTTP/1.1\r\n\r\n".encode())
            assert sock.recv(4096).startswith(b"HTTP/1.1 403")
        with _client(proxy) as sock:  # SOCKS BIND
            sock.sendall(b"\x05\x01\x00")
            sock.recv(2)
            sock.sendall(b"\x05\x02\x00\x01\x7f\x00\x00\x01" + struct.pack(">H", server.port))
            assert sock.recv(10)[1] == 7
    finally:
        proxy.stop()
    assert server.count == 0
    assert all(not c.allowed for c in seen)


def test_stop_ends_open_tunnels_and_leaves_nothing(server: Server) -> None:
    proxy, _seen = _proxy("127.0.0.1")
    folder = proxy.folder
    assert isinstance(folder, Path) and folder.is_dir()
    sock = _client(proxy)
    sock.sendall(f"CONNECT 127.0.0.1:{server.port} HTTP/1.1\r\n\r\n".encode())
    assert b" 200 " in sock.recv(4096)
    proxy.stop()  # returns only once every thread of the proxy has ended
    assert sock.recv(100) in (b"", b"pong\n")
    sock.close()
    assert not folder.exists()
    assert not [t for t in threading.enumerate() if t.name == "egress-proxy"]


def test_a_secret_in_a_host_name_is_scrubbed_from_the_record_and_the_audit(
    tmp_path: Path,
) -> None:
    from proctor.runtime.admission.sandboxing import hand_over
    from proctor.runtime.boundary.sandbox import EgressLog, SandboxUse
    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.records.audit import AuditLog

    secret = "s3cr3t-" + "x" * 24
    taint = TaintSet()
    taint.add(secret)
    use = SandboxUse("bubblewrap", "required", network=True, egress=("127.0.0.1",),
                     log=EgressLog())  # fmt: skip
    audit = AuditLog(tmp_path / "audit.jsonl")
    record = hand_over(use, {}, audit, run_id="r", step_index=0, tool="command.execute",
                       call_id="c", taint=taint)  # fmt: skip
    assert use.log is not None
    asked = Connection(f"{secret}.example", 443, "connect", "127.0.0.1", True)
    use.log.note(asked.to_json())
    text = (tmp_path / "audit.jsonl").read_text()
    assert secret not in text and '"egress_connection"' in text
    assert secret not in str(record) and secret not in str(use.receipt_json())
    assert record["sandbox"]["destinations"][0]["port"] == 443

"""A sandboxed Node.js upstream with an egress grant: Node's ``fetch`` ignores the proxy
variables, so proctor's preload tunnels it through the egress proxy. Granted one loopback host,
the npm everything server reaches it, and an ungranted loopback host (another address of the
same machine) never sees a connection: the attack is proved by the server that was not hit."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.gateway.review import pin_servers
from proctor.runtime.gateway.upstreams import Upstreams, load_upstreams
from tests.runtime.gateway.support import everything_server, make_workspace


class _Counting(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *_args: Any) -> None:
        pass


def _serve(address: str) -> tuple[ThreadingHTTPServer, threading.Thread, list[str]]:
    hits: list[str] = []
    handler = type("Handler", (_Counting,), {"hits": hits})
    server = ThreadingHTTPServer((address, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread, hits


@pytest.fixture
def two_hosts() -> Iterator[tuple[tuple[str, list[str]], tuple[str, list[str]]]]:
    """A granted host (127.0.0.1) and an ungranted one (127.0.0.2, loopback too)."""
    running = [_serve("127.0.0.1"), _serve("127.0.0.2")]
    try:
        (a, _, a_hits), (b, _, b_hits) = running
        yield (
            (f"http://127.0.0.1:{a.server_address[1]}/granted.txt", a_hits),
            (f"http://127.0.0.2:{b.server_address[1]}/secret.txt", b_hits),
        )
    finally:
        for server, thread, _ in running:
            server.shutdown()
            server.server_close()
            thread.join()


def test_a_node_upstream_granted_one_host_reaches_it_and_nothing_else(
    tmp_path: Path, two_hosts: tuple[tuple[str, list[str]], tuple[str, list[str]]]
) -> None:
    (granted, granted_hits), (other, other_hits) = two_hosts
    toml = '[mcp.every]\negress = ["127.0.0.1"]\n'
    root = make_workspace(tmp_path / "ws", {"every": everything_server()}, toml)
    environ = {**os.environ, "PROCTOR_HOME": str(tmp_path / "home")}
    config = load_upstreams(root, environ)
    assert config is not None
    upstreams = Upstreams(config, Workspace.discover(root), environ)
    try:
        pin_servers(upstreams, ["every"])
        assert upstreams.sandboxes["every"].used == "bubblewrap"
        out = upstreams.call("every", "gzip-file-as-resource", {"name": "a.gz", "data": granted})
        assert granted_hits == ["/granted.txt"], out  # fetch went through the proxy
        # the attack: the same server asks for a host the grant does not name
        with pytest.raises(Exception) as refused:
            upstreams.call("every", "gzip-file-as-resource", {"name": "b.gz", "data": other})
        assert getattr(refused.value, "code", None) == "mcp_tool_error"
        assert other_hits == []  # no connection ever reached it
        assert granted_hits == ["/granted.txt"]
    finally:
        upstreams.close()


def test_without_a_grant_a_node_upstream_reaches_no_host(
    tmp_path: Path, two_hosts: tuple[tuple[str, list[str]], tuple[str, list[str]]]
) -> None:
    (granted, granted_hits), _ = two_hosts
    root = make_workspace(tmp_path / "ws", {"every": everything_server()})
    environ = {**os.environ, "PROCTOR_HOME": str(tmp_path / "home")}
    config = load_upstreams(root, environ)
    assert config is not None
    upstreams = Upstreams(config, Workspace.discover(root), environ)
    try:
        pin_servers(upstreams, ["every"])
        with pytest.raises(Exception) as refused:
            upstreams.call("every", "gzip-file-as-resource", {"name": "a.gz", "data": granted})
        assert getattr(refused.value, "code", None) == "mcp_tool_error"
        assert granted_hits == []
    finally:
        upstreams.close()

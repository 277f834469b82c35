"""The Node preload the egress relay loads (``node_egress.cjs``): Node's ``fetch`` and its
``http`` client, deaf to the proxy variables, make their connections through the egress proxy,
which admits the granted host and refuses the other (each decision seen in the proxy's log, the
refused host's server never reached). Run here without bubblewrap, so the log, not the
network namespace, is what shows the path taken."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

import proctor.runtime.boundary.egress_forwarder as forwarder
from proctor.runtime.boundary.egress_allow import EgressAllow
from proctor.runtime.boundary.egress_proxy import EgressProxy


class _Hello(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def hosts() -> Iterator[tuple[int, list[str], int, list[str]]]:
    servers = []
    for address in ("127.0.0.1", "127.0.0.2"):
        hits: list[str] = []
        server = ThreadingHTTPServer((address, 0), type("H", (_Hello,), {"hits": hits}))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread, hits))
    try:
        (a, _, a_hits), (b, _, b_hits) = servers
        yield a.server_address[1], a_hits, b.server_address[1], b_hits
    finally:
        for server, thread, _ in servers:
            server.shutdown()
            server.server_close()
            thread.join()


def test_node_fetch_and_http_go_through_the_proxy(
    hosts: tuple[int, list[str], int, list[str]],
) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    port, hits, other_port, other_hits = hosts
    decisions: list[dict[str, Any]] = []
    proxy = EgressProxy(
        EgressAllow.parse(["127.0.0.1"]), on_connection=lambda c: decisions.append(c.to_json())
    ).start()
    script = f"""
    const http = require('http');
    const get = (url) => new Promise((ok) => http.get(url, (r) => {{
      let body = ''; r.on('data', (d) => body += d); r.on('end', () => ok('http ' + body));
    }}).on('error', (e) => ok('http error ' + (e.code || e.message))));
    (async () => {{
      console.log(await get('http://127.0.0.1:{port}/http'));
      console.log(await fetch('http://127.0.0.1:{port}/fetch').then((r) => r.text(),
        (e) => 'fetch error'));
      console.log(await get('http://127.0.0.2:{other_port}/denied'));
    }})();
    """
    try:
        assert proxy.folder is not None
        out = subprocess.run(
            [sys.executable, "-I", "-S", str(Path(forwarder.__file__)), str(proxy.folder),
             "--egress", "--", "node", "-e", script],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        proxy.stop()
    assert out.stdout.split("\n")[:3] == ["http ok", "ok", "http error EGRESS_REFUSED"], out
    assert sorted(hits) == ["/fetch", "/http"]
    assert other_hits == []
    allowed = [(d["host"], d["allowed"]) for d in decisions]
    assert sorted(allowed) == [("127.0.0.1", True), ("127.0.0.1", True), ("127.0.0.2", False)]


def test_node_https_is_tunnelled_with_tls_to_the_origin(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    import os

    from tests.runtime.boundary.test_egress_helpers import self_signed

    server_tls, _client = self_signed(tmp_path, "localhost")
    hits: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Hello,), {"hits": hits}))
    server.socket = server_tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    decisions: list[dict[str, Any]] = []
    proxy = EgressProxy(
        EgressAllow.parse(["localhost", "127.0.0.1"]),
        on_connection=lambda c: decisions.append(c.to_json()),
    ).start()
    port = server.server_address[1]
    script = f"""
    const https = require('https');
    const get = (url) => new Promise((ok) => https.get(url, (r) => {{
      let body = ''; r.on('data', (d) => body += d); r.on('end', () => ok('https ' + body));
    }}).on('error', (e) => ok('https error ' + (e.code || e.message))));
    (async () => {{
      console.log(await get('https://localhost:{port}/https'));
      console.log(await fetch('https://localhost:{port}/fetch').then((r) => r.text(),
        (e) => 'fetch error ' + (e.cause && e.cause.code)));
    }})();
    """
    env = {"PATH": os.environ.get("PATH", ""), "NODE_EXTRA_CA_CERTS": str(tmp_path / "cert.pem")}
    try:
        assert proxy.folder is not None
        out = subprocess.run(
            [sys.executable, "-I", "-S", str(Path(forwarder.__file__)), str(proxy.folder),
             "--egress", "--", "node", "-e", script],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    finally:
        proxy.stop()
        server.shutdown()
        server.server_close()
        thread.join()
    assert out.stdout.split("\n")[:2] == ["https ok", "ok"], out
    assert sorted(hits) == ["/fetch", "/https"]
    assert [d["allowed"] for d in decisions] == [True, True]

"""Egress per destination for processes: attacks on the network side of the sandbox.

Each test runs ``command.execute`` for real under bubblewrap (``PROCTOR_SANDBOX=required``)
against real listeners of the host: a loopback TCP listener and an abstract unix socket (the
kind X11, D-Bus and agents listen on). A sandboxed process never shares the host's network
namespace, so neither is reachable, with or without an egress grant; with a grant, its only
way out is the egress proxy, which refuses a destination outside the grant (nothing reaches the
listener, the refusal is audited) and lets one inside it through (recorded in the receipt).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.engine.session import Session
from tests.runtime.boundary.sandbox_support import (
    call_receipts,
    call_records,
    needs_bwrap,
    wait_until,
)
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

pytestmark = needs_bwrap

PY = sys.executable

# Tries each way out named on its command line and prints what happened, as JSON.
PROBE = r"""
import json, os, socket, struct, sys, urllib.error, urllib.request

def proxy():
    host, port = os.environ["HTTP_PROXY"].removeprefix("http://").rsplit(":", 1)
    return host, int(port)

def line(sock):
    sock.sendall(b"ping\n")
    return sock.recv(100).decode().strip()

report = []
args = sys.argv[1:]
while args:
    op, arg = args.pop(0), args.pop(0)
    try:
        if op == "tcp":  # straight to an address, no proxy
            host, port = arg.rsplit(":", 1)
            socket.create_connection((host, int(port)), timeout=3).close()
            report.append("done")
        elif op == "abstract":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(3)
            s.connect("\0" + arg)
            s.close()
            report.append("done")
        elif op == "get":  # plain HTTP, through HTTP_PROXY as urllib reads it
            with urllib.request.urlopen(arg, timeout=10) as r:
                report.append(r.read().decode())
        elif op == "connect":  # HTTP CONNECT through HTTP_PROXY, then one line each way
            s = socket.create_connection(proxy(), timeout=10)
            s.sendall(f"CONNECT {arg} HTTP/1.1\r\nHost: {arg}\r\n\r\n".encode())
            head = s.recv(4096).split(b"\r\n")[0].decode()
            report.append(line(s) if " 200 " in head else head)
            s.close()
        elif op == "socks":  # SOCKS5 CONNECT through ALL_PROXY, by name
            host, port = arg.rsplit(":", 1)
            s = socket.create_connection(proxy(), timeout=10)
            s.sendall(b"\x05\x01\x00")
            assert s.recv(2) == b"\x05\x00"
            s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode()
                      + struct.pack(">H", int(port)))
            answer = s.recv(10)
            report.append(line(s) if answer[1] == 0 else f"socks {answer[1]}")
            s.close()
        elif op == "env":
            report.append(os.environ.get(arg))
    except urllib.error.HTTPError as exc:
        report.append(exc.code)
    except OSError:
        report.append("denied")
print(json.dumps(report))
"""


class Listener:
    """A host listener that answers ``pong`` to one line and counts connections."""

    def __init__(self, family: int, address: Any) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(16)
        self.count = 0
        self.requests: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.count += 1
            with conn, contextlib.suppress(OSError):  # a client may hang up first
                data = conn.recv(4096)
                self.requests.append(data)
                if data.startswith(b"GET "):
                    body = b"hello from the host"
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(body), body)
                    )
                else:
                    conn.sendall(b"pong\n")

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(5)


@pytest.fixture(autouse=True)
def own_temporary_folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This test's proxies make their folders in a temporary folder of its own (short, for the
    unix socket's path), so counting them never sees another test's running beside it."""
    import shutil

    private = tempfile.mkdtemp(prefix="pe")
    monkeypatch.setattr(tempfile, "tempdir", private)
    yield
    shutil.rmtree(private, ignore_errors=True)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    (root / "tools" / "net.py").write_text(PROBE)
    return root


@pytest.fixture
def tcp() -> Iterator[Listener]:
    listener = Listener(socket.AF_INET, ("127.0.0.1", 0))
    yield listener
    listener.close()


@pytest.fixture
def abstract() -> Iterator[tuple[Listener, str]]:
    name = "proctor-test-" + secrets.token_hex(8)
    listener = Listener(socket.AF_UNIX, "\0" + name)
    yield listener, name
    listener.close()


def _run(root: Path, *ops: str) -> tuple[Session, Any, list[Any]]:
    make_skill(
        root,
        "net",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: run
        tool: command.execute
        inputs: {json.dumps({"argv": [PY, "tools/net.py", *ops]})}
""",
    )
    s = session(root, environ={"PROCTOR_HOME": str(root / ".home"), "PROCTOR_SANDBOX": "required"})
    env = s.run("net", cwd=root)
    assert env.outcome == "completed", env.refusal
    (call,) = call_records(s, env.run_id)
    assert call.result["sandbox"]["used"] == "bubblewrap"
    return s, env, json.loads(env.result["stdout"])


def _grant(root: Path, *allow: str) -> None:
    (root / "proctor.toml").write_text(f"[egress]\nallow = {json.dumps(list(allow))}\n")


def _audit(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".proctor" / "audit.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == "egress_connection"]


def _proxy_folders() -> set[str]:
    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("proctor-egress-")}


def test_without_a_grant_no_host_listener_is_reachable(
    ws: Path, tcp: Listener, abstract: tuple[Listener, str]
) -> None:
    unix, name = abstract
    where = f"127.0.0.1:{tcp.sock.getsockname()[1]}"
    _s, _env, report = _run(ws, "tcp", where, "abstract", name, "env", "HTTP_PROXY")
    assert report == ["denied", "denied", None]  # no way out, and no proxy either
    assert tcp.count == 0 and unix.count == 0


def test_with_a_grant_host_listeners_are_still_unreachable_directly(
    ws: Path, tcp: Listener, abstract: tuple[Listener, str]
) -> None:
    # the grant even allows the loopback: only through the proxy, never by a direct dial
    _grant(ws, "127.0.0.1")
    unix, name = abstract
    where = f"127.0.0.1:{tcp.sock.getsockname()[1]}"
    _s, _env, report = _run(ws, "tcp", where, "abstract", name)
    assert report == ["denied", "denied"]
    assert tcp.count == 0 and unix.count == 0


def test_a_destination_outside_the_grant_is_refused_and_audited(ws: Path, tcp: Listener) -> None:
    _grant(ws, "10.99.0.0/16")  # a grant, but not for the loopback
    port = tcp.sock.getsockname()[1]
    where = f"127.0.0.1:{port}"
    before = _proxy_folders()
    s, env, report = _run(
        ws, "connect", where, "get", f"http://{where}/x", "socks", where, "connect", "[::1]:9"
    )
    assert report == ["HTTP/1.1 403 Forbidden", 403, "socks 2", "HTTP/1.1 403 Forbidden"]
    assert tcp.count == 0  # nothing was dialled
    events = _audit(ws)
    assert [(e["protocol"], e["allowed"], e["refusal"]) for e in events] == [
        ("connect", False, "address"),
        ("http", False, "address"),
        ("socks5", False, "address"),
        ("connect", False, "address"),
    ]
    assert all(e["run_id"] == env.run_id and e["address"] is None for e in events)
    (body,) = call_receipts(s, env.receipt_id)
    assert body["sandbox"]["network"] is True and body["sandbox"]["destinations"] == []
    assert _proxy_folders() == before  # the proxy is gone with the command


def test_a_destination_inside_the_grant_is_reached_and_in_the_receipt(
    ws: Path, tcp: Listener
) -> None:
    _grant(ws, "127.0.0.1")
    port = tcp.sock.getsockname()[1]
    where = f"127.0.0.1:{port}"
    s, env, report = _run(ws, "connect", where, "get", f"http://{where}/page", "socks", where)
    assert report == ["pong", "hello from the host", "pong"]
    wait_until(lambda: tcp.count == 3, "the listener saw the three connections")
    # the plain HTTP request reached the server in origin form, the proxy's headers dropped
    (get,) = [r for r in tcp.requests if r.startswith(b"GET ")]
    assert get.startswith(b"GET /page HTTP/1.1\r\n")
    assert b"proxy-connection" not in get.lower()
    events = _audit(ws)
    assert {(e["protocol"], e["allowed"], e["address"]) for e in events} == {
        ("connect", True, "127.0.0.1"),
        ("http", True, "127.0.0.1"),
        ("socks5", True, "127.0.0.1"),
    }
    (body,) = call_receipts(s, env.receipt_id)
    assert body["sandbox"]["destinations"] == [
        {"host": "127.0.0.1", "port": port, "address": "127.0.0.1"}
    ]


def test_a_started_process_reaches_only_the_grant_through_its_supervisors_proxy(
    ws: Path, tcp: Listener
) -> None:
    from proctor.runtime.tools.procs_log import list_processes

    _grant(ws, "127.0.0.1")
    port = tcp.sock.getsockname()[1]
    where = f"127.0.0.1:{port}"
    before = _proxy_folders()
    ops = ["connect", where, "connect", "[::1]:9", "tcp", where]
    make_skill(
        ws,
        "bg",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: serve
        tool: process.start
        inputs: {json.dumps({"command": PY, "args": ["tools/net.py", *ops]})}
""",
    )
    s = session(ws, environ={"PROCTOR_HOME": str(ws / ".home"), "PROCTOR_SANDBOX": "required"})
    env = s.run("bg", cwd=ws)
    assert env.outcome == "completed", env.refusal
    folder = ws / ".proctor" / "processes"
    wait_until(lambda: not list_processes(folder)[0]["running"], "the process ended")
    (proc,) = list_processes(folder)
    assert proc["destinations"] == [{"address": "127.0.0.1", "host": "127.0.0.1", "port": port}]
    assert tcp.count == 1  # the allowed CONNECT; the direct dial never arrived
    events = _audit(ws)
    assert [(e["tool"], e["allowed"], e["address"]) for e in events] == [
        ("process.start", True, "127.0.0.1"),
        ("process.start", False, None),
    ]
    # the supervisor stopped its proxy and removed its folder once the process ended
    wait_until(lambda: _proxy_folders() == before, "the proxy's folder is removed")


def test_a_published_port_taken_on_the_host_refuses_the_start(ws: Path, tcp: Listener) -> None:
    port = tcp.sock.getsockname()[1]
    make_skill(
        ws,
        "bg",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: serve
        tool: process.start
        inputs: {json.dumps({"command": PY, "args": ["-c", "pass"], "ports": [port]})}
""",
    )
    s = session(ws, environ={"PROCTOR_HOME": str(ws / ".home"), "PROCTOR_SANDBOX": "required"})
    env = s.run("bg", cwd=ws)
    assert env.outcome == "failed"
    assert env.refusal is not None and "in use" in env.refusal.message


PLANT = r"""
import os, socket, sys
port, target = int(sys.argv[1]), sys.argv[2]
name = f"/tmp/.proctor-egress/in-{port}.sock"
os.unlink(name)
os.symlink(target, name)  # for the host's side of the published port to follow
host, proxy_port = os.environ["HTTP_PROXY"].removeprefix("http://").rsplit(":", 1)
s = socket.create_connection((host, int(proxy_port)), timeout=10)
s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
s.sendall(b"ping\n")
print("answer:", s.recv(100), flush=True)
"""


def test_a_link_planted_for_a_published_port_is_never_followed_by_the_host(
    ws: Path, tmp_path: Path
) -> None:
    from proctor.runtime.tools.procs_log import list_processes

    host_socket = tmp_path / "host.sock"  # a host socket (D-Bus, an agent) the sandbox can't see
    target = Listener(socket.AF_UNIX, str(host_socket))
    try:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        _grant(ws, "127.0.0.1")
        (ws / "tools" / "plant.py").write_text(PLANT)
        start = {"command": PY, "args": ["tools/plant.py", str(port), str(host_socket)],
                 "ports": [port]}  # fmt: skip
        make_skill(
            ws,
            "bg",
            f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: serve
        tool: process.start
        inputs: {json.dumps(start)}
""",
        )
        s = session(ws, environ={"PROCTOR_HOME": str(ws / ".home"), "PROCTOR_SANDBOX": "required"})
        env = s.run("bg", cwd=ws)
        assert env.outcome == "completed", env.refusal
        folder = ws / ".proctor" / "processes"
        wait_until(lambda: not list_processes(folder)[0]["running"], "the process ended")
        (proc,) = list_processes(folder)
        assert proc["exit_code"] == 0
        assert proc["destinations"] == [{"address": "127.0.0.1", "host": "127.0.0.1", "port": port}]
        assert target.count == 0  # the host's side refused the link: nothing reached the socket
    finally:
        target.close()

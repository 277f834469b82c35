"""``proctor audit forward``: every audit line reaches a loopback syslog or HTTP receiver, in
order, also when the forwarder is killed -9 mid-stream and started again.

What holds (docs/audit.md#forwarding): at least once and in order; the batch in flight at a
kill may arrive twice, and every line carries its number, so a receiver keeping the highest
number it stored (as these receivers do) holds each line exactly once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import UsageError
from proctor.runtime.records.audit import AuditLog
from proctor.runtime.records.forward import parse_destination, syslog_frame

REPO = Path(__file__).resolve().parents[3]
LINES = 60


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    _emit(root, LINES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROCTOR_", "OTEL_"))}
    env["PROCTOR_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(REPO / "src")
    return root, env


def _emit(root: Path, count: int) -> None:
    log = AuditLog(root / ".proctor" / "audit.jsonl")
    try:
        for i in range(count):
            log.emit("note_written", run_id=f"run{i % 3}", step_index=i, note=f"n{i}")
    finally:
        log.close()


def _log_lines(root: Path) -> list[bytes]:
    return (root / ".proctor" / "audit.jsonl").read_bytes().splitlines()


def _forward(
    root: Path, env: dict[str, str], to: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", "audit", "forward", "--to", to, *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _start(root: Path, env: dict[str, str], to: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", "audit", "forward", "--to", to, *extra],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class _Http:
    """Keeps every POST as (first line number, lines); may hold the ``hold``-th POST open."""

    def __init__(self, hold: int | None = None) -> None:
        self.posts: list[tuple[int, list[bytes]]] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.changed = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.headers["Content-Type"] == "application/x-ndjson"
                first = int(self.headers["Proctor-Audit-First-Line"])
                with outer.changed:
                    outer.posts.append((first, body.splitlines()))
                    outer.changed.notify_all()
                if hold is not None and len(outer.posts) == hold:
                    outer.arrived.set()
                    outer.release.wait(120)
                    return  # never answered: the forwarder was killed waiting
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ingest"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class _Syslog:
    """A TCP syslog receiver reading RFC 6587 octet-counted frames: (line number, line)."""

    FRAME = re.compile(
        rb'<134>1 \S+ \S+ proctor - \S+ \[proctor@32473 line="(\d+)"( run="[^"]*")?\] '
        rb"\xef\xbb\xbf(.*)",
        re.S,
    )

    def __init__(self) -> None:
        self.messages: list[tuple[int, bytes]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"syslog+tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = threading.Semaphore(0)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
            while data:
                size, _, rest = data.partition(b" ")
                message, data = rest[: int(size)], rest[int(size) :]
                match = self.FRAME.fullmatch(message)
                assert match is not None, message[:200]
                self.messages.append((int(match.group(1)), match.group(3)))
            self.connections.release()  # a connection read to its end and parsed

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def http_hold_3() -> Iterator[_Http]:
    server = _Http(hold=3)
    yield server
    server.close()


def _exactly_once(numbered: list[tuple[int, bytes]]) -> list[bytes]:
    """What a receiver keeping the highest line number it stored holds; asserts that lines
    only ever go forward, or back to re-send a batch whose end it had not yet passed."""
    kept: list[bytes] = []
    for number, line in numbered:
        if number <= len(kept):
            assert kept[number - 1] == line  # a re-sent line is the same line
            continue
        assert number == len(kept) + 1, f"line {number} arrived before line {len(kept) + 1}"
        kept.append(line)
    return kept


def test_http_every_line_once_in_order_after_a_kill_while_waiting_for_the_answer(
    workspace: tuple[Path, dict[str, str]], http_hold_3: _Http
) -> None:
    root, env = workspace
    proc = _start(root, env, http_hold_3.url, "--once", "--batch-lines", "10")
    try:
        assert http_hold_3.arrived.wait(60), "the third batch never arrived"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    http_hold_3.release.set()
    again = _forward(root, env, http_hold_3.url, "--once", "--batch-lines", "10", "--json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc == {
        "schema": "proctor.audit_forward.v1",
        "destination": "http",
        "shipped": LINES - 20,
        "lines": LINES,
    }
    numbered = [
        (first + i, line) for first, lines in http_hold_3.posts for i, line in enumerate(lines)
    ]
    assert _exactly_once(numbered) == _log_lines(root)
    firsts = [first for first, _ in http_hold_3.posts]
    assert firsts == [1, 11, 21, 21, 31, 41, 51]  # only the unanswered batch came twice


def test_syslog_every_line_once_in_order_after_a_kill_between_send_and_cursor(
    workspace: tuple[Path, dict[str, str]],
) -> None:
    root, env = workspace
    receiver = _Syslog()
    try:
        hooks = {**env, "PROCTOR_TEST_HOOKS": "1", "PROCTOR_TEST_KILL_AT": "forward.sent:2"}
        killed = _forward(root, hooks, receiver.url, "--once", "--batch-lines", "10")
        assert killed.returncode == -signal.SIGKILL
        done = _forward(root, env, receiver.url, "--once", "--batch-lines", "10")
        assert done.returncode == 0
        # both connections are closed once their process exited: wait until both are parsed
        assert receiver.connections.acquire(timeout=60)
        assert receiver.connections.acquire(timeout=60)
        numbers = [n for n, _ in receiver.messages]
        assert numbers == [*range(1, 21), *range(11, 61)]
        assert _exactly_once(receiver.messages) == _log_lines(root)
    finally:
        receiver.close()


def test_the_cursor_survives_restarts_and_ships_only_new_lines(
    workspace: tuple[Path, dict[str, str]],
) -> None:
    root, env = workspace
    server = _Http()
    try:
        first = _forward(root, env, server.url, "--once", "--json")
        assert json.loads(first.stdout)["shipped"] == LINES
        second = _forward(root, env, server.url, "--once", "--json")
        assert json.loads(second.stdout)["shipped"] == 0
        _emit(root, 5)
        third = _forward(root, env, server.url, "--once", "--json")
        assert json.loads(third.stdout)["shipped"] == 5
        numbered = [(f + i, line) for f, lines in server.posts for i, line in enumerate(lines)]
        assert _exactly_once(numbered) == _log_lines(root)
        assert len(numbered) == LINES + 5  # no line twice without a kill
        cursor = next((root / ".proctor" / "forward").glob("*.json")).read_text()
        assert "127.0.0.1" not in cursor  # named by a digest: a URL may carry a token
    finally:
        server.close()


@pytest.mark.parametrize("damage", ["rewrite", "truncate"])
def test_a_log_changed_under_the_cursor_is_refused_and_nothing_is_sent(
    workspace: tuple[Path, dict[str, str]], damage: str
) -> None:
    root, env = workspace
    server = _Http()
    try:
        assert _forward(root, env, server.url, "--once").returncode == 0
        sent = len(server.posts)
        path = root / ".proctor" / "audit.jsonl"
        data = path.read_bytes()
        if damage == "rewrite":
            path.write_bytes(data.replace(b'"note":"n59"', b'"note":"nX9"'))
        else:
            path.write_bytes(b"\n".join(data.split(b"\n")[:30]) + b"\n")
        _emit(root, 3)
        r = _forward(root, env, server.url, "--once")
        assert r.returncode != 0
        assert "forward_log_rewritten" in r.stderr
        assert len(server.posts) == sent
    finally:
        server.close()


def test_bad_destinations_are_refused_with_a_code(workspace: tuple[Path, dict[str, str]]) -> None:
    root, env = workspace
    for bad in ["ftp://h/x", "syslog+tcp://h", "syslog+tcp://h:1/path", "http://", "x y"]:
        r = _forward(root, env, bad, "--once")
        assert r.returncode == 2
        assert "forward_destination_invalid" in r.stderr
    assert not (root / ".proctor" / "forward").exists()


def test_syslog_frame_counts_its_octets() -> None:
    line = json.dumps({"timestamp": "2026-01-01T00:00:00.000001+00:00", "event": "é"}).encode()
    frame = syslog_frame(line + b"\n", 7, "host")
    size, _, message = frame.partition(b" ")
    assert int(size) == len(message)
    assert message.endswith(b"\xef\xbb\xbf" + line)
    assert b'line="7"' in message


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parse_destination_refuses_anything_else_with_a_code(text: str) -> None:
    try:
        parsed = parse_destination(text)
    except UsageError as exc:
        assert exc.code == "forward_destination_invalid"
        return
    assert parsed.kind in ("syslog", "http") and parsed.host and 0 <= parsed.port <= 65535


def test_the_background_forwarder_of_worker_and_serve_ships_new_lines_until_stopped(
    tmp_path: Path,
) -> None:
    from proctor.runtime.records.forward import background_forwarder

    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    _emit(root, 5)
    log = root / ".proctor" / "audit.jsonl"
    assert background_forwarder(log, root / ".proctor", {}, report=print) is None  # off
    server = _Http()
    seen: list[tuple[int, list[bytes]]] = server.posts

    def count() -> int:
        return sum(len(lines) for _, lines in seen)

    reports: list[str] = []
    halt = background_forwarder(
        log,
        root / ".proctor",
        {"PROCTOR_AUDIT_FORWARD_TO": server.url},
        report=reports.append,
        poll_s=0.05,
    )
    assert halt is not None
    try:
        _emit(root, 7)  # written while the forwarder runs
        with server.changed:
            assert server.changed.wait_for(lambda: count() >= 12, timeout=60), count()
    finally:
        halt()
        server.close()
    numbered = [(f + i, line) for f, lines in seen for i, line in enumerate(lines)]
    assert _exactly_once(numbered) == _log_lines(root)
    assert reports == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_a_cursor_file_is_read_strictly(data: bytes) -> None:
    import tempfile

    from proctor.errors import StoreError
    from proctor.runtime.records.forward import Cursor, Forwarder, HttpSender

    with tempfile.TemporaryDirectory() as folder:
        destination = parse_destination("http://127.0.0.1:9/x")
        sender = HttpSender(destination.url)
        forwarder = Forwarder(Path(folder) / "audit.jsonl", Path(folder), destination, sender)
        forwarder.folder.mkdir()
        forwarder.path.write_bytes(data)
        try:
            cursor = forwarder.cursor()
        except StoreError as exc:
            assert exc.code == "forward_cursor_invalid"
        else:
            assert isinstance(cursor, Cursor) and cursor.lines >= 0 and cursor.offset >= 0
        finally:
            sender.close()

"""An upstream MCP server's message is read strictly: an answer with a key given twice (a
repeated ``isError`` or ``id``: two readers, two answers), ``NaN`` or nesting too deep is
refused ``mcp_upstream_malformed`` and nothing in it is used; a stray log line on stdout is
still skipped. Real processes and a real loopback HTTP server."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ToolFailed
from proctor.runtime.gateway.wire import HttpWire, StdioWire, _message

# A raw stdio server: answers initialize, then answers each tools/call with the line named by
# its tool ("stray" first prints a log line); every request it reads is appended to a file.
_SERVER = r"""
import json, sys
log = open(sys.argv[1], "a")
HEAD = '{"jsonrpc":"2.0","id":%d,"result":'
ANSWERS = {
    "dup_is_error": HEAD + '{"isError":true,"content":[],"isError":false}}',
    "dup_nested": HEAD + '{"content":[{"type":"text","text":"a","text":"b"}]}}',
    "nan": HEAD + '{"content":[],"score":NaN}}',
    "deep": HEAD + '{"x":' + "[" * 100 + "]" * 100 + "}}",
    "stray": 'a log line\n' + HEAD + '{"content":[]}}',
    "ask_dup": '{"jsonrpc":"2.0","id":"s1","method":"ping","method":"sampling/createMessage"}',
}
for line in sys.stdin:
    msg = json.loads(line)
    log.write(line); log.flush()
    if "id" not in msg or "method" not in msg:  # a notification, or an answer to it
        continue
    if msg["method"] == "initialize":
        out = '{"jsonrpc":"2.0","id":%d,"result":{"serverInfo":{"name":"raw"}}}' % msg["id"]
    else:
        name = msg["params"]["name"]
        out = ANSWERS[name] if name == "ask_dup" else ANSWERS[name] % msg["id"]
    sys.stdout.write(out + "\n"); sys.stdout.flush()
"""


@pytest.fixture
def stdio(tmp_path: Path) -> Iterator[tuple[StdioWire, Path]]:
    script = tmp_path / "server.py"
    script.write_text(_SERVER)
    seen = tmp_path / "seen.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(seen)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    wire = StdioWire("raw", proc, timeout=3)
    try:
        yield wire, seen
    finally:
        wire.close()


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("dup_is_error", "duplicate_key"),
        ("dup_nested", "duplicate_key"),
        ("nan", "not_json"),
        ("deep", "too_deep"),
    ],
)
def test_a_stdio_answer_two_readers_read_two_ways_is_refused(
    stdio: tuple[StdioWire, Path], tool: str, why: str
) -> None:
    wire, _ = stdio
    with pytest.raises(ToolFailed) as caught:
        wire.call_tool(tool, {})
    assert caught.value.code == "mcp_upstream_malformed"
    assert f"({why}:" in str(caught.value) and "Traceback" not in str(caught.value)


def test_a_stray_log_line_is_still_skipped(stdio: tuple[StdioWire, Path]) -> None:
    wire, _ = stdio
    assert wire.call_tool("stray", {}) == {"content": []}


def test_a_server_request_with_a_key_twice_is_not_answered(
    stdio: tuple[StdioWire, Path],
) -> None:
    wire, seen = stdio
    with pytest.raises(ToolFailed) as caught:
        wire.call_tool("ask_dup", {})
    assert caught.value.code == "mcp_upstream_malformed"
    # the server's request ("ping" to one reader, a sampling request to another) got no answer
    wire.close()
    assert all('"s1"' not in line for line in seen.read_text().splitlines())


class _Answer(BaseHTTPRequestHandler):
    body = b""
    kind = "application/json"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("content-type", self.kind)
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("kind", ["application/json", "text/event-stream"])
def test_an_http_answer_with_a_key_twice_is_refused(kind: str) -> None:
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"isError":true,"isError":false}}'
    handler = type("H", (_Answer,), {"kind": kind})
    handler.body = answer if kind == "application/json" else b"data: " + answer + b"\n\n"
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    wire = HttpWire(
        "raw", f"http://127.0.0.1:{server.server_address[1]}/", httpx.Client(), {}, timeout=5
    )
    try:
        with pytest.raises(ToolFailed) as caught:
            wire.request("initialize", {})
        assert caught.value.code == "mcp_upstream_malformed"
    finally:
        wire.client.close()
        server.shutdown()
        server.server_close()


_values: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | _values.map(lambda v: __import__("json").dumps(v).encode()))
def test_any_upstream_bytes_give_a_message_none_or_a_coded_refusal(data: bytes) -> None:
    try:
        got = _message("raw", data)
    except ToolFailed as exc:
        assert exc.code == "mcp_upstream_malformed"
        return
    if got is not None:  # what is taken reads one way: encoding it again gives no NaN
        __import__("json").dumps(got, allow_nan=False)

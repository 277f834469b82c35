"""proctor's stdio transport against a real ``proctor mcp`` subprocess: every malformed line is
answered with a JSON-RPC error (or ends the session cleanly at end of input), audited, and the
server reads on; never a traceback. Beside it, the transport's parts in process: long lines are
refused without being held, and a write the pipe cannot take at once is finished whole, in order.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading

import anyio
import pytest
from mcp.shared.message import SessionMessage

from proctor.mcp.frames import MAX_LINE, answered, read_line
from proctor.mcp.pipes import LoopLines, LoopWriter
from proctor.mcp.wire import StdioWriteStream
from tests.mcp.conftest import Ws
from tests.mcp.test_frames import INITIALIZE, _Lines, _send, _stdio
from tests.mcp.test_pipes import _pipe, drained

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

PING = {"jsonrpc": "2.0", "id": 20, "method": "ping"}


def _server(ws: Ws) -> subprocess.Popen[str]:
    ws.add_example("hello-world")
    return _stdio(ws, stderr=subprocess.PIPE)


def _initialized(ws: Ws) -> tuple[subprocess.Popen[str], _Lines]:
    """A server past its handshake, and the reader of its replies."""
    proc = _server(ws)
    try:
        lines = _Lines(proc)
        _send(proc, INITIALIZE)
        assert "result" in lines.reply_to(1)
    except BaseException:
        proc.kill()
        raise
    return proc, lines


def _end(proc: subprocess.Popen[str]) -> str:
    assert proc.stdin is not None and proc.stderr is not None
    if not proc.stdin.closed:
        proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    return proc.stderr.read()


def test_malformed_lines_are_answered_audited_and_the_server_reads_on(ws: Ws) -> None:
    proc, lines = _initialized(ws)
    try:
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        answers = {}
        for name, line in [
            ("not_json", '{"jsonrpc": "2.0", "id": 2, "method"'),
            ("array", "[1, 2, 3]"),
            ("number", "42"),
            ("no_jsonrpc", '{"id": 3, "method": "ping"}'),
        ]:
            _send(proc, line)
            answers[name] = lines.next()
        _send(proc, "")  # a blank line is skipped, not answered
        _send(proc, PING)
        pong = lines.reply_to(20)
    finally:
        stderr = _end(proc)
    assert answers["not_json"]["id"] is None
    assert answers["not_json"]["error"]["code"] == -32700
    assert answers["not_json"]["error"]["data"] == {"code": "not_json"}
    for name in ("array", "number"):
        assert answers[name]["id"] is None
        assert answers[name]["error"]["code"] == -32600
        assert answers[name]["error"]["data"] == {"code": "invalid_request"}
    assert answers["no_jsonrpc"]["id"] == 3  # the client can match it to its request
    assert answers["no_jsonrpc"]["error"]["code"] == -32600
    assert pong["result"] == {}
    assert "Traceback" not in stderr
    codes = [e["code"] for e in ws.audit() if e["event"] == "mcp_frame_refused"]
    assert codes == ["not_json", "invalid_request", "invalid_request", "invalid_request"]


def test_an_oversized_line_is_refused_without_the_server_holding_it(ws: Ws) -> None:
    proc, lines = _initialized(ws)
    try:
        big = '{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"x": "'
        _send(proc, big + "a" * MAX_LINE + '"}}')
        refused = lines.next()
        _send(proc, PING)
        pong = lines.reply_to(20)
    finally:
        stderr = _end(proc)
    assert refused["error"]["code"] == -32600
    assert refused["error"]["data"] == {"code": "frame_too_large"}
    assert pong["result"] == {}
    assert "Traceback" not in stderr


def test_end_of_input_mid_line_answers_the_fragment_and_ends_cleanly(ws: Ws) -> None:
    proc, lines = _initialized(ws)
    try:
        assert proc.stdin is not None
        proc.stdin.write('{"jsonrpc": "2.0", "id": 5, "method": "pi')
        proc.stdin.close()
        fragment = lines.next()
    finally:
        stderr = _end(proc)
    assert fragment["error"]["code"] == -32700
    assert "Traceback" not in stderr


def test_end_of_input_before_any_message_ends_cleanly(ws: Ws) -> None:
    proc = _server(ws)
    assert "Traceback" not in _end(proc)


def test_a_long_line_is_replaced_by_none_and_skipped_to_its_newline() -> None:
    read_end, write_end = _pipe()
    os.write(write_end, b'{"a": 1}\n' + b"x" * 5000 + b'\n{"b": 2}\n' + b"y" * 30)
    os.close(write_end)

    async def go() -> list[str | None]:
        with anyio.fail_after(10):
            return [line async for line in LoopLines(read_end, max_line=20)]

    try:
        assert anyio.run(go) == ['{"a": 1}\n', None, '{"b": 2}\n', None]
    finally:
        os.close(read_end)


def test_read_line_parses_as_the_sdk_does_and_skips_blank_lines() -> None:
    message = read_line('{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
    assert isinstance(message, SessionMessage)
    assert message.message.model_dump(by_alias=True, exclude_unset=True)["method"] == "ping"
    assert read_line("\n") is None
    assert read_line(None) == read_line("x" * (MAX_LINE + 1))


@pytest.mark.parametrize("request_id", ["null", "true", "1.5", "1.0", "[1]", '{"a": 1}'])
def test_a_request_whose_id_is_not_a_string_or_an_integer_is_answered(request_id: str) -> None:
    # the SDK reads it as a notification, which nobody answers: the client would wait for ever
    line = '{"jsonrpc": "2.0", "id": ' + request_id + ', "method": "tools/call", "params": {}}\n'
    refused = read_line(line)
    assert isinstance(refused, dict) and answered(refused)
    assert refused["id"] is None and refused["error"]["code"] == -32600
    assert refused["error"]["data"] == {"code": "invalid_request"}
    assert isinstance(read_line('{"jsonrpc": "2.0", "method": "ping"}\n'), SessionMessage)
    assert isinstance(read_line('{"jsonrpc": "2.0", "id": -7, "method": "ping"}\n'), SessionMessage)


def test_writes_the_pipe_cannot_take_at_once_are_finished_whole_and_in_order() -> None:
    import mcp_types as types

    started = threading.Event()

    def note(n: int, text: str) -> SessionMessage:
        doc = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": n, "t": text}}
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(doc))

    async def go(write_end: int) -> None:
        stream = StdioWriteStream(LoopWriter(write_end))
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(stream.drain)
                async with anyio.create_task_group() as senders:
                    senders.start_soon(stream.send, note(1, "x" * (1 << 20)))  # past the pipe
                    await anyio.sleep(0)
                    senders.start_soon(stream.send, note(2, "small"))
                    await anyio.sleep(0)
                    started.set()
                await stream.aclose()

    received = drained(go, start=started)  # the reader starts once both sends are under way
    sent = [json.loads(line) for line in received.decode().splitlines()]
    assert [m["params"]["n"] for m in sent] == [1, 2]
    assert len(sent[0]["params"]["t"]) == 1 << 20

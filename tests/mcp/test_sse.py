"""The event stream MCP over HTTP answers with (:mod:`proctor.mcp.sse`), as an ASGI app
driven directly: events framed as sse_starlette framed them, the SDK's writer beside the
stream, a client's disconnect ending both, the server's shutdown ending the body properly, a
ping while a stream stays open, HEAD without a body.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from proctor.mcp import sse
from proctor.mcp.sse import EventStream, close_all

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

HEADERS = {"Cache-Control": "no-cache, no-transform", "Content-Type": "text/event-stream",
           "mcp-session-id": "abc"}  # fmt: skip


class Client:
    """The ASGI side of one request: what was sent, and a disconnect when told."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = anyio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    @property
    def ended(self) -> bool:
        return self.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def _run(test: Any) -> None:
    anyio.run(test)


def test_events_are_framed_and_the_body_ends_when_the_writer_is_done() -> None:
    async def test() -> None:
        writer, reader = anyio.create_memory_object_stream[dict[str, Any]](0)

        async def sender() -> None:
            async with writer:
                await writer.send({"event": "message", "data": '{"id": 1}'})
                await writer.send({"id": "7", "data": ""})

        client = Client()
        response = EventStream(content=reader, data_sender_callable=sender, headers=HEADERS)
        with anyio.fail_after(5):
            await response({"type": "http", "method": "POST"}, client.receive, client.send)
        start = client.sent[0]
        assert start["status"] == 200
        assert start["headers"] == [
            (b"cache-control", b"no-cache, no-transform"),
            (b"content-type", b"text/event-stream"),
            (b"mcp-session-id", b"abc"),
            (b"connection", b"keep-alive"),
            (b"x-accel-buffering", b"no"),
        ]
        assert client.body == b'event: message\r\ndata: {"id": 1}\r\n\r\nid: 7\r\ndata: \r\n\r\n'
        assert client.ended

    _run(test)


def test_a_client_that_goes_cancels_the_writer_and_ends_the_response() -> None:
    async def test() -> None:
        writer, reader = anyio.create_memory_object_stream[dict[str, Any]](0)
        cancelled = anyio.Event()

        async def sender() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.set()

        client = Client()
        response = EventStream(content=reader, data_sender_callable=sender, headers=HEADERS)
        async with anyio.create_task_group() as group:
            group.start_soon(response, {"type": "http", "method": "POST"}, client.receive,
                             client.send)  # fmt: skip
            await anyio.sleep(0.05)
            client.gone.set()
            with anyio.fail_after(5):
                await cancelled.wait()
        assert not client.ended  # nothing more is written to a client that went away
        writer.close()

    _run(test)


def test_the_servers_shutdown_ends_an_open_stream_with_the_end_of_the_body() -> None:
    async def test() -> None:
        writer, reader = anyio.create_memory_object_stream[dict[str, Any]](0)
        client = Client()
        response = EventStream(content=reader, headers=HEADERS)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(response, {"type": "http", "method": "GET"}, client.receive,
                                 client.send)  # fmt: skip
                await anyio.sleep(0.05)
                close_all()
        assert client.ended
        writer.close()

    _run(test)


def test_an_open_stream_pings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "PING_SECONDS", 0.05)

    async def test() -> None:
        writer, reader = anyio.create_memory_object_stream[dict[str, Any]](0)
        client = Client()
        response = EventStream(content=reader, headers=HEADERS)
        async with anyio.create_task_group() as group:
            group.start_soon(response, {"type": "http", "method": "GET"}, client.receive,
                             client.send)  # fmt: skip
            await anyio.sleep(0.3)
            writer.close()
        assert client.body.startswith(b": ping - ")
        assert client.ended

    _run(test)


def test_head_gets_the_headers_and_no_body() -> None:
    async def test() -> None:
        writer, reader = anyio.create_memory_object_stream[dict[str, Any]](0)
        client = Client()
        await EventStream(content=reader, headers=HEADERS)(
            {"type": "http", "method": "HEAD"}, client.receive, client.send
        )
        assert client.sent[0]["status"] == 200
        assert client.body == b"" and client.ended
        writer.close()
        reader.close()

    _run(test)


def test_the_sdk_transport_answers_with_it_once_installed() -> None:
    import mcp.server.streamable_http as transport

    sse.install()
    assert transport.EventSourceResponse is EventStream

"""proctor's stdio transport: the SDK server's read and write streams over the claimed ends.

The SDK's ``stdio_server`` runs a reader task and a writer task and hands each message to the
server through a memory stream (the server's loop relays what it reads through one more). Here
the server's read stream reads and parses the next line itself when the server asks for a
message, and its write stream writes a message to the pipe when the server sends it: a call
crosses two task hops fewer. The SDK stays the protocol engine: it receives the same
``SessionMessage`` its own transport makes (``jsonrpc_message_adapter`` of the line: of the
document the strict reader read, :func:`~proctor.mcp.frames.read_line`) and its messages are
written as its transport writes them (``model_dump_json`` by alias, unset fields left out, one
line each).

Every line is read by :func:`proctor.mcp.frames.read_line` first: a line it refuses (too long,
a repeated key, too deep, not JSON, not a JSON-RPC message) never reaches the SDK; it is
audited (``mcp_frame_refused``) and answered with a JSON-RPC error, and the server reads on.
End of input, a last line without its newline included, ends the session cleanly.

Writes never tear a frame: a message the pipe takes whole is written at once (the usual case);
otherwise it, and every message after it until the backlog is gone, goes to the one writer
task, which writes each whole and in order even when the request that sent it is cancelled.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from proctor.mcp.frames import MAX_LINE, answered, audit_refusal, read_line

if TYPE_CHECKING:
    from mcp.server import Server

    from proctor.mcp.pipes import LoopWriter, ThreadedWriter

__all__ = ["StdioReadStream", "StdioWriteStream", "serve_stdio"]

Audit = Callable[..., None]


class StdioWriteStream:
    """The server's write stream: each message one line on the output, whole and in order.

    Raises (from :meth:`send`): ``anyio.ClosedResourceError`` once closed,
    ``anyio.BrokenResourceError`` once the output failed (the client is gone).
    """

    def __init__(self, writer: LoopWriter | ThreadedWriter) -> None:
        self._writer = writer
        self._fd = writer.fd
        queue = anyio.create_memory_object_stream[tuple[str | bytes, anyio.Event]](math.inf)
        self._queue, self._queued = queue
        self._backlog = 0
        self._closed = False
        self._broken = False

    async def send(self, item: SessionMessage, /) -> None:
        """Write ``item``'s message; wait while the writer task works through a backlog."""
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        data: str | bytes = text
        if self._fd is not None and not self._backlog:
            data = text.encode("utf-8")
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                written = 0
            except OSError:
                self._broken = True
                raise anyio.BrokenResourceError from None
            if written == len(data):
                return
            data = data[written:]
        done = anyio.Event()
        self._backlog += 1
        self._queue.send_nowait((data, done))
        # Cancelled here, the message is still written whole: the writer task owns it now.
        await done.wait()

    async def drain(self) -> None:
        """The writer task: write what :meth:`send` queued, each whole, until closed."""
        async with self._queued:
            async for data, done in self._queued:
                try:
                    if not self._broken:
                        await self._writer.write(data)
                except OSError:  # the client is gone: later sends are refused
                    self._broken = True
                finally:
                    self._backlog -= 1
                    done.set()

    async def aclose(self) -> None:
        """No more sends; the writer task ends once it has written what was queued."""
        self._closed = True
        self._queue.close()

    async def __aenter__(self) -> StdioWriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class StdioReadStream:
    """The server's read stream: the next message of the input, read and parsed when asked
    for; refused lines are audited and answered on ``answers`` and skipped."""

    def __init__(self, lines: Any, answers: StdioWriteStream, audit: Audit) -> None:
        self._next = lines.__aiter__().__anext__
        self._answers = answers
        self._audit = audit
        self._closed = False

    async def receive(self) -> SessionMessage:
        """The next message.

        Raises:
            anyio.EndOfStream: the input ended.
            anyio.ClosedResourceError: this stream was closed.
        """
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                line = await self._next()
            except StopAsyncIteration:
                raise anyio.EndOfStream from None
            read = read_line(line)
            if isinstance(read, SessionMessage):
                return read
            if read is not None:
                await self._refuse(read)

    async def _refuse(self, error: dict[str, Any]) -> None:
        # In the loop: one local append costs less than a thread hop (as for mcp_request).
        audit_refusal(self._audit, error, "stdio")
        if not answered(error):
            return
        message = types.jsonrpc_message_adapter.validate_python(error, by_name=False)
        # nobody reads the answers any more: the input decides when to end
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._answers.send(SessionMessage(message))

    def __aiter__(self) -> StdioReadStream:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Read no more."""
        self._closed = True

    async def __aenter__(self) -> StdioReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def serve_stdio(server: Server[Any], audit: Audit) -> None:
    """Serve ``server`` over the process's claimed stdin and stdout until the input ends."""
    from proctor.mcp.pipes import claim_stdio

    with claim_stdio(max_line=MAX_LINE) as ends:
        write_stream = StdioWriteStream(ends.writer)
        read_stream = StdioReadStream(ends.lines, write_stream, audit)
        async with anyio.create_task_group() as group:
            group.start_soon(write_stream.drain)
            try:
                await server.run(read_stream, write_stream, server.create_initialization_options())
            finally:
                await write_stream.aclose()

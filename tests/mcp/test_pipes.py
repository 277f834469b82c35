"""The loop-served stdio ends read and write what the SDK's threaded file wrapper would."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest

from proctor.mcp.pipes import LoopLines, LoopWriter

RAW = [
    b'{"a": 1}\n',
    b'{"b": "\xc3',  # a character split across two reads
    b'\xa9"}\r\n{"c": 3}\r',
    b'{"d": "\xff bad byte"}\n',
    b'\n{"e": "last line, no newline"}',
]


def _pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    return read_end, write_end


def test_lines_decode_as_text_io_wrapper_reads_them() -> None:
    expected = list(io.TextIOWrapper(io.BytesIO(b"".join(RAW)), encoding="utf-8", errors="replace"))
    read_end, write_end = _pipe()

    async def go() -> list[str]:
        seen: list[str] = []

        async def feed() -> None:
            for chunk in RAW:
                os.write(write_end, chunk)
                await anyio.lowlevel.checkpoint()
            os.close(write_end)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(feed)
                async for line in LoopLines(read_end):
                    seen.append(line)
        return seen

    try:
        assert anyio.run(go) == expected
    finally:
        os.close(read_end)


def drained(
    write: Callable[[int], Awaitable[None]], *, start: threading.Event | None = None
) -> bytes:
    """What ``write(fd)`` wrote into a non-blocking pipe whose other end a thread reads (once
    ``start`` is set, when one is given); both ends are closed afterwards."""
    read_end, write_end = _pipe()
    received = bytearray()

    def drain() -> None:
        os.set_blocking(read_end, True)
        if start is not None:
            start.wait(30)
        while chunk := os.read(read_end, 1 << 16):
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        anyio.run(write, write_end)
    finally:
        os.close(write_end)
        reader.join(timeout=30)
        os.close(read_end)
    return bytes(received)


def test_a_message_larger_than_the_pipe_is_written_whole_while_the_reader_drains() -> None:
    message = "x" * (1 << 20) + "é\n"  # far past a pipe's 64 KiB

    async def go(write_end: int) -> None:
        writer = LoopWriter(write_end)
        with anyio.fail_after(30):
            await writer.write(message)
            await writer.flush()

    assert drained(go) == message.encode("utf-8")


def test_text_that_is_not_utf8_is_refused_as_the_wrapper_refuses_it() -> None:
    read_end, write_end = _pipe()
    try:
        with pytest.raises(UnicodeEncodeError):
            anyio.run(LoopWriter(write_end).write, "\ud800\n")
    finally:
        os.close(read_end)
        os.close(write_end)

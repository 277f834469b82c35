"""The loop-served stdio ends read and write what the SDK's threaded file wrapper would."""

from __future__ import annotations

import asyncio
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


def test_the_input_stays_watched_between_lines_and_unread_input_ends_the_watch() -> None:
    """A client's next message is awaited once per call: the descriptor is watched once for
    all of them, not added to and removed from the loop's selector per line; input that
    nobody reads stops being watched rather than waking the loop on every pass."""
    read_end, write_end = _pipe()

    async def go() -> tuple[list[str | None], int, bool]:
        loop = asyncio.get_running_loop()
        added = [0]
        add_reader = loop.add_reader

        def counting(fd: int, callback: Callable[[], object]) -> None:
            added[0] += 1
            add_reader(fd, callback)

        loop.add_reader = counting  # type: ignore[method-assign,assignment]
        lines = LoopLines(read_end)
        seen: list[str | None] = []
        with anyio.fail_after(10):
            for n in range(5):  # as a client does: the next line once the last is answered
                await anyio.sleep(0.01)
                os.write(write_end, f'{{"n": {n}}}\n'.encode())
                seen.append(await lines.__anext__())
            os.write(write_end, b'{"unread": true}\n')  # nobody reads this one
            for _ in range(5):
                await anyio.sleep(0)
            still_watched = read_end in loop._selector.get_map()  # type: ignore[attr-defined]
            lines.close()
        return seen, added[0], still_watched

    try:
        seen, added, still_watched = anyio.run(go)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert seen == [f'{{"n": {n}}}\n' for n in range(5)]
    assert added == 1
    assert not still_watched


def test_a_line_read_for_a_reader_cancelled_before_it_ran_is_kept() -> None:
    """The loop's readiness callback reads the chunk; a reader cancelled between that read and
    its own next step leaves the chunk to the next reader, not lost."""
    read_end, write_end = _pipe()

    async def go() -> tuple[bool, str | None]:
        lines = LoopLines(read_end)
        reading = asyncio.ensure_future(lines.__anext__())
        ready = lines._ready

        def then_cancel() -> None:
            ready()
            reading.cancel()

        lines._ready = then_cancel  # type: ignore[method-assign]
        with anyio.fail_after(10):
            await anyio.sleep(0.01)  # the reader waits on the watched descriptor
            os.write(write_end, b'{"kept": true}\n')
            try:
                await reading
            except asyncio.CancelledError:
                cancelled = True
            else:
                cancelled = False
            line = await lines.__anext__()
        lines.close()
        return cancelled, line

    try:
        assert anyio.run(go) == (True, '{"kept": true}\n')
    finally:
        os.close(read_end)
        os.close(write_end)

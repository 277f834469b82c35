"""The stdio transport's two ends, read and written from the event loop.

The SDK's own stdio ends go through ``anyio.wrap_file``: every line read is a hop to a worker
thread and back, and every message written is two (``write``, then ``flush``). On a loaded
machine each hop waits for a thread to be scheduled, and a call pays three of them beside the
one that drives its run. When the protocol streams are pipes or sockets, :func:`claim_stdio`
serves them from the loop instead: the descriptors are made non-blocking and each read or write
waits on the loop's readiness (``anyio.wait_readable`` / ``wait_writable``) only when it would
block. What the SDK receives is the same: text lines decoded as UTF-8 with replacement and
universal newlines (exactly ``TextIOWrapper``'s reading), and each message written whole, in
order, by the transport's one writer task.

While serving, fd 0 reads the null device and fd 1 writes to stderr (the SDK's own claim does
the same), so no handler or child process can read or write the protocol streams. Anything
that is not a pipe or a socket (a terminal, a file), or an end that shares its file with
stderr (making it non-blocking would make stderr so too), is served as before, through the
SDK's threaded file wrapper.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import anyio

from proctor.contracts.values import dataclass

__all__ = ["LoopLines", "LoopWriter", "StdioEnds", "claim_stdio"]

_CHUNK = 64 * 1024


class LoopLines:
    """The text lines of a non-blocking descriptor, read on the event loop.

    Decoding matches ``TextIOWrapper(stream, encoding="utf-8", errors="replace")`` iterated
    line by line: invalid bytes become U+FFFD, ``\\r\\n`` and a lone ``\\r`` end a line as
    ``\\n``, and a last line without a newline is yielded at end of file.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        decoder = io.IncrementalNewlineDecoder(
            codecs.getincrementaldecoder("utf-8")(errors="replace"), translate=True
        )
        pending = ""
        while True:
            try:
                chunk = os.read(self._fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            pending += decoder.decode(chunk, final=not chunk)
            start = 0
            while (end := pending.find("\n", start)) != -1:
                yield pending[start : end + 1]
                start = end + 1
            pending = pending[start:]
            if not chunk:
                if pending:
                    yield pending
                return


class LoopWriter:
    """Whole messages written to a non-blocking descriptor from the event loop.

    The SDK's transport calls ``write`` then ``flush`` from its single writer task; nothing is
    buffered here, so ``flush`` has nothing to do. Text is encoded as strict UTF-8, as the
    wrapper it replaces encodes it.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, text: str) -> None:
        """Write all of ``text``; wait on the loop whenever the pipe is full."""
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            data = data[written:]

    async def flush(self) -> None:
        """Nothing is buffered: every ``write`` has reached the descriptor when it returns."""


@dataclass(frozen=True)
class StdioEnds:
    """The protocol's ends while served.

    Attributes:
        lines: the input's text lines (an async iterable of ``str``).
        writer: the output end for the SDK's ``stdio_server(stdout=...)``, or ``None`` when the
            SDK claims and writes stdout itself (not a pipe or socket).
    """

    lines: Any
    writer: LoopWriter | None


def _loop_served(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _same_file(a: int, b: int) -> bool:
    try:
        first, second = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


@contextmanager
def _claimed(fd: int, diversion: int, *, close: bool = True) -> Iterator[int]:
    """A private, close-on-exec duplicate of ``fd``, with ``fd`` pointed at ``diversion`` (which
    is closed) until the block ends; then ``fd`` is the wire again and the duplicate is closed
    (``close``) or left open for a worker thread that may still block on it."""
    import fcntl

    try:
        private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        os.close(diversion)
        raise
    try:
        os.dup2(diversion, fd)
    finally:
        os.close(diversion)
    try:
        yield private
    finally:
        os.dup2(private, fd)
        if close:
            os.close(private)


@contextmanager
def _non_blocking(fd: int) -> Iterator[None]:
    was = os.get_blocking(fd)
    os.set_blocking(fd, False)
    try:
        yield
    finally:
        # the file description may outlive this process (a parent's terminal or pipe)
        os.set_blocking(fd, was)


@contextmanager
def claim_stdio() -> Iterator[StdioEnds]:
    """Claim the process's standard input and output for the protocol (see the module).

    Falls back to ``sys.stdin.buffer`` read through the SDK's threaded wrapper, in place, when
    fd 0 cannot be duplicated.
    """
    with ExitStack() as stack:
        # non-blocking is a property of the open file: never set on one stderr shares
        loop_in = _loop_served(0) and not _same_file(0, 2)
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            stdin = stack.enter_context(_claimed(0, null, close=loop_in))
        except OSError:
            yield StdioEnds(lines=_threaded_lines(sys.stdin.buffer), writer=None)
            return
        if loop_in:
            stack.enter_context(_non_blocking(stdin))
            lines: Any = LoopLines(stdin)
        else:
            # closefd=False: a worker thread may still block on it after serving ends
            lines = _threaded_lines(os.fdopen(stdin, "rb", closefd=False))
        writer = None
        if _loop_served(1) and not _same_file(1, 2):
            try:
                stdout = stack.enter_context(_claimed(1, os.dup(2)))
            except OSError:
                stdout = None
            if stdout is not None:
                stack.enter_context(_non_blocking(stdout))
                writer = LoopWriter(stdout)
        yield StdioEnds(lines=lines, writer=writer)


def _threaded_lines(stream: Any) -> Any:
    return anyio.wrap_file(io.TextIOWrapper(stream, encoding="utf-8", errors="replace"))

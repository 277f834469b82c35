"""The stdio transport's two ends, read and written from the event loop.

The SDK's own stdio ends go through ``anyio.wrap_file``: every line read is a hop to a worker
thread and back, and every message written is two (``write``, then ``flush``). On a loaded
machine each hop waits for a thread to be scheduled, and a call pays three of them beside the
one that drives its run. When the protocol streams are pipes or sockets, :func:`claim_stdio`
serves them from the loop instead: the descriptors are made non-blocking and each read or write
waits on the loop's readiness (``anyio.wait_readable`` / ``wait_writable``) only when it would
block. The lines are those the SDK's wrapper reads: text decoded as UTF-8 with replacement
and universal newlines (exactly ``TextIOWrapper``'s reading); the transport that serves them
is :mod:`proctor.mcp.wire`.

While serving, fd 0 reads the null device and fd 1 writes to stderr (the SDK's own claim does
the same), so no handler or child process can read or write the protocol streams. Anything
that is not a pipe or a socket (a terminal, a file), or an end that shares its file with
stderr (making it non-blocking would make stderr so too), is read or written as the SDK does
it, through a worker thread (:class:`ThreadedWriter`).
"""

from __future__ import annotations

import asyncio
import codecs
import io
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import anyio

from proctor.contracts.values import dataclass

__all__ = ["LoopLines", "LoopWriter", "StdioEnds", "ThreadedWriter", "claim_stdio"]

_CHUNK = 64 * 1024


class LoopLines:
    """The text lines of a non-blocking descriptor, read on the event loop.

    Decoding matches ``TextIOWrapper(stream, encoding="utf-8", errors="replace")`` iterated
    line by line: invalid bytes become U+FFFD, ``\\r\\n`` and a lone ``\\r`` end a line as
    ``\\n``, and a last line without a newline is yielded at end of file.

    With ``max_line``, a line longer than that many characters is never held whole: ``None``
    takes its place and the rest of it is skipped up to its newline.
    """

    def __init__(self, fd: int, *, max_line: int | None = None) -> None:
        self._fd = fd
        self._max = max_line
        self._decoder = io.IncrementalNewlineDecoder(
            codecs.getincrementaldecoder("utf-8")(errors="replace"), translate=True
        )
        self._pending = ""
        self._start = 0
        self._skipping = False  # inside a line already refused as too long
        self._eof = False
        self._unread = True  # input may be waiting: read before waiting for readiness
        self._loop: asyncio.AbstractEventLoop | None = None  # watching the descriptor
        self._waiter: asyncio.Future[bytes] | None = None
        self._idle = False  # a readiness came with nobody waiting

    def __aiter__(self) -> LoopLines:
        return self

    async def __anext__(self) -> str | None:
        while True:
            end = self._pending.find("\n", self._start)
            if end != -1:
                line = self._pending[self._start : end + 1]
                self._start = end + 1
                if self._skipping:
                    self._skipping = False
                    continue
                if self._max is not None and len(line) > self._max:
                    return None
                return line
            if self._start:
                self._pending, self._start = self._pending[self._start :], 0
            if self._max is not None and len(self._pending) > self._max:
                refused, self._pending = not self._skipping, ""
                self._skipping = True
                if refused:
                    return None
            if self._eof:
                line, self._pending = self._pending, ""
                if line and not self._skipping:
                    return line
                raise StopAsyncIteration
            if self._unread:
                try:
                    chunk = os.read(self._fd, _CHUNK)
                except BlockingIOError:
                    self._unread = False
                    continue
                except ConnectionResetError:  # a socket's peer went away: the input has ended
                    chunk = b""
            else:
                read = await self._readable()
                if read is None:  # readable (perhaps): read it here
                    self._unread = True
                    continue
                chunk = read
            self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        # a short read took all there was: the next read waits for readiness first
        self._unread = len(chunk) == _CHUNK
        self._pending += self._decoder.decode(chunk, final=not chunk)
        self._eof = not chunk
        if self._eof:
            self.close()

    async def _readable(self) -> bytes | None:
        """The next chunk of input, read as soon as the descriptor is readable; ``None``: it is
        readable now (perhaps spuriously), for the caller to read.

        On asyncio the descriptor stays watched between lines and the loop's readiness
        callback reads the chunk itself (a client's next message is awaited once per call: a
        watch added and removed for each cost two ``epoll_ctl`` and a failed read, and input
        left in the pipe until the reader ran would be reported ready once more). A second
        readiness in a row that no reader waits for ends the watch, so input left unread does
        not wake the loop on every pass. Elsewhere, ``anyio.wait_readable``.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another backend (trio)
            await anyio.wait_readable(self._fd)
            return None
        if self._loop is not loop:
            self.close()
            try:
                loop.add_reader(self._fd, self._ready)
            except NotImplementedError:  # a loop without readers (Windows' proactor)
                await anyio.wait_readable(self._fd)
                return None
            self._loop = loop
        self._idle = False
        waiter: asyncio.Future[bytes] = loop.create_future()
        self._waiter = waiter
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._take(waiter.result())  # read for a reader cancelled since: kept
            raise
        finally:
            self._waiter = None

    def _ready(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            if self._idle:  # readable twice with nobody waiting: watched again when one does
                self.close()
            else:
                self._idle = True
            return
        try:
            chunk = os.read(self._fd, _CHUNK)
        except BlockingIOError:
            return  # not readable after all: the watch goes on
        except ConnectionResetError:  # a socket's peer went away: the input has ended
            chunk = b""
        except OSError as exc:  # raised to the reader, as its own read would have
            waiter.set_exception(exc)
            return
        waiter.set_result(chunk)

    def close(self) -> None:
        """Stop watching the descriptor (called at the end of input; the owner calls it when
        it stops reading, before the descriptor is closed)."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)


class LoopWriter:
    """Whole messages written to a non-blocking descriptor from the event loop.

    The SDK's transport calls ``write`` then ``flush`` from its single writer task; nothing is
    buffered here, so ``flush`` has nothing to do. Text is encoded as strict UTF-8, as the
    wrapper it replaces encodes it.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str | bytes) -> None:
        """Write all of ``text`` (bytes as they are); wait on the loop whenever the pipe is
        full."""
        data = memoryview(text.encode("utf-8") if isinstance(text, str) else text)
        while data:
            try:
                written = os.write(self.fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            data = data[written:]

    async def flush(self) -> None:
        """Nothing is buffered: every ``write`` has reached the descriptor when it returns."""


class ThreadedWriter:
    """Whole messages written through a worker thread (a terminal, a file): what the SDK's own
    stdio transport does for every output."""

    fd = None

    def __init__(self, stream: Any) -> None:
        self._file = anyio.wrap_file(io.TextIOWrapper(stream, encoding="utf-8"))

    async def write(self, text: str | bytes) -> None:
        """Write all of ``text`` and flush it."""
        await self._file.write(text if isinstance(text, str) else text.decode("utf-8"))
        await self._file.flush()

    async def flush(self) -> None:
        """Every ``write`` flushes."""


@dataclass(frozen=True)
class StdioEnds:
    """The protocol's ends while served.

    Attributes:
        lines: the input's text lines (an async iterable of ``str``, ``None`` in place of a
            line longer than ``max_line``).
        writer: the output end (``writer.fd`` is the descriptor when it is loop-served).
    """

    lines: Any
    writer: LoopWriter | ThreadedWriter


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
def claim_stdio(*, max_line: int | None = None) -> Iterator[StdioEnds]:
    """Claim the process's standard input and output for the protocol (see the module).

    Falls back to ``sys.stdin.buffer`` and ``sys.stdout.buffer``, in place and through a
    worker thread, when fd 0 or fd 1 cannot be duplicated.
    """
    with ExitStack() as stack:
        # non-blocking is a property of the open file: never set on one stderr shares
        loop_in = _loop_served(0) and not _same_file(0, 2)
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            stdin = stack.enter_context(_claimed(0, null, close=loop_in))
        except OSError:
            yield StdioEnds(
                lines=_threaded_lines(sys.stdin.buffer), writer=ThreadedWriter(sys.stdout.buffer)
            )
            return
        if loop_in:
            stack.enter_context(_non_blocking(stdin))
            lines: Any = LoopLines(stdin, max_line=max_line)
            stack.callback(lines.close)  # before the descriptor is closed
        else:
            # closefd=False: a worker thread may still block on it after serving ends
            lines = _threaded_lines(os.fdopen(stdin, "rb", closefd=False))
        try:
            stdout: int | None = stack.enter_context(_claimed(1, os.dup(2)))
        except OSError:
            stdout = None
        writer: LoopWriter | ThreadedWriter
        if stdout is None:
            writer = ThreadedWriter(sys.stdout.buffer)
        elif _loop_served(stdout) and not _same_file(stdout, 2):
            stack.enter_context(_non_blocking(stdout))
            writer = LoopWriter(stdout)
        else:
            writer = ThreadedWriter(os.fdopen(stdout, "wb", closefd=False))
        yield StdioEnds(lines=lines, writer=writer)


def _threaded_lines(stream: Any) -> Any:
    return anyio.wrap_file(io.TextIOWrapper(stream, encoding="utf-8", errors="replace"))

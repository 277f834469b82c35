"""Check batches of Ed25519 signatures in helper processes, beside the walk that reads them.

:class:`~.signature_pool.SignaturePool` checks signatures on threads: ``cryptography``
releases the GIL while it verifies, but every check must take the GIL back to start, and the
walk holds it while it recognizes receipts, so on a machine with few cores the two keep
waking each other (a futex hand-off per signature and per file read) and neither core is
kept busy. :class:`SignatureProcesses` hands batches instead to helper processes
(:mod:`.signature_worker`: forked when this process runs one thread, else started from the
interpreter running proctor with only the standard library and ``cryptography`` loaded), one
per usable core but the caller's, over pipes. The caller is the other checker: whenever every
helper already has :data:`_AHEAD` batches queued it checks the next batch itself, then reads
on, so the walk seldom waits on a helper and a helper seldom runs out of work.

What it checks is exactly what the threads check: each batch's answer is the index of its
first failing check, or None. A helper that cannot start, dies, or answers nothing is never
trusted: every batch it has not answered is checked again in the caller, and when no helper
can be started the batches go to a :class:`~.signature_pool.SignaturePool`.
"""

from __future__ import annotations

import contextlib
import os
import select
import struct
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from proctor.receipts.signing import PublicKey
from proctor.receipts.verify import SignatureCheck, verify_serially
from proctor.runtime.records.signature_pool import Closing, SignaturePool, usable_cores
from proctor.runtime.records.signature_worker import serve

if TYPE_CHECKING:
    import subprocess

__all__ = ["BATCH", "SignatureProcesses"]

#: Checks per batch sent to a helper: about 4 ms of signatures, so the last batches out when
#: the walk ends cost little waiting, and a batch of common receipts fits in a pipe.
BATCH = 64
#: Batches a helper may have queued (sent, not answered) before the caller checks the next
#: batch itself: enough that the helper never runs dry while the caller checks one.
_AHEAD = 2
#: Below this many checks a batch is checked in the caller (a hand-off costs more).
_MIN_SENT = 16
#: A helper is started for a batch at least this large (so a small tree starts none).
_MIN_START = 48
_PIPE_BYTES = 1 << 20

_WORKER = os.path.join(os.path.dirname(__file__), "signature_worker.py")
_HEAD = struct.Struct("<II")
_CHECK = struct.Struct("<32sHI")
_RESULT = struct.Struct("<i")


class SignatureProcesses(Closing):
    """A :data:`~proctor.receipts.verify.BatchSubmitter` over helper processes plus the caller.

    ``workers`` helpers at most (default: one per usable core but the caller's), each started
    on the first batch large enough to need it and stopped on :meth:`close` (use it as a
    context manager). With ``workers=0`` every batch is checked in the caller.
    """

    def __init__(self, workers: int | None = None) -> None:
        self._wanted = usable_cores() - 1 if workers is None else max(0, workers)
        self._helpers: list[_Helper] = []
        self._threads: SignaturePool | None = None

    def submit(self, checks: Sequence[SignatureCheck]) -> Callable[[], int | None]:
        """Start checking ``checks``; the returned callable waits and returns the index of
        the first check that fails, or None. It raises what a check raised (such checks are
        always checked in the caller). A batch larger than :data:`BATCH` goes out in parts
        of that size, each to a helper with room or, when none has, checked here."""
        if len(checks) <= BATCH:
            return self._submit(checks)
        waits = [self._submit(checks[i : i + BATCH]) for i in range(0, len(checks), BATCH)]

        def wait() -> int | None:
            for part, waited in enumerate(waits):
                failed = waited()
                if failed is not None:
                    return part * BATCH + failed
            return None

        return wait

    def _submit(self, checks: Sequence[SignatureCheck]) -> Callable[[], int | None]:
        if self._threads is not None:
            return self._threads.submit(checks)
        if len(checks) >= _MIN_SENT and self._wanted:
            helper = self._ready(len(checks))
            if helper is not None:
                payload = _payload(checks)
                if payload is not None:
                    return helper.send(payload, checks)
            elif self._threads is not None:  # no helper could start: threads, from now on
                return self._threads.submit(checks)
        failed = verify_serially(checks)
        return lambda: failed

    def _ready(self, size: int) -> _Helper | None:
        """A helper with room for a batch, started if none has room and one may be."""
        for helper in self._helpers:
            if helper.ahead >= _AHEAD:
                helper.collect(block=False)
            if not helper.broken and helper.ahead < _AHEAD:
                return helper
        live = sum(1 for helper in self._helpers if not helper.broken)
        if live < self._wanted and size >= _MIN_START and len(self._helpers) < 2 * self._wanted:
            try:
                helper = _Helper.start()
            except OSError:
                if not live:
                    self._threads = SignaturePool(self._wanted)
                return None
            self._helpers.append(helper)
            return helper
        return None

    def close(self) -> None:
        """Stop the helpers (one busy with a batch nobody waits for is killed)."""
        for helper in self._helpers:
            helper.stop()
        self._helpers.clear()
        if self._threads is not None:
            self._threads.close()


def _payload(checks: Sequence[SignatureCheck]) -> bytes | None:
    """The batch as the helper reads it, or None when a check is not plain key, bytes and
    bytes (the caller then checks it, raising what checking it raises)."""
    pack = _CHECK.pack
    parts = [b""]
    size = 0
    for key, signature, message in checks:
        if (
            type(key) is not PublicKey
            or type(signature) is not bytes
            or type(message) is not bytes
            or len(signature) > 0xFFFF
            or len(message) > 0xFFFFFFFF
        ):
            return None
        parts.append(pack(key.raw, len(signature), len(message)))
        parts.append(signature)
        parts.append(message)
        size += _CHECK.size + len(signature) + len(message)
    parts[0] = _HEAD.pack(len(checks), size)
    return b"".join(parts)


def _single_threaded() -> bool:
    """True when this process runs one thread only (so a fork copies no lock some other
    thread holds); False when that cannot be told."""
    import threading

    if threading.active_count() != 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class _Helper:
    """One helper process: the batches sent to it, and the answers read back so far."""

    __slots__ = (
        "answers",
        "broken",
        "pending",
        "pid",
        "poll",
        "proc",
        "read_fd",
        "sent",
        "trusted",
        "write_fd",
    )

    def __init__(
        self, pid: int, write_fd: int, read_fd: int, proc: subprocess.Popen[bytes] | None
    ) -> None:
        self.pid = pid
        self.proc = proc
        self.write_fd = write_fd
        self.read_fd = read_fd
        os.set_blocking(self.read_fd, False)
        with contextlib.suppress(AttributeError, OSError):  # Linux only; a bigger pipe
            import fcntl  # lets a batch of large receipts go out without waiting

            fcntl.fcntl(self.write_fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        self.poll = select.poll()
        self.poll.register(self.read_fd, select.POLLIN)
        self.sent = 0
        self.answers: list[int] = []
        self.pending = b""
        self.broken = False
        self.trusted = True

    @classmethod
    def start(cls) -> _Helper:
        """Start a helper: forked when this process is single-threaded (about a millisecond,
        nothing to import), else run from this interpreter, isolated (``-I``: no user site, no
        ``PYTHON*`` variables, not the current folder on its path).

        Raises:
            OSError: the helper could not be started.
        """
        if hasattr(os, "fork") and _single_threaded():
            return cls._fork()
        if not sys.executable:
            raise OSError("no interpreter to start a signature helper with")
        import subprocess  # only here: a forked helper needs none of it

        proc = subprocess.Popen(
            [sys.executable, "-I", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            close_fds=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        return cls(proc.pid, proc.stdin.fileno(), proc.stdout.fileno(), proc)

    @classmethod
    def _fork(cls) -> _Helper:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (to_child, from_parent, to_parent, from_child):
                os.close(fd)
            raise
        if pid == 0:  # the helper: never returns into the caller's code
            code = 1
            try:
                # keep its two pipe ends only: another helper's pipe held open here would
                # never see its EOF, nor would a pipe the caller's own reader waits on
                for name in os.listdir("/proc/self/fd"):  # there: _single_threaded read /proc
                    if int(name) not in (to_child, from_child):
                        with contextlib.suppress(OSError):  # the listing's own, closed already
                            os.close(int(name))
                code = serve(to_child, from_child)
            finally:
                os._exit(code)
        os.close(to_child)
        os.close(from_child)
        return cls(pid, from_parent, to_parent, None)

    @property
    def ahead(self) -> int:
        """Batches sent and not yet answered."""
        return self.sent - len(self.answers)

    def send(self, payload: bytes, checks: Sequence[SignatureCheck]) -> Callable[[], int | None]:
        """Queue one batch; the returned callable waits for its answer."""
        ticket = self.sent
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(self.write_fd, view) :]
        except OSError:
            self.broken = True
            failed = verify_serially(checks)
            return lambda: failed
        self.sent += 1
        return lambda: self.wait(ticket, checks)

    def wait(self, ticket: int, checks: Sequence[SignatureCheck]) -> int | None:
        """The answer to batch ``ticket``: the helper's, or the caller's own check when the
        helper ended before answering it."""
        while ticket >= len(self.answers) and not self.broken:
            self.collect(block=True)
        if ticket < len(self.answers) and self.trusted:
            answer = self.answers[ticket]
            if answer == -1:
                return None
            if 0 <= answer < len(checks):
                return answer
            self.trusted = False  # an answer no helper of ours gives
        return verify_serially(checks)

    def collect(self, *, block: bool) -> None:
        """Read the answers that have arrived; with ``block``, wait for at least one (or for
        the helper to end)."""
        if self.broken:
            return
        while True:
            if block:
                self.poll.poll()
            try:
                data = os.read(self.read_fd, 4096)
            except BlockingIOError:
                if block:
                    continue
                return
            except OSError:
                data = b""
            if not data:
                self.broken = True
                return
            data = self.pending + data
            whole = len(data) - len(data) % _RESULT.size
            self.answers.extend(answer for (answer,) in _RESULT.iter_unpack(data[:whole]))
            self.pending = data[whole:]
            if len(self.answers) > self.sent:  # more answers than batches: trust none
                self.trusted = False
                self.broken = True
            if not block or whole:
                return

    def stop(self) -> None:
        """Close its input and wait for it to end; one still busy is killed first."""
        with contextlib.suppress(OSError):
            if self.ahead and not self.broken:
                import signal  # only here: most helpers are idle when stopped

                os.kill(self.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.communicate()  # closes both pipes, reaps it
            return
        for fd in (self.write_fd, self.read_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

"""Check batches of Ed25519 signatures on every core this process may use.

``cryptography`` releases the GIL while it verifies an Ed25519 signature, so threads verify
in parallel. Two ways to hand work over:

* calling the pool (a :data:`~proctor.receipts.verify.BatchVerifier`) checks a batch and
  waits for it; the calling thread verifies one slice itself, so one worker uses two cores;
* :meth:`SignaturePool.submit` (a :data:`~proctor.receipts.verify.BatchSubmitter`) queues
  the batch in slices of :data:`_SLICE` for the threads and returns at once, so the walk
  reads and parses on while the threads verify; a thread that waits for a batch verifies
  queued slices itself rather than sleep. The walk's file reads release the GIL several
  times per receipt, so a thread finishing a signature gets the GIL back within
  microseconds.
"""

from __future__ import annotations

import abc
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self

from proctor.receipts.verify import SignatureCheck, verify_serially

__all__ = ["SignaturePool", "usable_cores"]

#: Below this many checks a batch is verified on the calling thread (a hand-off costs more).
_MIN_PARALLEL = 16
#: Checks per slice a submitted batch is cut into (small enough to balance the threads).
_SLICE = 32


def usable_cores() -> int:
    """The number of CPUs this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Closing(abc.ABC):
    """A checker used as a context manager: ``with`` ends in :meth:`close`, which each checker
    defines (a class without it cannot be built)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the checker's threads or processes."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SignaturePool(Closing):
    """A :data:`~proctor.receipts.verify.BatchVerifier` over ``workers`` threads plus the caller.

    Threads start on the first batch large enough to split and stop on :meth:`close` (use the
    pool as a context manager). With ``workers=0`` every batch is checked on the caller.
    """

    def __init__(self, workers: int | None = None) -> None:
        self._workers = usable_cores() - 1 if workers is None else max(0, workers)
        self._threads: list[threading.Thread] = []
        self._jobs: deque[_Job | None] = deque()
        self._ready = threading.Condition()

    def __call__(self, checks: Sequence[SignatureCheck]) -> int | None:
        """The index of the first check in ``checks`` that fails, or None when all pass."""
        parts = min(self._workers + 1, len(checks) // _MIN_PARALLEL)
        if parts < 2:
            return verify_serially(checks)
        self._start(parts - 1)
        size = -(-len(checks) // parts)
        jobs = [_Job(checks, start, size) for start in range(size, len(checks), size)]
        with self._ready:
            self._jobs.extend(jobs)
            self._ready.notify_all()
        failures = [verify_serially(checks[:size])]
        for job in jobs:
            job.done.wait()
            if job.error is not None:
                raise job.error
            failures.append(None if job.failed is None else job.start + job.failed)
        found = [i for i in failures if i is not None]
        return min(found) if found else None

    def submit(self, checks: Sequence[SignatureCheck]) -> Callable[[], int | None]:
        """Start checking ``checks`` on the threads; the returned callable waits for them.

        It returns the index of the first check that fails, or None, and raises what a check
        raised. With ``workers=0`` the batch is checked here, before returning.
        """
        if self._workers == 0:
            failed = verify_serially(checks)
            return lambda: failed
        # no extra thread for the caller's core: the walk uses it, and while it waits for a
        # batch it verifies queued slices itself (more threads than cores only contend)
        self._start(self._workers)
        jobs = [_Job(checks, start, _SLICE) for start in range(0, len(checks), _SLICE)]
        with self._ready:
            self._jobs.extend(jobs)
            self._ready.notify_all()
        return lambda: self._wait(jobs)

    def _wait(self, jobs: list[_Job]) -> int | None:
        for job in jobs:
            while not job.done.is_set():
                with self._ready:
                    spare = self._jobs.popleft() if self._jobs and self._jobs[0] else None
                if spare is None:
                    job.done.wait()
                else:
                    spare.run()
            if job.error is not None:
                raise job.error
            if job.failed is not None:
                return job.start + job.failed
        return None

    def _start(self, wanted: int) -> None:
        while len(self._threads) < wanted:
            thread = threading.Thread(target=self._serve, name="proctor-verify", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._jobs:
                    self._ready.wait()
                job = self._jobs.popleft()
            if job is None:
                return
            job.run()

    def close(self) -> None:
        """Stop the threads (each finishes the slice it holds first)."""
        with self._ready:
            self._jobs.extend([None] * len(self._threads))
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads.clear()


class _Job:
    __slots__ = ("checks", "done", "error", "failed", "size", "start")

    def __init__(self, checks: Sequence[SignatureCheck], start: int, size: int) -> None:
        self.checks = checks
        self.start = start
        self.size = size
        self.failed: int | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        """Check this slice; a failure or an error is kept for the waiting caller."""
        try:
            self.failed = verify_serially(self.checks[self.start : self.start + self.size])
        except BaseException as exc:  # handed to the caller, which raises it
            self.error = exc
        finally:
            self.done.set()

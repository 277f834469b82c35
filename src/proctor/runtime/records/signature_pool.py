"""Check batches of Ed25519 signatures on every core this process may use.

``cryptography`` releases the GIL while it verifies an Ed25519 signature, so threads verify
in parallel. The walk in :mod:`proctor.receipts.verify` hands over a batch at a time and waits
for it (the threads never run beside the walk's own Python work, which would make each of
them wait for the GIL between two signatures). The calling thread verifies one slice itself,
so one worker thread uses two cores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from types import TracebackType

from proctor.receipts.verify import SignatureCheck, verify_serially

__all__ = ["SignaturePool", "usable_cores"]

#: Below this many checks a batch is verified on the calling thread (a hand-off costs more).
_MIN_PARALLEL = 16


def usable_cores() -> int:
    """The number of CPUs this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class SignaturePool:
    """A :data:`~proctor.receipts.verify.BatchVerifier` over ``workers`` threads plus the caller.

    Threads start on the first batch large enough to split and stop on :meth:`close` (use the
    pool as a context manager). With ``workers=0`` every batch is checked on the caller.
    """

    def __init__(self, workers: int | None = None) -> None:
        self._workers = usable_cores() - 1 if workers is None else max(0, workers)
        self._threads: list[threading.Thread] = []
        self._jobs: list[_Job | None] = []
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
                job = self._jobs.pop(0)
            if job is None:
                return
            try:
                job.failed = verify_serially(job.checks[job.start : job.start + job.size])
            except BaseException as exc:  # handed to the caller, which raises it
                job.error = exc
            finally:
                job.done.set()

    def close(self) -> None:
        """Stop the threads (each finishes the slice it holds first)."""
        with self._ready:
            self._jobs.extend([None] * len(self._threads))
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def __enter__(self) -> SignaturePool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Job:
    __slots__ = ("checks", "done", "error", "failed", "size", "start")

    def __init__(self, checks: Sequence[SignatureCheck], start: int, size: int) -> None:
        self.checks = checks
        self.start = start
        self.size = size
        self.failed: int | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()

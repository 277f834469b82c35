"""``proctor worker``'s loop: N driver slots taking submissions, and one heartbeat.

Each slot takes the oldest due submission (:meth:`.queue.WorkQueue.take`) and drives it with a
fresh :class:`proctor.runtime.engine.session.Session` of the workspace: a ``start`` runs the
submitted reference under the run id chosen at submission, a ``resume`` admits its document.
The heartbeat thread notes the worker alive, renews the leases its slots hold (so a driver in a
long call keeps its run) and gives dead workers' submissions back to the queue.

What becomes of a submission: driven to a seal or a pause, it is ``done``; refused for what it
is (a bad document, a missing skill, a sealed run) it is ``failed`` with the refusal's code;
``run_busy`` or a store that failed is retried later with backoff (capped at 5 s), while the
submission's takes stay under :data:`.queue.MAX_ATTEMPTS` plus :data:`.queue.MAX_DEATHS`. A
stop (SIGTERM) lets each slot finish its current call; the run then waits, and goes back to the
queue as ``resume {}`` for any worker to continue.
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from proctor.errors import ProctorError
from proctor.runtime.engine.host import RunInterrupted
from proctor.runtime.engine.lease import lease_ttl
from proctor.runtime.engine.session import Session
from proctor.runtime.fleet.queue import (
    HEARTBEAT_SECONDS,
    MAX_ATTEMPTS,
    MAX_DEATHS,
    Submission,
    WorkQueue,
)

__all__ = ["Worker", "worker_id"]

_RETRIED = {"run_busy", "store_unreachable", "store_error"}
"""Refusals that say "not now" rather than "never": the submission is retried later."""


def worker_id() -> str:
    """This worker's identity: ``host|pid-like nonce``."""
    import os

    return f"{socket.gethostname()}|{os.getpid()}|{secrets.token_hex(4)}"


class Worker:
    """One worker process's slots and heartbeat.

    Args:
        workspace: the workspace every run is driven in (shared by every worker).
        environ: the settings (``PROCTOR_DATABASE_URL`` must name the shared database).
        concurrency: how many runs this worker drives at once.
        log: where one line per finished submission goes.
        poll_seconds: how long an idle slot waits before asking the queue again.
    """

    def __init__(
        self,
        workspace: Any,
        environ: Mapping[str, str],
        *,
        concurrency: int = 1,
        log: Callable[[str], None] = lambda line: None,
        poll_seconds: float = 0.2,
    ) -> None:
        self.workspace = workspace
        self.environ = environ
        self.concurrency = concurrency
        self.log = log
        self.poll_seconds = poll_seconds
        self.id = worker_id()
        self.stop = threading.Event()
        self._holders: dict[int, str] = {}
        self._lock = threading.Lock()
        probe = Session(workspace, environ=environ)
        from proctor.runtime.records.postgres import PostgresRunStore

        store = probe.store
        if not isinstance(store, PostgresRunStore):
            from proctor.errors import UsageError

            raise UsageError(
                "proctor worker needs a shared run store: set PROCTOR_DATABASE_URL to a"
                " postgresql:// database",
                code="worker_needs_database",
            )
        self.queue = WorkQueue(store)
        probe.close()  # the store's pool outlives the session (see records.postgres)

    # -- the loop ---------------------------------------------------------------------------

    def serve(self) -> None:
        """Drive submissions until :attr:`stop` is set; then finish, release and leave."""
        self.queue.register(self.id, self.concurrency)
        beat = threading.Thread(target=self._heartbeat, name="proctor-heartbeat", daemon=True)
        beat.start()
        slots = [
            threading.Thread(target=self._slot, args=(n,), name=f"proctor-slot-{n}")
            for n in range(self.concurrency)
        ]
        for slot in slots:
            slot.start()
        for slot in slots:
            slot.join()
        self.stop.set()
        beat.join()
        self.queue.leave(self.id)

    def _heartbeat(self) -> None:
        while True:
            with self._lock:
                holders = list(self._holders.values())
            try:
                state = "stopping" if self.stop.is_set() else "running"
                self.queue.heartbeat(self.id, holders, lease_ttl(), state)
                self.queue.reclaim_orphans()
            except ProctorError as exc:
                self.log(f"heartbeat failed: {exc.message}")
            if self.stop.wait(HEARTBEAT_SECONDS) and not any(
                t.name.startswith("proctor-slot-") for t in threading.enumerate()
            ):
                return

    def _slot(self, n: int) -> None:
        while not self.stop.is_set():
            try:
                work = self.queue.take(self.id)
            except ProctorError as exc:
                self.log(f"cannot take work: {exc.message}")
                work = None
            if work is None:
                self.stop.wait(self.poll_seconds)
                continue
            self._drive(n, work)

    def _drive(self, n: int, work: Submission) -> None:
        session = Session(
            self.workspace, environ=self.environ, run_ids=lambda: work.run_id, managed=False
        )
        with self._lock:
            self._holders[n] = session.holder
        try:
            envelope = self._start_or_resume(session, work)
        except RunInterrupted:
            self.queue.requeue_as_resume(work.id, "stopped by its worker; any worker continues")
            self.log(f"{work.kind} {work.run_id}: stopped, queued to continue")
            return
        except ProctorError as exc:
            if exc.code in _RETRIED and work.attempts < MAX_ATTEMPTS + MAX_DEATHS:
                delay = min(5.0, 0.25 * 2 ** min(work.attempts, 5))
                self.queue.retry_later(work.id, delay, exc.code)
                self.log(f"{work.kind} {work.run_id}: {exc.code}, retried later")
            else:
                self.queue.finish(work.id, "failed", f"{exc.code}: {exc.message}")
                self.log(f"{work.kind} {work.run_id}: failed ({exc.code})")
            return
        finally:
            with self._lock:
                self._holders.pop(n, None)
            session.close()
        self.queue.finish(work.id, "done", envelope.status)
        self.log(f"{work.kind} {work.run_id}: {envelope.status}")

    def _start_or_resume(self, session: Session, work: Submission) -> Any:
        body = work.body
        if work.kind == "start":
            if session.store.get_run(work.run_id) is not None:  # started before a crash
                return session.resume(work.run_id, {}, stop=self.stop)
            from proctor.core.authority import default_authority, parse_authority

            stated = body.get("authority")
            authority = (
                None
                if stated is None
                else parse_authority(stated, base=default_authority(managed=False))
            )
            root = self.workspace.root
            return session.run(
                str(body["ref"]),
                inputs=body.get("inputs"),
                cli_inputs=list(body.get("cli_inputs") or []),
                authority=authority,
                cwd=Path(root, str(body.get("cwd") or ".")),
                stop=self.stop,
                profile=body.get("profile"),
            )
        return session.resume(work.run_id, body.get("document") or {}, stop=self.stop)

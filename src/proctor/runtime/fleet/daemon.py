"""``proctor worker``'s loop: N driver slots taking submissions, one heartbeat, one listener.

Each slot takes the oldest due submission (:meth:`.queue.WorkQueue.take_next`) and drives it
with a fresh :class:`proctor.runtime.engine.session.Session` of the workspace: a ``start`` runs
the submitted reference under the run id chosen at submission, a ``resume`` admits its
document. An idle slot waits for its turn (:mod:`.doorbell`: one slot per notice). The
heartbeat thread notes the worker alive, renews the leases its slots hold (so a driver in a
long call keeps its run) and, when the beat says there is any, gives dead workers' submissions
back to the queue. It survives any
error: a beat that fails (the database unreachable, a connection the server closed) is tried
again with backoff on a new connection; when no beat has succeeded for half the lease's time,
the worker stops taking work and stops its drivers (each before its next step, and the command
each has in flight ended), so none of them writes past a lease it could no longer renew; it
takes work again once a beat succeeds. A driver that finds its run taken over anyway (every
write refused ``lease_lost``) leaves its submission to the worker that holds the run now.

What becomes of a submission: driven to a seal or a pause, it is ``done``; refused for what it
is (a bad document, a missing skill, a sealed run) it is ``failed`` with the refusal's code
(either recorded with the slot's next take, one commit, or alone when the slot stops);
``run_busy`` or a store that failed is retried later with backoff (capped at 5 s), while the
submission's takes stay under :data:`.queue.MAX_ATTEMPTS` plus :data:`.queue.MAX_DEATHS`. A
stop (SIGTERM) lets each slot finish its current call; the run then waits, and goes back to the
queue as ``resume {}`` for any worker to continue.

A row that does not fit the submission contract (anyone with access to the database can write
one) is ``failed`` with the refusal's code (``submission_invalid``, ``submission_too_large``,
``too_deep``, ``duplicate_key``) before anything runs; so is a ``start`` whose ``cwd`` or local
skill folder is outside the workspace this worker serves (``submission_outside_workspace``).
An unexpected error while driving one submission (a bug) fails that submission as
``worker_error``, naming the error's type and where it was raised, and the slot goes on.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.submission import ResumeBody
from proctor.errors import LeaseLost, ProctorError, SubmissionRefused
from proctor.runtime.engine.host import RunInterrupted
from proctor.runtime.engine.lease import lease_ttl
from proctor.runtime.engine.session import Session
from proctor.runtime.fleet.doorbell import SAFETY_SECONDS, Doorbell, Listener
from proctor.runtime.fleet.queue import (
    HEARTBEAT_SECONDS,
    MAX_ATTEMPTS,
    MAX_DEATHS,
    Finished,
    Refused,
    Submission,
    WorkQueue,
)

__all__ = ["Worker", "confined_cwd", "worker_id"]

_RETRIED = {"run_busy", "store_unreachable", "store_error"}
"""Refusals that say "not now" rather than "never": the submission is retried later."""

_BACKOFF_FIRST = 0.05
"""The first wait before a failed heartbeat is tried again (doubling up to a beat's period)."""

_CUT_OFF = 0.5
"""The share of the lease's time without a successful beat after which drivers are stopped."""


_LOOK_AGAIN = 0.05
"""The shortest wait of an idle slot: work due now that it could not take is being taken by
another worker at that moment."""

UPKEEP_SECONDS = 2.0
"""How often a worker sends due notifications and settles passed deadlines."""


def worker_id() -> str:
    """This worker's identity: ``host|pid-like nonce``."""
    return f"{socket.gethostname()}|{os.getpid()}|{secrets.token_hex(4)}"


class Worker:
    """One worker process's slots and heartbeat.

    Args:
        workspace: the workspace every run is driven in (shared by every worker).
        environ: the settings (``PROCTOR_DATABASE_URL`` must name the shared database).
        concurrency: how many runs this worker drives at once.
        log: where one line per finished submission goes.
        poll_seconds: how long an idle slot waits before asking the queue again while no
            listening connection wakes it (:mod:`.doorbell`; with one, an idle slot waits for
            a notice or the next due submission).
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
        self._sessions: dict[int, Session] = {}
        self._lock = threading.Lock()
        self.cut_off = threading.Event()
        """Set while the heartbeat cannot reach the database: no slot takes work."""
        from proctor.runtime.records.postgres import PostgresRunStore
        from proctor.runtime.records.postgres_pool import plan_once

        plan_once()  # before the store's pool opens: a worker's statements are keyed
        probe = Session(workspace, environ=environ)

        store = probe.store
        if not isinstance(store, PostgresRunStore):
            from proctor.errors import UsageError

            raise UsageError(
                "proctor worker needs a shared run store: set PROCTOR_DATABASE_URL to a"
                " postgresql:// database",
                code="worker_needs_database",
            )
        self.queue = WorkQueue(store)
        self.bell = Doorbell(turns=concurrency)
        self.listener = Listener(store.url, self.queue.channel, self.bell, self.stop)
        probe.close()  # the store's pool outlives the session (see records.postgres)

    # -- the loop ---------------------------------------------------------------------------

    def serve(self) -> None:
        """Drive submissions until :attr:`stop` is set; then finish, release and leave."""
        self.queue.register(self.id, self.concurrency)
        beat = threading.Thread(target=self._heartbeat, name="proctor-heartbeat", daemon=True)
        beat.start()
        self.listener.start()
        threading.Thread(target=self._ring_on_stop, name="proctor-stop-bell", daemon=True).start()
        upkeep = threading.Thread(target=self._upkeep, name="proctor-upkeep", daemon=True)
        upkeep.start()
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
        backoff = _BACKOFF_FIRST
        last_beat = time.monotonic()
        while True:
            with self._lock:
                holders = list(self._holders.values())
            try:
                state = "stopping" if self.stop.is_set() else "running"
                if self.queue.heartbeat(self.id, holders, lease_ttl(), state):
                    self.queue.reclaim_orphans()
            except Exception as exc:  # the heartbeat outlives every error, a bug's included
                what = exc.message if isinstance(exc, ProctorError) else type(exc).__name__
                self.log(f"heartbeat failed: {what}; trying again in {backoff:.2f} s")
                if time.monotonic() - last_beat >= lease_ttl() * _CUT_OFF:
                    self._cut_off()
                wait, backoff = backoff, min(backoff * 2, HEARTBEAT_SECONDS)
            else:
                last_beat, backoff, wait = time.monotonic(), _BACKOFF_FIRST, HEARTBEAT_SECONDS
                if self.cut_off.is_set():
                    self.cut_off.clear()
                    self.log("heartbeat: the run store answers again; taking work")
            if self.stop.wait(wait) and not any(
                t.name.startswith("proctor-slot-") for t in threading.enumerate()
            ):
                return

    def _ring_on_stop(self) -> None:
        self.stop.wait()
        self.bell.ring()

    def _idle(self, seen: int, due: float | None) -> None:
        """Wait, after finding no work, until this slot's turn comes (a notice: work arrived)
        or the bell rings for every slot (the listener back, a stop), the next submission is
        due (``due`` seconds, as the take found it: work due now that another worker was taking
        is looked at again after a short pause, never in a busy loop), or the fallback interval
        passes."""
        if not self.bell.live:
            self.bell.take_turn(seen, self.poll_seconds)
            return
        timeout = SAFETY_SECONDS if due is None else min(SAFETY_SECONDS, due)
        self.bell.take_turn(seen, max(timeout, _LOOK_AGAIN))

    def _upkeep(self) -> None:
        """Every :data:`UPKEEP_SECONDS`: send due notifications and settle passed deadlines
        (:meth:`Session.settle_due`); an error waits for the next round."""
        while not self.stop.wait(UPKEEP_SECONDS):
            if self.cut_off.is_set():
                continue
            try:
                session = Session(self.workspace, environ=self.environ)
                try:
                    session.settle_due()
                finally:
                    session.close()
            except Exception as exc:  # the upkeep outlives every error, a bug's included
                what = exc.message if isinstance(exc, ProctorError) else type(exc).__name__
                self.log(f"upkeep failed: {what}; trying again in {UPKEEP_SECONDS} s")

    def _cut_off(self) -> None:
        """Stop taking work and stop every driver of this worker before its lease lapses: each
        stops before its next step, and the commands in flight are ended (their claims stay
        unsettled, so the run's next driver asks whether to send them again)."""
        if self.cut_off.is_set():
            return
        self.cut_off.set()
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.request_stop()
        from proctor.runtime.tools.process import stop_running

        ended = stop_running()
        self.log(
            "heartbeat: the run store cannot be reached; stopped taking work and stopped"
            f" {len(sessions)} driver(s) ({ended} command(s) in flight ended) before their"
            " leases lapse"
        )

    def _slot(self, n: int) -> None:
        # how the last submission ended, recorded with this slot's next take (one commit)
        last: Finished | None = None
        while not self.stop.is_set():
            if self.cut_off.is_set():  # the heartbeat cannot renew a lease: take nothing
                self.stop.wait(self.poll_seconds)
                continue
            work: Submission | Refused | None = None
            due: float | None = self.poll_seconds  # the store is down: look again soon
            seen = self.bell.everyone
            try:
                work, due = self.queue.take_next(self.id, finished=last)
                last = None
                if isinstance(work, Refused) or (work is not None and work.more):
                    self.bell.pass_on()  # more may be due than notices said (work given back)
                if isinstance(work, Refused):
                    self._settle(work.id, "failed", work.error)
                elif work is not None:
                    last = self._drive(n, work)
            except Exception as exc:  # one submission's bug never ends the slot
                self._unexpected(work, exc)
            if work is None and not self.stop.is_set():
                self._idle(seen, due)
        if last is not None:  # stopping: recorded alone
            try:
                self.queue.finish(last.id, last.state, last.note)
            except Exception as exc:  # the store is down: it goes back when this worker leaves
                self.log(f"submission {last.id}: not recorded ({type(exc).__name__})")

    def _settle(self, submission_id: int, state: str, error: ProctorError) -> None:
        """Record a submission's end with the error's code; logged by submission id only
        (a refused row's kind and run id are whatever its writer put there)."""
        self.queue.finish(submission_id, state, f"{error.code}: {error.message}")
        self.log(f"submission {submission_id}: {state} ({error.code})")

    def _unexpected(self, work: Submission | Refused | None, exc: Exception) -> None:
        """A bug met while taking or driving ``work``: record it as that submission's failure
        (its type and where it was raised, never its message: it may quote a value) and go on.
        A submission that cannot be recorded stays taken and goes back to the queue when this
        worker leaves."""
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        what = f"unexpected {type(exc).__name__}{where} (a bug in proctor)"
        if isinstance(exc, ProctorError):
            what = f"{exc.code}: {exc.message}"
        if work is None:
            self.log(f"cannot take work: {what}")
            return
        try:
            if isinstance(exc, ProctorError) and exc.code in _RETRIED:
                # the store failed while settling the work: drive it again later (a start of
                # a run that exists resumes it), as any "not now" is
                self.queue.retry_later(work.id, 1.0, exc.code)
                self.log(f"submission {work.id}: {exc.code}, retried later")
                return
            self.queue.finish(work.id, "failed", f"worker_error: {what}")
        except Exception as again:  # the store is down too: say so and go on
            self.log(
                f"submission {work.id}: {what}; could not be recorded"
                f" ({type(again).__name__}), it stays taken until this worker leaves"
            )
            return
        self.log(f"submission {work.id}: failed (worker_error: {what})")

    def _drive(self, n: int, work: Submission) -> Finished | None:
        """Drive ``work``; how it ended when that is for the next take to record (``None``:
        recorded already, or given back)."""
        session = Session(
            self.workspace, environ=self.environ, run_ids=lambda: work.run_id, managed=False
        )
        session.settle_on_close = False  # the upkeep thread settles (every UPKEEP_SECONDS)
        with self._lock:
            self._holders[n] = session.holder
            self._sessions[n] = session
        if self.cut_off.is_set():
            session.request_stop()
        try:
            envelope = self._start_or_resume(session, work)
        except LeaseLost as lost:
            # another driver holds the run now (and its submission, if the queue gave it back)
            self.queue.finish(work.id, "failed", f"{lost.code}: {lost.message}", by=self.id)
            self.log(f"{work.kind} {work.run_id}: lease lost, left to the driver holding it")
            return None
        except RunInterrupted:
            self.queue.requeue_as_resume(work.id, "stopped by its worker; any worker continues")
            self.log(f"{work.kind} {work.run_id}: stopped, queued to continue")
            return None
        except ProctorError as exc:
            if exc.code in _RETRIED and work.attempts < MAX_ATTEMPTS + MAX_DEATHS:
                delay = min(5.0, 0.25 * 2 ** min(work.attempts, 5))
                self.queue.retry_later(work.id, delay, exc.code)
                self.log(f"{work.kind} {work.run_id}: {exc.code}, retried later")
                return None
            self.log(f"{work.kind} {work.run_id}: failed ({exc.code})")
            return Finished(work.id, "failed", f"{exc.code}: {exc.message}")
        finally:
            with self._lock:
                self._holders.pop(n, None)
                self._sessions.pop(n, None)
            session.close()
        self.log(f"{work.kind} {work.run_id}: {envelope.status}")
        return Finished(work.id, "done", envelope.status)

    def _start_or_resume(self, session: Session, work: Submission) -> Any:
        body = work.body
        if isinstance(body, ResumeBody):
            return session.resume(work.run_id, body.document, stop=self.stop)
        if session.store.get_run(work.run_id) is not None:  # started before a crash
            return session.resume(work.run_id, {}, stop=self.stop)
        from proctor.core.authority import default_authority, parse_authority
        from proctor.parser.inputs import check_cli_pairs

        check_cli_pairs(body.cli_inputs, with_document=body.inputs is not None)
        authority = (
            None
            if body.authority is None
            else parse_authority(body.authority, base=default_authority(managed=False))
        )
        return session.run(
            body.ref,
            inputs=body.inputs,
            cli_inputs=list(body.cli_inputs),
            authority=authority,
            cwd=confined_cwd(self.workspace.root, body.cwd, body.ref),
            stop=self.stop,
            profile=body.profile,
        )


def confined_cwd(root: Path, cwd_given: str, ref: str) -> Path:
    """The folder ``ref`` starts from (``cwd_given``, relative to the workspace at ``root``),
    once both it and the local skill folder ``ref`` names are inside that workspace (symbolic
    links followed).

    Core skills and installed packages are found by name, not from the folder.

    Raises:
        SubmissionRefused: ``submission_outside_workspace``.
    """
    from proctor.runtime.packages.resolve import is_named_ref

    base = Path(os.path.realpath(root))
    cwd = Path(os.path.realpath(base / cwd_given))
    if not cwd.is_relative_to(base):
        raise SubmissionRefused(
            "the submission's cwd is outside the workspace this worker serves",
            code="submission_outside_workspace",
        )
    if not is_named_ref(ref):
        folder = Path(os.path.realpath(cwd / ref.partition("#")[0]))
        if not folder.is_relative_to(base):
            raise SubmissionRefused(
                "the submission's skill reference names a folder outside the workspace this"
                " worker serves",
                code="submission_outside_workspace",
            )
    return cwd

"""The work queue many workers share: submissions, the workers' heartbeats, orphans given back.

A submission is one piece of runnable work: ``start`` (a run submitted with ``proctor run
--submit``: its reference, inputs and authority, under a run id chosen at submission) or
``resume`` (a resume document, ``proctor resume RUN_ID FILE --submit``, or ``{}`` to continue a
run a dead worker held). Each has a ``due_at`` (a timed wait, or a retry's backoff, is a
submission due later). A worker takes the oldest due one with ``FOR UPDATE SKIP LOCKED``, so
two workers never take the same row and neither waits on the other.

Every change that makes a submission takeable sends a notice on the queue's channel in the same
transaction (:mod:`.doorbell`), so idle workers take it at once instead of at their next poll.

A worker writes a heartbeat every :data:`HEARTBEAT_SECONDS`; one silent for
:data:`DEAD_AFTER_SECONDS` is dead. Its taken submissions go back to the queue as a ``resume
{}`` of their run (or as the same ``start`` when the run was never created); the run's lease,
held by the dead worker, is taken over then. A worker's death is not the work's failure, so
only :data:`MAX_DEATHS` deaths (a run that kills every worker that drives it) fail it;
:data:`MAX_ATTEMPTS` bounds the retries of work that was refused "not now".

Anyone who can write to the database can write a row, so a taken row is read by the strict
contract of :mod:`proctor.contracts.submission` (a body over its cap is not even fetched): one
that does not fit comes back as :class:`Refused`, for the worker to settle ``failed`` with the
refusal's code, never driven and never retried.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from proctor.contracts.submission import (
    MAX_BODY_BYTES,
    ResumeBody,
    StartBody,
    dump_body,
    make_body,
    read_body,
)
from proctor.contracts.values import dataclass
from proctor.errors import SubmissionRefused
from proctor.runtime.records.postgres import PostgresRunStore

__all__ = [
    "DEAD_AFTER_SECONDS",
    "HEARTBEAT_SECONDS",
    "MAX_ATTEMPTS",
    "MAX_DEATHS",
    "Finished",
    "Refused",
    "Submission",
    "WorkQueue",
]

HEARTBEAT_SECONDS = 1.0
DEAD_AFTER_SECONDS = 5.0
MAX_ATTEMPTS = 5
MAX_DEATHS = 25
_NOW = "extract(epoch from clock_timestamp())"
_CONTINUE = json.dumps({"document": {}})

_TAKEABLE = (
    "s.state = 'queued' AND NOT EXISTS (SELECT 1 FROM submissions t"
    " WHERE t.run_id = s.run_id AND t.state = 'taken' AND NOT (t.id = %s AND t.taken_by = %s))"
)
"""A submission of ``submissions s`` a worker may take once it is due: queued, and no other
submission of its run taken (one run is never driven by two workers at once from the queue)
but the one the parameters name, taken by this worker (being finished by the same statement;
-1: none). One another worker took meanwhile (given back as a dead worker's) still counts."""

_STRANDED = (
    "r.status = 'running' AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.run_id = r.run_id"
    f" AND l.expires_at > {_NOW}) AND NOT EXISTS (SELECT 1 FROM submissions s"
    " WHERE s.run_id = r.run_id AND s.state IN ('queued', 'taken'))"
    " AND (SELECT count(*) FROM submissions f WHERE f.run_id = r.run_id"
    " AND f.state = 'failed') < %s"
)
"""A run of ``runs r`` that nobody drives and nothing will: ``running``, no live lease, no
work queued or taken, fewer failed submissions than its bound (the parameter)."""


@dataclass(frozen=True)
class Submission:
    """One queued piece of work, its body read by its contract."""

    id: int
    kind: str
    run_id: str
    body: StartBody | ResumeBody
    attempts: int
    more: bool = False
    """Other submissions were due when this one was taken (another idle slot may look)."""


@dataclass(frozen=True)
class Finished:
    """How a taken submission ended, to be recorded with the worker's next take."""

    id: int
    state: str
    note: str = ""


@dataclass(frozen=True)
class Refused:
    """A taken row whose kind, run id or body does not fit the contract: ``error`` says why."""

    id: int
    kind: str
    run_id: str
    error: SubmissionRefused


class WorkQueue:
    """The queue, heartbeats and worker list, in the PostgreSQL run store's database."""

    def __init__(self, store: PostgresRunStore) -> None:
        self.store = store
        self._channel: str | None = None

    @property
    def channel(self) -> str:
        """The notification channel of this queue (:func:`.doorbell.channel_for` its schema)."""
        if self._channel is None:
            from proctor.runtime.fleet.doorbell import channel_for

            self._channel = channel_for(str(self._rows("SELECT current_schema()")[0][0]))
        return self._channel

    def _notify(self) -> None:
        """Tell idle workers to look at the queue (sent when the surrounding transaction
        commits; inside no transaction, at once)."""
        self._rows("SELECT pg_notify(%s, '')", (self.channel,))

    def next_due(self) -> float | None:
        """Seconds until the next queued submission is due (0 when one is due now), or
        ``None`` when nothing is queued."""
        rows = self._rows(f"SELECT MIN(due_at) - {_NOW} FROM submissions WHERE state = 'queued'")
        return None if not rows or rows[0][0] is None else max(0.0, float(rows[0][0]))

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.store._rows(sql, params)

    # -- submissions ------------------------------------------------------------------------

    def submit(self, kind: str, run_id: str, body: Mapping[str, Any], *, delay: float = 0) -> int:
        """Queue work (due after ``delay`` seconds); returns its id. The body is held to the
        contract a worker reads it by, so what a worker would refuse is never queued.

        Raises:
            SubmissionRefused: as :func:`proctor.contracts.submission.make_body` and
                :func:`~proctor.contracts.submission.dump_body` (nothing is queued).
        """
        text = dump_body(make_body(kind, body))
        # one statement (one transaction of its own, or the caller's): the row and its notice
        rows = self._rows(
            "WITH made AS (INSERT INTO submissions (kind, run_id, body, due_at)"
            f" VALUES (%s, %s, %s, {_NOW} + %s) RETURNING id)"
            " SELECT id, pg_notify(%s, '') FROM made",
            (kind, run_id, text, delay, self.channel),
        )
        return int(rows[0][0])

    def take(self, worker_id: str) -> Submission | Refused | None:
        """The oldest due submission, now taken by ``worker_id``; ``None`` when none is due;
        :class:`Refused` when the row does not fit the contract (still taken: the caller
        settles it).

        Work on a run another submission of the same run holds is left for later, so one run
        is never driven by two workers at once from the queue. :attr:`Submission.more` says
        whether other submissions were due then (an idle slot of the caller may look too).
        """
        return self.take_next(worker_id)[0]

    def take_next(
        self, worker_id: str, *, finished: Finished | None = None
    ) -> tuple[Submission | Refused | None, float | None]:
        """:meth:`take`, and when nothing was taken, in the same round trip, the seconds until
        the next submission it could take is due (0: due now, but another worker is taking it;
        ``None``: nothing queued but work held back behind its run's taken submission, which
        that submission's finish announces).

        ``finished``: the submission this worker drove last, marked as :meth:`finish` would
        (``by`` this worker) in the same statement, one commit (a slot's finish and its next
        take were two, each waiting for the flush). Work held back behind it may be the work
        taken."""
        # the finished row is still ``taken`` in the statement's snapshot: it holds nothing back
        gone = -1 if finished is None else finished.id
        done = ""
        values: tuple[Any, ...] = ()
        if finished is not None:
            # the finish, and its notice when work of its run waits that this take leaves
            # (only while this worker still holds it: one given back meanwhile is another's)
            done = (
                ", done AS (UPDATE submissions SET state = %s, note = %s WHERE id = %s"
                " AND state = 'taken' AND taken_by = %s RETURNING CASE WHEN EXISTS (SELECT 1"
                " FROM submissions q WHERE q.run_id = submissions.run_id AND q.state = 'queued'"
                " AND q.id NOT IN (SELECT id FROM took)) THEN pg_notify(%s, '') END)"
            )
            values = (finished.state, finished.note[:500], finished.id, worker_id, self.channel)
        rows = self._rows(
            "WITH took AS (UPDATE submissions SET state = 'taken', taken_by = %s,"
            " attempts = attempts + 1"
            f" WHERE id = (SELECT s.id FROM submissions s WHERE {_TAKEABLE}"
            f" AND s.due_at <= {_NOW} ORDER BY s.due_at, s.id FOR UPDATE SKIP LOCKED LIMIT 1)"
            " RETURNING id, kind, run_id,"
            " CASE WHEN octet_length(body) <= %s THEN body END, octet_length(body), attempts,"
            # the oldest due other one, read in the queued index's order (an EXISTS was
            # planned as a scan of every submission ever made)
            " (SELECT m.id FROM submissions m WHERE m.state = 'queued'"
            f" AND m.due_at <= {_NOW} AND m.id <> submissions.id ORDER BY m.due_at LIMIT 1)"
            f" IS NOT NULL){done}"
            " SELECT *, NULL FROM took UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
            f" (SELECT s.due_at - {_NOW} FROM submissions s WHERE {_TAKEABLE}"
            " ORDER BY s.due_at LIMIT 1)"
            " WHERE NOT EXISTS (SELECT 1 FROM took)",
            (worker_id, gone, worker_id, MAX_BODY_BYTES, *values, gone, worker_id),
        )
        sid, kind, run_id, text, size, attempts, more, due = rows[0]
        if sid is None:
            return None, None if due is None else max(0.0, float(due))
        try:
            body = read_body(kind, run_id, text, int(size))
        except SubmissionRefused as exc:
            return Refused(int(sid), str(kind), str(run_id), exc), None
        return Submission(int(sid), str(kind), str(run_id), body, int(attempts), bool(more)), None

    def finish(
        self, submission_id: int, state: str, note: str = "", *, by: str | None = None
    ) -> None:
        """Mark a taken submission ``done`` or ``failed`` (with a note naming why); with
        ``by``, only while that worker still holds it taken. Work queued for the same run can
        be taken now: idle workers are told when there is some (every other submission woke
        them when it was queued)."""
        mine = "" if by is None else " AND state = 'taken' AND taken_by = %s"
        # one statement: the update and, when work of its run waits, the notice
        self._rows(
            "WITH done AS (UPDATE submissions SET state = %s, note = %s"
            f" WHERE id = %s{mine} RETURNING run_id)"
            " SELECT pg_notify(%s, '') FROM done WHERE EXISTS (SELECT 1 FROM submissions s"
            " WHERE s.run_id = done.run_id AND s.state = 'queued')",
            (state, note[:500], submission_id, *(() if by is None else (by,)), self.channel),
        )

    def retry_later(self, submission_id: int, delay: float, note: str) -> None:
        """Put a taken submission back, due after ``delay`` (a bounded retry). Idle workers
        are told (one statement): work of its run held back behind it can be taken now, and
        the retry itself is due before their next look."""
        self._rows(
            "WITH back AS (UPDATE submissions SET state = 'queued', taken_by = NULL,"
            f" due_at = {_NOW} + %s, note = %s WHERE id = %s RETURNING 1)"
            " SELECT pg_notify(%s, '') FROM back",
            (delay, note[:500], submission_id, self.channel),
        )

    def requeue_as_resume(self, submission_id: int, note: str) -> None:
        """Put a taken submission back as ``resume {}`` of its run (a stopped driver's run)."""
        with self.store.transaction():
            self._rows(
                "UPDATE submissions SET state = 'queued', taken_by = NULL, kind = 'resume',"
                f" body = %s, due_at = {_NOW}, note = %s WHERE id = %s",
                (_CONTINUE, note[:500], submission_id),
            )
            self._notify()

    def counts(self) -> dict[str, int]:
        """Submissions by state."""
        return {
            str(r[0]): int(r[1])
            for r in self._rows("SELECT state, COUNT(*) FROM submissions GROUP BY state")
        }

    # -- workers ----------------------------------------------------------------------------

    def register(self, worker_id: str, concurrency: int) -> None:
        """Record a live worker."""
        self._rows(
            "INSERT INTO workers (worker_id, started_at, heartbeat_at, concurrency, state)"
            f" VALUES (%s, {_NOW}, {_NOW}, %s, 'running') ON CONFLICT (worker_id) DO UPDATE"
            " SET heartbeat_at = excluded.heartbeat_at, state = 'running'",
            (worker_id, concurrency),
        )

    def heartbeat(self, worker_id: str, holders: list[str], ttl: float, state: str) -> bool:
        """Note ``worker_id`` alive and renew every lease its drivers (``holders``) hold, in
        one statement (one transaction); returns whether :meth:`reclaim_orphans` has work now
        (a dead worker, a submission taken by a worker that is dead or gone, a stranded run),
        so a beat with nothing to give back costs one round trip."""
        rows = self._rows(
            f"WITH beat AS (UPDATE workers SET heartbeat_at = {_NOW}, state = %s"
            " WHERE worker_id = %s RETURNING 1),"
            f" renewed AS (UPDATE leases SET expires_at = {_NOW} + %s WHERE holder = ANY(%s)"
            " RETURNING 1)"
            f" SELECT EXISTS (SELECT 1 FROM workers WHERE heartbeat_at <= {_NOW} - %s)"
            " OR EXISTS (SELECT 1 FROM submissions s WHERE s.state = 'taken' AND NOT EXISTS"
            " (SELECT 1 FROM workers w WHERE w.worker_id = s.taken_by"
            f" AND w.heartbeat_at > {_NOW} - %s))"
            f" OR EXISTS (SELECT 1 FROM runs r WHERE {_STRANDED})",
            (state, worker_id, ttl, holders, DEAD_AFTER_SECONDS, DEAD_AFTER_SECONDS, MAX_ATTEMPTS),
        )
        return bool(rows[0][0])

    def leave(self, worker_id: str) -> None:
        """Remove a worker that stopped cleanly."""
        self._rows("DELETE FROM workers WHERE worker_id = %s", (worker_id,))

    def workers(self) -> list[dict[str, Any]]:
        """Live workers (heartbeat within :data:`DEAD_AFTER_SECONDS`), each with the runs its
        taken submissions hold."""
        rows = self._rows(
            f"SELECT w.worker_id, w.concurrency, w.state, {_NOW} - w.heartbeat_at,"
            " COALESCE(array_agg(s.run_id) FILTER (WHERE s.run_id IS NOT NULL), '{}')"
            " FROM workers w LEFT JOIN submissions s ON s.taken_by = w.worker_id"
            " AND s.state = 'taken'"
            f" WHERE w.heartbeat_at > {_NOW} - %s GROUP BY w.worker_id ORDER BY w.worker_id",
            (DEAD_AFTER_SECONDS,),
        )
        return [
            {
                "worker_id": r[0],
                "concurrency": int(r[1]),
                "state": r[2],
                "heartbeat_age_seconds": round(float(r[3]), 3),
                "holds": sorted(r[4]),
            }
            for r in rows
        ]

    def reclaim_orphans(self) -> int:
        """Give the dead workers' taken submissions back (``resume {}`` of a run that exists,
        the same ``start`` otherwise; ``failed`` after :data:`MAX_DEATHS`); forget the dead
        workers; queue ``resume {}`` for stranded runs (``running``, no live lease, no work
        queued or taken: a driver died with no submission left to give back, a person's
        ``proctor run`` killed included), unless :data:`MAX_ATTEMPTS` of its submissions
        have failed already (a run a bug strands every time it is driven is left for a person
        to resume, not queued again every heartbeat). Returns how many went back."""
        with self.store.transaction():
            dead = [
                str(r[0])
                for r in self._rows(
                    f"SELECT worker_id FROM workers WHERE heartbeat_at <= {_NOW} - %s"
                    " FOR UPDATE SKIP LOCKED",
                    (DEAD_AFTER_SECONDS,),
                )
            ]
            taken = self._rows(
                "SELECT s.id, s.kind, EXISTS (SELECT 1 FROM runs r WHERE r.run_id = s.run_id),"
                " s.attempts FROM submissions s WHERE s.state = 'taken' AND (s.taken_by = ANY(%s)"
                " OR NOT EXISTS (SELECT 1 FROM workers w WHERE w.worker_id = s.taken_by))"
                " FOR UPDATE OF s SKIP LOCKED",
                (dead,),
            )
            for sid, kind, exists, attempts in taken:
                if int(attempts) >= MAX_DEATHS:
                    self.finish(int(sid), "failed", "its workers died too often")
                    continue
                if kind == "start" and not exists:
                    self._rows(
                        "UPDATE submissions SET state = 'queued', taken_by = NULL WHERE id = %s",
                        (sid,),
                    )
                else:
                    self.requeue_as_resume(int(sid), "its worker died; any worker continues")
            if dead:
                self._rows("DELETE FROM workers WHERE worker_id = ANY(%s)", (dead,))
            stranded = self._rows(
                "INSERT INTO submissions (kind, run_id, body, due_at)"
                f" SELECT 'resume', r.run_id, %s, {_NOW} FROM runs r WHERE {_STRANDED}"
                " LIMIT 100 RETURNING id",
                (_CONTINUE, MAX_ATTEMPTS),
            )
            if taken or stranded:
                self._notify()
        return len(taken) + len(stranded)

"""How a PostgreSQL write becomes one statement: its fence, and whether its commit waits for the
WAL flush.

The fence: a driver's write for a run reads the run's lease row ``FOR SHARE`` in the statement's
first part (a takeover's update of the row waits until the write commits) and writes nothing
under a stale epoch (:mod:`.fencing`), so a write and its fence are one round trip.

The flush. A commit waits until PostgreSQL has flushed the write-ahead log to disk (4-6 ms on a
busy disk, and a run makes about twenty), unless the transaction says ``synchronous_commit =
off``: then it returns at once and the WAL writer flushes it within a fraction of a second. What
such a commit risks is narrow, and this store takes the risk only where the crash rules allow:

- a killed *driver* loses nothing either way: the commit happened in the server;
- a crash of the database *server* (or its machine) loses it only if no flushed commit came
  after it, since the log is written and flushed in order: any later flushed commit, by any
  process, makes every earlier commit durable first;
- so a write that its driver follows, before any effect and before telling anyone, with a
  flushed commit of its own, can only be lost together with everything after it, which is what
  a driver dying just before that write leaves, a case every write already survives.

This mirrors the SQLite store's ``synchronous=NORMAL`` (the others there are ``FULL``). Commits
that wait for the flush: a claim (durable before its effect), decisions (before the run moves
on), a step that settled an effect's claim, used a decision or drove child runs, a journal entry
(before a file is touched), a lease taken (its epoch must only grow: a lost takeover would let
two drivers share an epoch), a new run (with its first lease), a pause and a seal (what a person
or a caller is told), the queue's takes, finishes and submissions, and every explicit
transaction. Commits that do not, when they are their own transaction:

- a claimed call's process tree, noted once its program started: lost, a taker on the same host
  ends every descendant of the claiming driver instead, as when the driver died before noting
  it (:func:`proctor.runtime.engine.lease.end_lapsed_effect`); its step's record follows;
- settling a claimed call: lost, the claim is unsettled again and reconciled on the next drive
  (read back, rolled back or asked about, never sent again silently); its step's record, which
  waits for the flush, follows before the run goes on;
- a call recorded with no effect, and the record of a step that changed nothing: lost, the step
  runs again and changes nothing again;
- an event: a line of the run's history, followed by the driver's next flushed commit;
- a run set ``running`` again: followed by the record of the step that uses its decision;
- a request asked for the first time: followed by the pause that asks it (flushed); a person
  who answers it meanwhile records a decision, which is flushed after it;
- a lease renewed or released: lost, the lease ends when it would have without the renewal, or
  looks held until it expires; every write of the run is fenced by its epoch all the same.
"""

from __future__ import annotations

import json
from typing import Any

from proctor.runtime.records.rows import REQ_COLS, dumps

__all__ = [
    "ASKED_BEFORE",
    "QUICK",
    "QUICK_GATE",
    "SeenData",
    "closing",
    "fenced_statement",
    "merged_update",
    "unflushed",
]

QUICK = "quick AS (SELECT set_config('synchronous_commit', 'off', true))"
"""A CTE whose reading makes the statement's own transaction commit without the flush."""

QUICK_GATE = "EXISTS (SELECT 1 FROM quick)"
"""The condition that reads :data:`QUICK` (always true)."""


def fenced_statement(
    run_id: str,
    epoch: int | None,
    writes: list[tuple[str, tuple[Any, ...]]],
    *,
    quick: bool,
    result: str = "w0",
) -> tuple[str, tuple[Any, ...]]:
    """One statement of ``writes`` (each ``(sql, params)``, ``{ok}`` where the fence's condition
    goes; the ``n``-th is the CTE ``w<n>``, which a later one may read), fenced under ``epoch``
    (``None``: not a driver's write) and, when ``quick``, committed without the flush. Its rows:
    the lease row's epoch first when fenced, then the columns of ``result`` (the first write's
    unless named; null when it has no row); at least one row, so the commit mode is always
    read."""
    # the epoch is a parameter, never a literal: one statement text whatever the epoch, so a
    # connection's prepared statement serves every run (see .postgres_pool)
    ok = "true" if epoch is None else "EXISTS (SELECT 1 FROM fence WHERE mine)"
    ctes = [f"w{n} AS ({text.format(ok=ok)})" for n, (text, _) in enumerate(writes)]
    values = tuple(v for _, part in writes for v in part)
    if quick:
        ctes.insert(0, QUICK)
    gate = f" WHERE {QUICK_GATE}" if quick else ""
    if epoch is None:
        sql = f"WITH {', '.join(ctes)} SELECT {result}.* FROM (SELECT 1) one"
        return f"{sql} LEFT JOIN {result} ON true{gate}", values
    return (
        "WITH fence AS MATERIALIZED (SELECT epoch, epoch = %s::bigint AS mine FROM leases"
        f" WHERE run_id = %s FOR SHARE), {', '.join(ctes)} SELECT (SELECT epoch FROM fence),"
        f" {result}.* FROM (SELECT 1) one LEFT JOIN {result} ON true{gate}",
        (epoch, run_id, *values),
    )


def unflushed(sql: str, quick: bool) -> str:
    """The write ``sql`` (ending in its ``WHERE`` clause), committed without the flush when
    ``quick`` (the statement must be its own transaction)."""
    return f"WITH {QUICK} {sql} AND {QUICK_GATE}" if quick else sql


ASKED_BEFORE = (
    "SELECT true, * FROM w0 UNION ALL SELECT false, " + REQ_COLS + " FROM requests"
    " WHERE run_id = %s AND address = %s AND NOT EXISTS (SELECT 1 FROM w0)"
)
"""After a request's insert (``w0``, returning :data:`.rows.REQ_COLS`): the row it made,
marked new, or the row asked before, as recorded (none: made by another meanwhile)."""


class SeenData(dict[str, str]):
    """Each run's data text as a store last read or wrote it, for :func:`merged_update`; a
    few runs' (a session drives a few), forgotten all at once past that."""

    def keep(self, run_id: str, text: str) -> None:
        if len(self) >= 64 and run_id not in self:
            self.clear()
        self[run_id] = text


_MERGE = (
    "UPDATE runs SET status = COALESCE(%s, status), outcome = COALESCE(%s, outcome),"
    " receipt_id = COALESCE(%s, receipt_id), data = %s, updated_at = %s WHERE run_id = %s"
    " AND data = %s AND {ok} RETURNING 1"
)


def merged_update(
    run_id: str,
    base: str,
    status: str | None,
    outcome: str | None,
    receipt_id: str | None,
    data: dict[str, Any] | None,
    *,
    at: str,
) -> tuple[str, tuple[Any, ...]]:
    """The write of a run's update (the columns given, ``data``'s keys over the run's data)
    as one statement, computed on ``base``, the data text the store last read or wrote for the
    run: it writes (and returns a row) only while the row still holds exactly that text, so a
    write made meanwhile by anyone is never lost (the caller reads the row and merges again).
    PostgreSQL re-checks the condition on the newest row once a concurrent writer commits.
    The merged text is the fourth parameter."""
    merged = json.loads(base)
    merged.update(data or {})
    return _MERGE, (status or None, outcome, receipt_id, dumps(merged), at, run_id, base)


def closing(run_id: str, status: str | None) -> list[tuple[str, tuple[Any, ...]]]:
    """The write that goes with a seal's :func:`merged_update` (none for any other status):
    what the run leaves unanswered is closed, it waits on nothing now (only when the run's
    row was written: the merge's CTE is ``w0``)."""
    if status != "sealed":
        return []
    return [
        (
            "UPDATE requests SET closed = true WHERE run_id = %s AND state = 'open'"
            " AND EXISTS (SELECT 1 FROM w0) AND {ok}",
            (run_id,),
        )
    ]

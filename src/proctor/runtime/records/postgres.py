"""The PostgreSQL run store, used when ``PROCTOR_DATABASE_URL`` names a ``postgresql://`` database.

Many workers, on many machines, share one database: each process keeps one connection pool per
database (psycopg 3 and psycopg-pool). Every method is one transaction of its own unless it runs
inside :meth:`PostgresRunStore.transaction` (re-entrant, per thread). Lease expiry is measured on
the database's clock, so machines whose clocks disagree still agree on when a lease ran out.

A claim, a decision, a step that settled an effect, a lease taken, a pause and a seal return
only once PostgreSQL has made them durable, so each is on disk before the effect or the next
step, as on SQLite; a few writes that their driver's next flushed commit covers do not wait for
the flush (:mod:`.postgres_writes` says which and why).

Every write for a run whose lease this store's process took is fenced (:mod:`.fencing`): in
the same transaction, the lease row is read ``FOR SHARE`` (a takeover's update of it waits until
the write commits) and a stale epoch is refused ``lease_lost`` before anything is written. Most
writes are one statement whose first part (a CTE) reads the lease row, so a write and its fence
are one round trip (:meth:`PostgresRunStore._fenced_rows`).

Refused: a URL psycopg cannot parse, a server that cannot be reached or refuses the login
(``store_unreachable``), a schema newer than this proctor's (``store_schema_newer``). Messages
name the store as ``$PROCTOR_DATABASE_URL``, never by the URL (it may carry a password).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from proctor.errors import StoreError
from proctor.runtime.records import paged
from proctor.runtime.records.fencing import lease_lost, process_site
from proctor.runtime.records.postgres_journal import PostgresJournal
from proctor.runtime.records.postgres_leases import MAKE, NOW, TAKE
from proctor.runtime.records.postgres_pool import (
    begin,
    close_pools,
    ended_by_server,
    is_postgres_url,
    pool_for,
    store_error,
)
from proctor.runtime.records.postgres_writes import (
    ASKED_BEFORE,
    SeenData,
    closing,
    fenced_statement,
    merged_update,
    unflushed,
)
from proctor.runtime.records.rows import (
    CALL_COLS,
    REQ_COLS,
    RUN_COLS,
    RUN_HEAD_COLS,
    RUN_WIDTH,
    call_from_row,
    call_params,
    dumps,
    now,
    request_from_row,
    run_from_row,
)
from proctor.runtime.records.runs import (
    CallRecord,
    LeaseRecord,
    PendingRequest,
    RequestRecord,
    RunCounts,
    RunRecord,
)

__all__ = ["PostgresRunStore", "close_pools", "is_postgres_url"]


class PostgresRunStore(PostgresJournal, paged.PagedReads):
    """A :class:`proctor.runtime.records.runs.RunStore` in a PostgreSQL database."""

    def __init__(self, url: str, *, shown: str = "$PROCTOR_DATABASE_URL") -> None:
        """Open the store at ``url`` (migrating its schema once per process).

        Raises:
            StoreError: ``store_unreachable``, ``store_schema_newer``.
        """
        if not is_postgres_url(url):
            raise StoreError(
                f"the run store {shown} is not a postgresql:// URL", code="store_unreachable"
            )
        self.url = url
        self.shown = shown
        self._pool = pool_for(url, shown)
        self._local = threading.local()
        # the lease epoch this process took, by run (see .fencing); kept after a loss, so
        # every later write for the run is refused too
        self._fences: dict[str, int] = {}
        self._taken: dict[str, LeaseRecord] = {}  # the lease as its last take left it, by run
        self._effects: set[str] = set()  # runs with a claim settled since their last step
        # each run's data as this store last read or wrote it: a merge onto it is one
        # statement, written only while the row still holds it (see update_run)
        self._data = SeenData()

    # -- connections and transactions -------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One commit for every write inside; nested uses (same thread) join the outer one.

        ``BEGIN`` goes with the first statement and ``COMMIT`` alone (:func:`.postgres_pool.
        begin`). A pooled connection the server ended while it sat idle fails at that first
        statement, before anything ran: the transaction begins again once on a new connection.
        A failure at ``COMMIT`` is the store's error (``store_unreachable``), never retried: the
        commit may have happened.
        """
        local = self._local
        if getattr(local, "conn", None) is not None:
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        import psycopg
        from psycopg_pool import PoolTimeout

        local.stack, local.sent = self._begin(), False  # nothing of it reached the server yet
        raised: BaseException | None = None
        local.released = []  # runs whose fence goes once their release commits
        local.created = None  # the run this transaction created (see acquire_lease)
        try:
            with contextlib.ExitStack() as current:  # the one begun last (see _rows)
                current.push(lambda *exc: local.stack.__exit__(*exc))
                local.conn, local.depth = local.stack.conn, 1
                try:
                    yield
                except BaseException as exc:
                    raised = exc  # the body's own error reaches its caller as it is
                    raise
                finally:
                    local.conn, local.depth = None, 0
        except (psycopg.Error, PoolTimeout) as exc:
            if exc is raised:
                raise
            # COMMIT (or ROLLBACK) runs here, outside any statement: a connection the server
            # closed fails it, and the caller sees the store's error, never the driver's
            raise self._error(exc) from exc
        finally:
            released, local.released = local.released, []
        for run_id in released:
            self._fences.pop(run_id, None)
            self._taken.pop(run_id, None)

    def _begin(self) -> Any:
        """:func:`.postgres_pool.begin`; ``store_unreachable`` when no connection can be had."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            return begin(self._pool)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._error(exc) from exc

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """The thread's transaction connection, or one from the pool (for :mod:`fleet`).

        Raises:
            StoreError: ``store_unreachable`` when no connection can be had (the pool's
                wait ran out, or a connection the server closed failed on its way back).
        """
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection() as pooled:
                yield pooled
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._error(exc) from exc

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg
        from psycopg_pool import PoolTimeout

        alone = getattr(self._local, "conn", None) is None
        for attempt in (0, 1):
            try:
                with self.connection() as conn:
                    # prepared on first use (.postgres_pool), but for a text of several
                    # statements, which PostgreSQL cannot prepare
                    cur = conn.execute(sql, params, prepare=False if ";" in sql else None)
                    if not alone:  # a transaction's, pipelined: sent (and answered) now
                        self._local.stack.pipe.sync()
                    return list(cur.fetchall()) if cur.description is not None else []
            except (psycopg.Error, PoolTimeout, StoreError) as exc:
                cause = exc.__cause__ if isinstance(exc, StoreError) else exc
                # the server ended the pooled connection before this statement reached it
                # (it had sat idle): nothing ran, so it runs once more on a new connection;
                # a transaction's first statement (its BEGIN with it) on any lost connection,
                # in a transaction begun anew: nothing of it was committed, nor read
                first = not alone and not self._local.sent
                lost = ended_by_server(cause) or (first and self._local.conn.broken)
                if (alone or first) and attempt == 0 and lost:
                    if first:
                        dead, self._local.stack = self._local.stack, self._begin()
                        self._local.conn = self._local.stack.conn
                        with contextlib.suppress(Exception):  # the pool drops it
                            dead.close()
                    continue
                if isinstance(exc, StoreError):
                    raise
                raise self._error(exc) from exc
            finally:
                if not alone:
                    self._local.sent = True
        raise AssertionError("unreachable")

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        rows = self._rows(sql, params)
        return rows[0] if rows else None

    def _fence(self, run_id: str) -> int | None:
        """Inside a transaction: the epoch this process writes ``run_id`` under (``None``: it
        holds no lease of the run, the write is not a driver's). The lease row is locked
        ``FOR SHARE`` until the transaction ends, so no takeover commits between the check and
        the write.

        Raises:
            LeaseLost: the lease row carries another epoch now (nothing is written).
        """
        epoch = self._fences.get(run_id)
        if epoch is None:
            return None
        row = self._one("SELECT epoch FROM leases WHERE run_id = %s FOR SHARE", (run_id,))
        current = None if row is None else int(row[0])
        if current != epoch:
            raise lease_lost(run_id, epoch, current)
        return epoch

    def _fenced_rows(
        self,
        run_id: str,
        sql: str,
        params: tuple[Any, ...],
        *also: tuple[str, tuple[Any, ...]],
        quick: bool = False,
        result: str = "w0",
    ) -> list[Any]:
        """``sql`` (and the writes ``also``, each ``(sql, params)``) for ``run_id`` as one
        statement, one round trip (:func:`.postgres_writes.fenced_statement`); fenced when this
        process holds the run's lease. Each write puts ``{ok}`` where the fence's condition
        goes; ``sql`` returns a non-null first column for each row it writes, and those rows
        are returned. ``quick``: when the statement is its own transaction, its commit does not
        wait for the WAL flush (only for the writes :mod:`.postgres_writes` names).

        Raises:
            LeaseLost: the lease row carries another epoch now (nothing is written).
        """
        epoch = self._fences.get(run_id)
        quick = quick and getattr(self._local, "conn", None) is None
        if epoch is None and not also and not quick:
            return self._rows(sql.format(ok="true"), params)
        writes = [(sql, params), *also]
        text, values = fenced_statement(run_id, epoch, writes, quick=quick, result=result)
        rows = self._rows(text, values)
        if epoch is None:
            return [r for r in rows if r[0] is not None]
        current = None if rows[0][0] is None else int(rows[0][0])
        if current != epoch:
            raise lease_lost(run_id, epoch, current)
        return [r[1:] for r in rows if r[1] is not None]

    def _error(self, exc: Exception) -> StoreError:
        return store_error(exc, self.url, self.shown)

    # -- runs -------------------------------------------------------------------------------

    _RUN_COLS = RUN_COLS

    _run = staticmethod(run_from_row)

    def create_run(self, record: RunRecord) -> RunRecord:
        import psycopg

        at, r = now(), record
        head = (r.run_id, r.skill, r.method, r.status, r.outcome, r.receipt_id)
        text = dumps(r.data)
        try:  # the run and its counts row: one statement, one round trip
            row = self._one(
                "WITH made AS (INSERT INTO runs (run_id, skill, method, status, outcome,"
                " receipt_id, created_at, updated_at, data, identity)"
                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) RETURNING cursor),"
                " counted AS (INSERT INTO run_counts (run_id) VALUES (%s) ON CONFLICT DO NOTHING)"
                " SELECT cursor FROM made",
                (*head, at, at, text, r.identity, r.run_id),
            )
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise StoreError(f"a run with id {record.run_id} already exists") from exc
            raise
        if getattr(self._local, "conn", None) is not None:  # its lease is taken next, likely
            self._local.created = record.run_id
        record.cursor = int(row[0]) if row else 0
        record.created_at = record.updated_at = at
        self._data.keep(record.run_id, text)
        return record

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self._one(f"SELECT {self._RUN_COLS} FROM runs WHERE run_id = %s", (run_id,))
        if row is None:
            return None
        self._data.keep(run_id, row[9])
        return self._run(row)

    def find_reusable(self, reuse_key: str, *, since: str) -> RunRecord | None:
        row = self._one(
            f"SELECT {self._RUN_COLS} FROM runs WHERE status = 'sealed'"
            " AND outcome = 'completed' AND ((data::jsonb) ->> 'reuse_key') = %s"
            " AND updated_at >= %s ORDER BY cursor DESC LIMIT 1",
            (reuse_key, since),
        )
        return None if row is None else self._run(row)

    def update_run(
        self,
        run_id: str,
        *,
        status: str | None = None,
        outcome: str | None = None,
        receipt_id: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        if data is None and status != "sealed":  # nothing to merge: one statement
            done = self._fenced_rows(
                run_id,
                "UPDATE runs SET status = COALESCE(%s, status), outcome = COALESCE(%s, outcome),"
                " receipt_id = COALESCE(%s, receipt_id), updated_at = %s WHERE run_id = %s"
                " AND {ok} RETURNING 1",
                (status, outcome, receipt_id, now(), run_id),
                quick=status == "running",  # see .postgres_writes
            )
            if not done:
                raise StoreError(f"no run with id {run_id}")
            return
        base = self._data.get(run_id)  # the data this store last saw: one statement
        if base is not None and self._merge(run_id, base, status, outcome, receipt_id, data):
            return
        epoch = self._fences.get(run_id)  # else (the row holds other data now): read it
        with self.transaction():
            # the run's row FOR UPDATE and, for a driver, its lease row FOR SHARE (held until
            # the commit, as _fence holds it): one round trip
            row = self._one(
                "WITH fence AS MATERIALIZED (SELECT epoch FROM leases WHERE run_id = %s"
                " FOR SHARE) SELECT data, (SELECT epoch FROM fence) FROM runs"
                " WHERE run_id = %s FOR UPDATE OF runs",
                (run_id if epoch is not None else "", run_id),
            )
            if row is None:
                raise StoreError(f"no run with id {run_id}")
            if epoch is not None and row[-1] != epoch:
                raise lease_lost(run_id, epoch, None if row[-1] is None else int(row[-1]))
            if not self._merge(run_id, str(row[0]), status, outcome, receipt_id, data):
                raise StoreError(f"no run with id {run_id}")  # cannot be: the row is locked

    def _merge(self, run_id: str, base: str, *update: Any) -> bool:
        """Write ``update`` (status, outcome, receipt id, data: as :meth:`update_run`) onto
        ``base`` only while the run's row still holds it; whether it did (one statement)."""
        text, params = merged_update(run_id, base, *update, at=now())
        if not self._fenced_rows(run_id, text, params, *closing(run_id, update[0])):
            return False
        self._data.keep(run_id, params[3])
        return True

    def list_runs(
        self, *, after: int | None = None, limit: int = 50, data: bool = True
    ) -> list[RunRecord]:
        cols = self._RUN_COLS if data else RUN_HEAD_COLS
        if after is None:
            rows = self._rows(f"SELECT {cols} FROM runs ORDER BY cursor DESC LIMIT %s", (limit,))
        else:
            rows = self._rows(
                f"SELECT {cols} FROM runs WHERE cursor < %s ORDER BY cursor DESC LIMIT %s",
                (after, limit),
            )
        return [self._run(r) for r in rows]

    # -- events -----------------------------------------------------------------------------

    def append_event(self, run_id: str, kind: str, body: dict[str, Any]) -> int:
        rows = self._fenced_rows(
            run_id,
            "INSERT INTO events (run_id, seq, at, kind, body) SELECT %s,"
            " COALESCE(MAX(seq), 0) + 1, %s, %s, %s FROM events WHERE run_id = %s HAVING {ok}"
            " RETURNING seq",
            (run_id, now(), kind, dumps(body), run_id),
            quick=True,  # see .postgres_writes
        )
        return int(rows[0][0]) if rows else 0

    def events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT seq, at, kind, body FROM events WHERE run_id = %s AND seq > %s"
            " ORDER BY seq LIMIT %s",  # LIMIT NULL: no limit
            (run_id, after, limit),
        )
        return [{"seq": r[0], "at": r[1], "kind": r[2], "body": json.loads(r[3])} for r in rows]

    # -- calls ------------------------------------------------------------------------------

    _CALL_INSERT = (
        "INSERT INTO calls (run_id, call_id, step_id, tool, state, args_digest, outcome, result,"
        " idempotency_key) SELECT %s,%s,%s,%s,%s,%s,%s,%s,%s WHERE {ok} RETURNING 1"
    )
    _CALL_COLS = CALL_COLS

    _call_params = staticmethod(call_params)

    _call = staticmethod(call_from_row)

    _CLAIM_INSERT = (
        "INSERT INTO calls (run_id, call_id, step_id, tool, state, args_digest, outcome, result,"
        " idempotency_key, epoch, site) SELECT %s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s WHERE {ok}"
        " RETURNING 1"
    )

    def claim_call(self, call: CallRecord) -> None:
        call.state = "claimed"
        if call.site is None:
            call.site = process_site()
        epoch = self._fences.get(call.run_id)
        params = (*self._call_params(call), epoch, dumps(call.site))
        self._fenced_rows(call.run_id, self._CLAIM_INSERT, params)

    def settle_call(
        self, run_id: str, call_id: str, outcome: str, result: Any, *, reconciled: bool = False
    ) -> None:
        epoch = self._fences.get(run_id)
        # a claim moves to settled once, by the epoch that claimed it (or, reconciled, by
        # the lease's current holder deciding what an earlier holder's claim means)
        mine = "" if reconciled else " AND epoch IS NOT DISTINCT FROM %s"
        params = (outcome, dumps(result), run_id, call_id) + (() if reconciled else (epoch,))
        done = self._fenced_rows(
            run_id,
            "UPDATE calls SET state = 'settled', outcome = %s, result = %s"
            f" WHERE run_id = %s AND call_id = %s AND state = 'claimed'{mine} AND {{ok}}"
            " RETURNING 1",
            params,
            quick=not reconciled,  # see .postgres_writes
        )
        self._effects.add(run_id)  # its step's record waits for the flush
        if len(done) != 1:
            raise StoreError(
                f"call {call_id} of run {run_id} is not claimed by this driver, so it was"
                " not settled",
                code="call_not_claimed",
            )

    def note_call_site(self, run_id: str, call_id: str, tree: dict[str, float]) -> None:
        self._fenced_rows(
            run_id,
            "UPDATE calls SET site = %s WHERE run_id = %s AND call_id = %s AND state = 'claimed'"
            " AND {ok} RETURNING 1",
            (dumps({**process_site(), "tree": tree}), run_id, call_id),
            quick=True,  # see .postgres_writes
        )

    def record_call(self, call: CallRecord) -> None:
        call.state = "settled"
        # no effect: see .postgres_writes
        self._fenced_rows(call.run_id, self._CALL_INSERT, self._call_params(call), quick=True)

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        row = self._one(
            f"SELECT {self._CALL_COLS} FROM calls WHERE run_id = %s AND call_id = %s",
            (run_id, call_id),
        )
        return None if row is None else self._call(row)

    def calls(self, run_id: str) -> list[CallRecord]:
        rows = self._rows(
            f"SELECT {self._CALL_COLS} FROM calls WHERE run_id = %s ORDER BY ord", (run_id,)
        )
        return [self._call(r) for r in rows]

    _dialect = "postgres"

    def _page(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._rows(sql, params)

    def step_calls(self, run_id: str, step_id: str | None) -> list[CallRecord]:
        where = "step_id IS NULL" if step_id is None else "step_id = %s"
        params = (run_id,) if step_id is None else (run_id, step_id)
        rows = self._rows(
            f"SELECT {self._CALL_COLS} FROM calls WHERE run_id = %s AND {where} ORDER BY ord",
            params,
        )
        return [self._call(r) for r in rows]

    def run_counts(self, run_id: str) -> RunCounts:
        query = "SELECT calls, admitted, steps FROM run_counts WHERE run_id = %s"
        row = self._one(query, (run_id,))
        if row is None:
            with self.transaction():
                self._rows(
                    "INSERT INTO run_counts (run_id, calls, admitted, steps) SELECT %s,"
                    " (SELECT COUNT(*) FROM calls WHERE run_id = %s),"
                    " (SELECT COUNT(*) FROM calls WHERE run_id = %s"
                    "  AND outcome IS DISTINCT FROM 'refused'),"
                    " (SELECT COUNT(*) FROM steps WHERE run_id = %s) ON CONFLICT DO NOTHING",
                    (run_id, run_id, run_id, run_id),
                )
            row = self._one(query, (run_id,))
        assert row is not None
        return RunCounts(calls=int(row[0]), admitted=int(row[1]), steps=int(row[2]))

    def find_idempotent(self, key: str) -> CallRecord | None:
        row = self._one(
            f"SELECT {self._CALL_COLS} FROM calls WHERE idempotency_key = %s"
            " AND state = 'settled' AND outcome = 'completed' ORDER BY ord LIMIT 1",
            (key,),
        )
        return None if row is None else self._call(row)

    # -- steps, requests, decisions ---------------------------------------------------------

    def settle_step(
        self, run_id: str, step_id: str, body: dict[str, Any], *, used: list[str] | None = None
    ) -> None:
        import psycopg

        # a step that settled an effect's claim, used a decision or drove child runs waits for
        # the flush; one that changed nothing does not (see .postgres_writes)
        changed = bool(used) or bool(body.get("child_runs")) or run_id in self._effects
        try:
            self._fenced_rows(
                run_id,
                "INSERT INTO steps (run_id, step_id, body) SELECT %s,%s,%s WHERE {ok} RETURNING 1",
                (run_id, step_id, dumps(body)),
                *(
                    [
                        (
                            "UPDATE requests SET state = 'used' WHERE run_id = %s"
                            " AND address = ANY(%s) AND decision IS NOT NULL AND {ok} RETURNING 1",
                            (run_id, list(used)),
                        )
                    ]
                    if used
                    else []
                ),
                quick=not changed,
            )
            self._effects.discard(run_id)
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise StoreError(f"step {step_id} of run {run_id} already settled") from exc
            raise

    def step_records(self, run_id: str) -> dict[str, dict[str, Any]]:
        rows = self._rows(
            "SELECT step_id, body FROM steps WHERE run_id = %s ORDER BY ord", (run_id,)
        )
        return {r[0]: json.loads(r[1]) for r in rows}

    _REQ_COLS = REQ_COLS

    _request = staticmethod(request_from_row)

    def put_request(self, request: RequestRecord) -> RequestRecord:
        r = request
        values = (r.run_id, r.address, r.kind, r.request_digest, dumps(r.body))
        # one statement: a request asked for the first time, its row (and its fence); one
        # asked before, the row as recorded (returned as it is when it asks the same)
        found = self._fenced_rows(
            r.run_id,
            "INSERT INTO requests (run_id, address, kind, request_digest, body, state)"
            " SELECT %s,%s,%s,%s,%s, 'open' WHERE {ok}"
            f" ON CONFLICT (run_id, address) DO NOTHING RETURNING {self._REQ_COLS}",
            values,
            (ASKED_BEFORE, (r.run_id, r.address)),
            result="w1",
            quick=True,  # the pause that follows is flushed: see .postgres_writes
        )
        if found and found[0][0]:  # asked for the first time
            request.cursor = int(found[0][-1])
        elif found and found[0][4] == r.request_digest:
            return self._request(found[0][1:])
        else:
            with self.transaction():  # asked before, with other content (or just now)
                self._fence(r.run_id)
                row = self._one(
                    f"SELECT {self._REQ_COLS} FROM requests WHERE run_id = %s AND address = %s"
                    " FOR UPDATE",
                    (r.run_id, r.address),
                )
                if row is None:  # gone since it conflicted: asked afresh
                    made = self._one(
                        "INSERT INTO requests (run_id, address, kind, request_digest, body,"
                        " state) VALUES (%s,%s,%s,%s,%s, 'open') RETURNING ord",
                        values,
                    )
                    request.cursor = int(made[0]) if made else 0
                else:
                    current = self._request(row)
                    if current.request_digest == r.request_digest:
                        return current
                    self._rows(
                        "UPDATE requests SET kind = %s, request_digest = %s, body = %s,"
                        " state = 'open', decision = NULL WHERE run_id = %s AND address = %s",
                        (r.kind, r.request_digest, dumps(r.body), r.run_id, r.address),
                    )
                    request.cursor = current.cursor
        request.state, request.decision = "open", None
        return request

    def requests(self, run_id: str) -> list[RequestRecord]:
        rows = self._rows(
            f"SELECT {self._REQ_COLS} FROM requests WHERE run_id = %s ORDER BY ord", (run_id,)
        )
        return [self._request(r) for r in rows]

    def request(self, run_id: str, address: str) -> RequestRecord | None:
        row = self._one(
            f"SELECT {self._REQ_COLS} FROM requests WHERE run_id = %s AND address = %s",
            (run_id, address),
        )
        return None if row is None else self._request(row)

    def pending_requests(
        self, *, after: int | None = None, limit: int = 50
    ) -> list[PendingRequest]:
        run_cols = ", ".join(f"r.{c.strip()}" for c in self._RUN_COLS.split(","))
        req_cols = ", ".join(f"q.{c.strip()}" for c in self._REQ_COLS.split(","))
        rows = self._rows(
            f"SELECT {run_cols}, {req_cols} FROM requests q"
            " JOIN runs r ON r.run_id = q.run_id WHERE q.state = 'open' AND NOT q.closed"
            " AND q.ord > %s AND r.status != 'sealed' ORDER BY q.ord LIMIT %s",
            (after or 0, limit),
        )
        return [
            PendingRequest(self._run(row[:RUN_WIDTH]), self._request(row[RUN_WIDTH:]))
            for row in rows
        ]

    def record_decisions(self, run_id: str, decisions: dict[str, dict[str, Any]]) -> None:
        self._fenced_rows(
            run_id,
            "UPDATE requests SET state = 'decided', decision = d.decision FROM"
            " unnest(%s::text[], %s::text[]) AS d(address, decision) WHERE requests.run_id = %s"
            " AND requests.address = d.address AND requests.state != 'used' AND {ok} RETURNING 1",
            (list(decisions), [dumps(d) for d in decisions.values()], run_id),
        )

    # -- leases -----------------------------------------------------------------------------

    def acquire_lease(
        self, run_id: str, holder: str, ttl_seconds: float, *, steal_from: str | None = None
    ) -> str | None:
        """Take the lease row in one statement (:mod:`.postgres_leases`: a row another driver
        is taking at this moment, or writing under its fence, counts as held); expiry is on the
        database's clock. Taking it from another holder, or after a release, moves its epoch
        on by one."""
        if getattr(self._local, "created", None) == run_id:
            # the run was created in this transaction: its lease row is made now, unless one
            # was left from before (then it is read and taken as below)
            self._local.created = None
            if self._make_lease(run_id, holder, ttl_seconds):
                return None
        known = self._fences.get(run_id)
        row = self._one(
            TAKE,
            (run_id, holder, known, holder, steal_from, holder, ttl_seconds, holder, run_id),
        )
        if row is None:  # none yet (a run's start makes it), or one being taken or written
            if not self._make_lease(run_id, holder, ttl_seconds):
                return "(another driver, taking it now)"
            return None
        current, epoch, what, wrote = str(row[0]), int(row[1]), str(row[2]), int(row[3])
        if what == "held":
            return current
        if not wrote:  # the row went between its read and its write: cannot be, it was locked
            return "(another driver, taking it now)"
        if what == "take":
            taken_from = None if current in ("", holder) else current
            self._fences[run_id] = epoch + 1
            self._taken[run_id] = LeaseRecord(holder, epoch + 1, False, taken_from)
        return None

    def _make_lease(self, run_id: str, holder: str, ttl_seconds: float) -> bool:
        """Make ``run_id``'s lease row, held by ``holder`` at epoch 1; false (nothing written)
        when the run has one already."""
        if self._one(MAKE, (run_id, holder, ttl_seconds)) is None:
            return False
        self._fences[run_id] = 1
        self._taken[run_id] = LeaseRecord(holder, 1, False)
        return True

    def renew_lease(self, run_id: str, holder: str, ttl_seconds: float) -> bool:
        epoch = self._fences.get(run_id)
        if epoch is None:
            return False
        done = self._rows(  # alone, without the flush: see .postgres_writes
            unflushed(
                f"UPDATE leases SET expires_at = {NOW} + %s WHERE run_id = %s AND holder = %s"
                " AND epoch = %s",
                getattr(self._local, "conn", None) is None,
            )
            + " RETURNING 1",
            (ttl_seconds, run_id, holder, epoch),
        )
        return len(done) == 1

    def lease(self, run_id: str) -> LeaseRecord | None:
        row = self._one(
            f"SELECT holder, epoch, expires_at <= {NOW}, taken_from FROM leases WHERE run_id = %s",
            (run_id,),
        )
        if row is None:
            return None
        return LeaseRecord(str(row[0]), int(row[1]), bool(row[2]), row[3])

    def taken_lease(self, run_id: str) -> LeaseRecord | None:
        return self._taken.get(run_id)  # as acquire_lease wrote it: no round trip

    def release_lease(self, run_id: str, holder: str) -> None:
        """Give the lease up (the row stays: its epoch must only grow). Alone, it commits
        without the WAL flush (:mod:`.postgres_writes`)."""
        epoch = self._fences.get(run_id)
        quick = getattr(self._local, "conn", None) is None
        done = self._rows(
            unflushed(
                "UPDATE leases SET holder = '', expires_at = 0, taken_from = NULL"
                " WHERE run_id = %s AND holder = %s AND epoch IS NOT DISTINCT FROM %s",
                quick,
            )
            + " RETURNING 1",
            (run_id, holder, epoch),
        )
        if done and not quick:  # inside a transaction: its fence goes once it commits
            self._local.released.append(run_id)
        elif done:
            self._fences.pop(run_id, None)
            self._taken.pop(run_id, None)

    def close(self) -> None:
        """Nothing to release per store: the process's pool outlives it (see close_pools)."""

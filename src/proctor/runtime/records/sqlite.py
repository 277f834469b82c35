"""The SQLite run store (WAL mode) at ``.proctor/runs.sqlite``, checked when opened (see
:mod:`.store_file`: built whole when missing, a damaged file refused ``store_corrupt``).

Every write for a run whose lease this store's process took checks the lease's epoch first,
inside the same ``BEGIN IMMEDIATE`` transaction (SQLite's one writer at a time makes the check
and the write one act): a stale epoch is refused ``lease_lost`` (:mod:`.fencing`)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from proctor.errors import StoreError
from proctor.runtime.records import paged, store_file
from proctor.runtime.records.data_text import DataTexts
from proctor.runtime.records.fencing import lease_lost, process_site
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
    START_READS,
    CallRecord,
    PendingRequest,
    RequestRecord,
    RunCounts,
    RunRecord,
)
from proctor.runtime.records.sqlite_counts import COUNT_ROWS, NEW_COUNTS
from proctor.runtime.records.sqlite_journal import SQLiteJournal
from proctor.runtime.records.sqlite_leases import SQLiteLeases
from proctor.runtime.records.sqlite_schema import SCHEMA_VERSION, build_schema

_PENDING_MAX = 256
"""At most this many call records wait for a commit (a turn making many reads in a row)."""
_UNREAD = object()  # a lease row's epoch not read yet (see _stale)
_SEQS_MAX = 4096  # the newest event seq of at most this many runs is kept (see append_event)


class SQLiteRunStore(SQLiteLeases, SQLiteJournal, paged.PagedReads):
    """A :class:`proctor.runtime.records.runs.RunStore` in one SQLite file (WAL, synchronous=FULL
    for claims, so an effect's claim survives a power cut as well as a process kill)."""

    def __init__(self, path: Path, *, shown: str | None = None) -> None:
        """Open the store at ``path``; ``shown`` names it in messages (default: file name).

        Raises:
            StoreError: ``store_corrupt`` (nothing is written), ``store_unreadable`` (this
                process may not read or write it or its folder), ``store_error``.
        """
        self.path = path
        self.shown = shown = shown or path.name
        in_memory = str(path) == ":memory:"  # proctor test's throwaway store: no file at all
        try:
            if not in_memory:
                store_file.private_folders(path.parent)
                store_file.create_whole(path, shown, build_schema)
                store_file.refuse_damaged(path, shown)
                store_file.refuse_unwritable(path, shown)
            self._conn = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False, timeout=10.0
            )
        except OSError as exc:
            raise store_file.translate_os(exc, shown) from exc
        except sqlite3.Error as exc:
            raise store_file.translate(exc, shown) from exc
        try:
            self._open()
        except BaseException as exc:
            self._conn.close()
            if isinstance(exc, sqlite3.Error):
                raise store_file.translate(exc, shown) from exc
            raise
        self._lock = threading.RLock()
        self._depth = 0
        # Calls that changed nothing, waiting to join the next commit (see record_call).
        self._pending: list[tuple[Any, ...]] = []
        self._joined: list[tuple[Any, ...]] = []
        # the lease epoch this process took, by run (see .fencing); kept after a loss, so
        # every later write for the run is refused too
        self._fences: dict[str, int] = {}
        self._checked: set[str] = set()  # runs whose fence this transaction checked already
        self._created: set[str] = set()  # runs this transaction created (see acquire_lease)
        # the newest event seq of runs this store created or appended to, as committed (see
        # append_event: a guess checked by the events' key, forgotten on a rollback)
        self._seqs: dict[str, int] = {}
        self._texts = DataTexts()  # the data texts it wrote, member by member (see data_text)
        # runs with an effect's claim settled since their last synced step (see settle_step)
        self._effects: set[str] = set()
        # runs whose release waits for the commit to drop their fence (see release_lease)
        self._released: list[str] = []
        self._taken = {}  # the lease as its last take left it, by run (see taken_lease)

    def _open(self) -> None:
        """Switch to WAL and create the schema, safely beside other processes opening it.

        While another connection recovers or checkpoints the WAL (the last one to close does),
        SQLite may answer "database is locked" at once, without waiting on the busy timeout; so
        opening is retried with backoff for up to the timeout. The schema is created inside
        ``BEGIN IMMEDIATE`` and only when ``user_version`` says it is missing.
        """
        deadline = time.monotonic() + 10.0
        delay = 0.002
        while True:
            try:
                self._prepare()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.1)

    def _prepare(self) -> None:
        conn = self._conn
        # Reads only until the store is known to be whole and ours: nothing is written to it.
        if str(self.path) != ":memory:":
            store_file.check_once(conn, self.path, self.shown)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master").fetchall()}
        if version == 0 and names and "runs" not in names:  # older stores: runs, version 0
            raise store_file.damaged(self.shown, "it is another program's database")
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        # Checkpoint the WAL every ~16 MiB rather than every ~4 MiB: each checkpoint syncs the
        # database file, and recorded results (a read's content) make the WAL grow quickly.
        conn.execute("PRAGMA wal_autocheckpoint=4000")
        if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                build_schema(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- transactions -----------------------------------------------------------------------

    def transaction(self) -> _Transaction:
        """One commit for every write inside; nested uses join the outer transaction."""
        return _Transaction(self)

    def _exec(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            if (self._pending or self._joined) and not sql.startswith("PRAGMA"):
                return self._with_pending(sql, params)
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise store_file.translate_write(exc) from exc

    def _with_pending(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        """Run ``sql`` with the waiting call records written first, in the same transaction
        when there is one: a read's record commits with its step (or with the next effect's
        claim, so records keep their order). A rollback puts them back in the queue."""
        if sql == "ROLLBACK":
            self._pending[:0], self._joined = self._joined, []
            return self._conn.execute(sql, params)
        if sql == "COMMIT":
            self._joined = []
            return self._conn.execute(sql, params)
        if sql.startswith("BEGIN"):
            cursor = self._conn.execute(sql, params)
            try:
                self._join_pending()
            except BaseException:
                if self._conn.in_transaction:  # the transaction the caller asked for never began
                    self._conn.execute("ROLLBACK")
                self._joined = []
                raise
            return cursor
        if self._depth:
            self._join_pending()
            return self._conn.execute(sql, params)
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._join_pending()
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        finally:
            self._joined = []
        return self._conn.execute(sql, params)

    def _join_pending(self) -> None:
        # A batch that cannot be written (a call id recorded twice) is dropped whole, never
        # put back: it would fail every later statement. Its calls changed nothing.
        if self._pending:
            pending, self._pending = self._pending, []
            for run_id in {p[0] for p in pending if p[0] in self._fences}:
                if self._stale(run_id) is not None:  # a lost lease's records are not written
                    pending = [p for p in pending if p[0] != run_id]
            self._conn.executemany(self._CALL_INSERT, pending)
            self._joined.extend(pending)

    def flush(self) -> None:
        """Commit the waiting records of calls that changed nothing (see :meth:`record_call`)."""
        with self._lock:
            if self._pending and not self._depth:
                self._exec("BEGIN IMMEDIATE")  # writes the waiting records inside it
                self._exec("COMMIT")

    def _durable(self, sql: str, params: tuple[Any, ...], run_id: str | None = None) -> None:
        """One write that must survive a crash before the caller goes on (fenced for ``run_id``)."""
        with self._lock:
            if self._depth:
                self._fence(run_id)
                self._exec(sql, params)
                return
            self._exec("PRAGMA synchronous=FULL")
            try:
                with self.transaction():
                    self._fence(run_id)
                    self._exec(sql, params)
            finally:
                self._exec("PRAGMA synchronous=NORMAL")

    # -- fencing (see .fencing) ----------------------------------------------------------------

    def _stale(self, run_id: str, read: Any = _UNREAD) -> int | None:
        """Inside a write transaction: ``None`` when this process holds ``run_id``'s lease under
        its epoch (or has no fence), else the row's epoch (-1: none); read once a transaction
        (``read``: the lease row's epoch, or ``None`` for no row, already read in it)."""
        epoch = self._fences.get(run_id)
        if epoch is None or (self._depth and run_id in self._checked):
            return None
        if read is _UNREAD:
            row = self._conn.execute("SELECT epoch FROM leases WHERE run_id = ?", (run_id,))
            read = None if (got := row.fetchone()) is None else got[0]
        current = -1 if read is None else int(read)
        if current == epoch:  # (kept for a transaction only: each one clears it first)
            self._checked.add(run_id)
        return None if current == epoch else current

    def _fence(self, run_id: str | None, read: Any = _UNREAD) -> int | None:
        """Inside a write transaction: the epoch this process writes ``run_id`` under (``None``:
        it holds no lease of the run, the write is not a driver's); ``read`` as :meth:`_stale`.

        Raises:
            LeaseLost: the lease row carries another epoch now (the write must not happen).
        """
        if run_id is None:
            return None
        current = self._stale(run_id, read)
        epoch = self._fences.get(run_id)
        if current is not None and epoch is not None:
            # what this driver left waiting for a commit is not written either
            self._pending = [p for p in self._pending if p[0] != run_id]
            self._joined = [p for p in self._joined if p[0] != run_id]
            raise lease_lost(run_id, epoch, None if current < 0 else current)
        return epoch

    # -- runs -------------------------------------------------------------------------------

    def create_run(self, record: RunRecord) -> RunRecord:
        at = now()
        with self.transaction():
            try:
                cur = self._conn.execute(
                    "INSERT INTO runs (run_id, skill, method, status, outcome, receipt_id,"
                    " created_at, updated_at, data, identity) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        record.run_id,
                        record.skill,
                        record.method,
                        record.status,
                        record.outcome,
                        record.receipt_id,
                        at,
                        at,
                        self._texts.made(record.run_id, record.data),
                        record.identity,
                    ),
                )
                # its counters start with it (as PostgreSQL's do): a driver's first read of
                # them then needs no transaction of its own
                self._conn.execute(NEW_COUNTS, (record.run_id,))
                self._seqs[record.run_id] = 0  # a new run: no event yet
                self._created.add(record.run_id)
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"a run with id {record.run_id} already exists") from exc
            except sqlite3.Error as exc:
                raise StoreError(f"run store error: {exc}") from exc
        record.cursor = int(cur.lastrowid or 0)
        record.created_at = record.updated_at = at
        return record

    _run = staticmethod(run_from_row)
    _RUN_COLS = RUN_COLS

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            row = self._exec(
                f"SELECT {self._RUN_COLS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        return None if row is None else self._run(row)

    def find_reusable(self, reuse_key: str, *, since: str) -> RunRecord | None:
        with self._lock:
            row = self._exec(
                f"SELECT {self._RUN_COLS} FROM runs WHERE status = 'sealed'"
                " AND outcome = 'completed' AND updated_at >= ?"
                " AND json_extract(data, '$.reuse_key') = ? ORDER BY cursor DESC LIMIT 1",
                (since, reuse_key),
            ).fetchone()
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
        with self.transaction():
            # the merge's columns (not a whole RunRecord, as get_run), with the lease row's
            # epoch when the fence is to read it (one statement, not two)
            fenced = run_id in self._fences and run_id not in self._checked
            epoch = ", (SELECT epoch FROM leases WHERE run_id = ?1)" if fenced else ""
            current = self._exec(f"SELECT status, outcome, receipt_id, data{epoch} FROM runs"
                                 " WHERE run_id = ?1", (run_id,)).fetchone()  # fmt: skip
            self._fence(run_id, *(() if current is None or not fenced else (current[4],)))
            if current is None:
                raise StoreError(f"no run with id {run_id}")
            text = self._texts.merged(run_id, current[3], data)  # dumps of the merged data
            self._exec(
                "UPDATE runs SET status = ?, outcome = ?, receipt_id = ?, data = ?, updated_at = ?"
                " WHERE run_id = ?",
                (
                    status or current[0],
                    outcome if outcome is not None else current[1],
                    receipt_id if receipt_id is not None else current[2],
                    text,
                    now(),
                    run_id,
                ),
            )
            if status == "sealed":  # what it leaves unanswered waits on nothing now
                self._exec(
                    "UPDATE requests SET closed = 1 WHERE run_id = ? AND state = 'open'",
                    (run_id,),
                )

    def list_runs(
        self, *, after: int | None = None, limit: int = 50, data: bool = True
    ) -> list[RunRecord]:
        cols = self._RUN_COLS if data else RUN_HEAD_COLS
        with self._lock:
            if after is None:
                rows = self._exec(
                    f"SELECT {cols} FROM runs ORDER BY cursor DESC LIMIT ?", (limit,)
                ).fetchall()
            else:
                rows = self._exec(
                    f"SELECT {cols} FROM runs WHERE cursor < ? ORDER BY cursor DESC LIMIT ?",
                    (after, limit),
                ).fetchall()
        return [self._run(r) for r in rows]

    # -- events -----------------------------------------------------------------------------

    _EVENT_INSERT = "INSERT INTO events (run_id, seq, at, kind, body) VALUES (?,?,?,?,?)"

    def append_event(self, run_id: str, kind: str, body: dict[str, Any]) -> int:
        """Its seq follows the newest this store wrote for the run, if it knows one (events
        have no gaps: that seq is free unless someone appended since, which the key refuses);
        else the newest is read."""
        text = dumps(body)
        with self.transaction():  # (no INSERT ... RETURNING: SQLite before 3.35 has none)
            self._fence(run_id)
            at = now()
            seq = self._seqs.get(run_id)
            if seq is not None:
                try:
                    self._exec(self._EVENT_INSERT, (run_id, seq + 1, at, kind, text))
                except StoreError as exc:  # (the key's refusal, not a call record's)
                    if "events.seq" not in str(exc.__cause__):
                        raise
                    seq = None  # another writer appended to the run since
            if seq is None:
                last = self._exec("SELECT MAX(seq) FROM events WHERE run_id = ?", (run_id,))
                seq = int(last.fetchone()[0] or 0)
                self._exec(self._EVENT_INSERT, (run_id, seq + 1, at, kind, text))
            seq += 1
            if len(self._seqs) >= _SEQS_MAX:
                self._seqs.clear()  # a guess only: a run's next append reads its newest
            self._seqs[run_id] = seq
        return seq

    def events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._exec(
                "SELECT seq, at, kind, body FROM events WHERE run_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?",
                (run_id, after, -1 if limit is None else limit),  # -1: no limit
            ).fetchall()
        return [{"seq": r[0], "at": r[1], "kind": r[2], "body": json.loads(r[3])} for r in rows]

    # -- calls ------------------------------------------------------------------------------

    _CALL_INSERT = (
        "INSERT INTO calls (run_id, call_id, step_id, tool, state, args_digest, outcome, result,"
        " idempotency_key) VALUES (?,?,?,?,?,?,?,?,?)"
    )

    _CLAIM_INSERT = (
        "INSERT INTO calls (run_id, call_id, step_id, tool, state, args_digest, outcome, result,"
        " idempotency_key, epoch, site) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
    )

    _call_params = staticmethod(call_params)

    def claim_call(self, call: CallRecord) -> None:
        call.state = "claimed"
        if call.site is None:
            call.site = process_site()
        with self._lock:
            self._exec("PRAGMA synchronous=FULL")
            try:
                with self.transaction():
                    epoch = self._fence(call.run_id)
                    params = (*self._call_params(call), epoch, dumps(call.site))
                    self._exec(self._CLAIM_INSERT, params)
            finally:
                self._exec("PRAGMA synchronous=NORMAL")

    def settle_call(
        self, run_id: str, call_id: str, outcome: str, result: Any, *, reconciled: bool = False
    ) -> None:
        with self.transaction():
            epoch = self._fence(run_id)
            # a claim moves to settled once, by the epoch that claimed it (or, reconciled, by
            # the lease's current holder deciding what an earlier holder's claim means)
            mine = "" if reconciled else " AND epoch IS ?"
            params = (outcome, dumps(result), run_id, call_id) + (() if reconciled else (epoch,))
            done = self._exec(
                "UPDATE calls SET state = 'settled', outcome = ?, result = ?"
                f" WHERE run_id = ? AND call_id = ? AND state = 'claimed'{mine}",
                params,
            )
            if done.rowcount != 1:
                raise StoreError(
                    f"call {call_id} of run {run_id} is not claimed by this driver, so it was"
                    " not settled",
                    code="call_not_claimed",
                )
            self._effects.add(run_id)  # its step's settlement is synced (see settle_step)

    def note_call_site(self, run_id: str, call_id: str, tree: dict[str, float]) -> None:
        with self.transaction():
            self._fence(run_id)
            self._exec(
                "UPDATE calls SET site = ? WHERE run_id = ? AND call_id = ? AND state = 'claimed'",
                (dumps({**process_site(), "tree": tree}), run_id, call_id),
            )

    def record_call(self, call: CallRecord) -> None:
        """Record a call that changed nothing. It joins the next commit (its step's, or the
        next effect's claim) rather than costing one of its own: any statement this store runs
        next, a read included, writes it first. A crash before then loses only the record of a
        call that changed nothing, which the step's re-run makes again."""
        call.state = "settled"
        with self._lock:
            self._pending.append(self._call_params(call))
            if len(self._pending) >= _PENDING_MAX:
                self.flush()

    _call = staticmethod(call_from_row)
    _CALL_COLS = CALL_COLS

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        with self._lock:
            row = self._exec(
                f"SELECT {self._CALL_COLS} FROM calls WHERE run_id = ? AND call_id = ?",
                (run_id, call_id),
            ).fetchone()
        return None if row is None else self._call(row)

    def calls(self, run_id: str) -> list[CallRecord]:
        with self._lock:
            rows = self._exec(
                f"SELECT {self._CALL_COLS} FROM calls WHERE run_id = ? ORDER BY ord", (run_id,)
            ).fetchall()
        return [self._call(r) for r in rows]

    _dialect = "sqlite"

    def _page(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._exec(sql, params).fetchall()

    def step_calls(self, run_id: str, step_id: str | None) -> list[CallRecord]:
        where = "step_id IS NULL" if step_id is None else "step_id = ?"
        params = (run_id,) if step_id is None else (run_id, step_id)
        with self._lock:
            rows = self._exec(
                f"SELECT {self._CALL_COLS} FROM calls WHERE run_id = ? AND {where} ORDER BY ord",
                params,
            ).fetchall()
        return [self._call(r) for r in rows]

    def run_counts(self, run_id: str) -> RunCounts:
        query = "SELECT calls, admitted, steps FROM run_counts WHERE run_id = ?"
        with self._lock:
            row = self._exec(query, (run_id,)).fetchone()
            if row is None:
                with self.transaction():
                    self._exec(COUNT_ROWS, (run_id,))
                row = self._exec(query, (run_id,)).fetchone()
        return RunCounts(calls=row[0], admitted=row[1], steps=row[2])

    def find_idempotent(self, key: str) -> CallRecord | None:
        with self._lock:
            row = self._exec(
                f"SELECT {self._CALL_COLS} FROM calls WHERE idempotency_key = ?"
                " AND state = 'settled' AND outcome = 'completed' ORDER BY ord LIMIT 1",
                (key,),
            ).fetchone()
        return None if row is None else self._call(row)

    # -- steps, requests, decisions ---------------------------------------------------------

    def settle_step(
        self, run_id: str, step_id: str, body: dict[str, Any], *, used: list[str] | None = None
    ) -> None:
        """Record a step's settlement. Synced (``synchronous=FULL``) when the step settled an
        effect's claim, used a decision or drove child runs: a power cut must not lose that.
        A step whose calls changed nothing is committed without a sync of its own, like the
        records of those calls: a killed process never loses it (the log is written), a
        power cut can, and then the step, which changed nothing, runs again; the next synced
        commit (an effect's claim, which must be durable before its effect) makes it durable
        first, since the log is synced in order."""
        with self._lock:
            changed = bool(used) or bool(body.get("child_runs")) or run_id in self._effects
            if changed:
                self._exec("PRAGMA synchronous=FULL")
            try:
                with self.transaction():
                    self._fence(run_id)
                    try:
                        self._conn.execute(
                            "INSERT INTO steps (run_id, step_id, body) VALUES (?,?,?)",
                            (run_id, step_id, dumps(body)),
                        )
                    except sqlite3.IntegrityError as exc:
                        raise StoreError(f"step {step_id} of run {run_id} already settled") from exc
                    for address in used or []:
                        self._exec(
                            "UPDATE requests SET state = 'used' WHERE run_id = ? AND address = ?"
                            " AND decision IS NOT NULL",
                            (run_id, address),
                        )
                self._effects.discard(run_id)
            finally:
                if changed:
                    self._exec("PRAGMA synchronous=NORMAL")

    def step_records(self, run_id: str) -> dict[str, dict[str, Any]]:
        with self._lock:
            rows = self._exec(
                "SELECT step_id, body FROM steps WHERE run_id = ? ORDER BY ord", (run_id,)
            ).fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    _REQ_COLS = REQ_COLS

    _request = staticmethod(request_from_row)

    def put_request(self, request: RequestRecord) -> RequestRecord:
        with self._lock:
            if not self._depth:  # asked again as recorded: a read, no write transaction
                row = self._exec(
                    f"SELECT {self._REQ_COLS} FROM requests WHERE run_id = ? AND address = ?",
                    (request.run_id, request.address),
                ).fetchone()
                if row is not None and row[3] == request.request_digest:
                    return self._request(row)
        with self.transaction():
            self._fence(request.run_id)
            row = self._exec(
                f"SELECT {self._REQ_COLS} FROM requests WHERE run_id = ? AND address = ?",
                (request.run_id, request.address),
            ).fetchone()
            if row is not None:
                current = self._request(row)
                if current.request_digest == request.request_digest:
                    return current
                request.cursor = current.cursor
                self._exec(
                    "UPDATE requests SET kind = ?, request_digest = ?, body = ?, state = 'open',"
                    " decision = NULL WHERE run_id = ? AND address = ?",
                    (
                        request.kind,
                        request.request_digest,
                        dumps(request.body),
                        request.run_id,
                        request.address,
                    ),
                )
            else:
                request.cursor = (
                    self._exec(
                        "INSERT INTO requests (run_id, address, kind, request_digest, body, state)"
                        " VALUES (?,?,?,?,?, 'open')",
                        (
                            request.run_id,
                            request.address,
                            request.kind,
                            request.request_digest,
                            dumps(request.body),
                        ),
                    ).lastrowid
                    or 0
                )
        request.state, request.decision = "open", None
        return request

    def requests(self, run_id: str) -> list[RequestRecord]:
        with self._lock:
            rows = self._exec(
                f"SELECT {self._REQ_COLS} FROM requests WHERE run_id = ? ORDER BY ord", (run_id,)
            ).fetchall()
        return [self._request(r) for r in rows]

    def request(self, run_id: str, address: str) -> RequestRecord | None:
        with self._lock:
            row = self._exec(
                f"SELECT {self._REQ_COLS} FROM requests WHERE run_id = ? AND address = ?",
                (run_id, address),
            ).fetchone()
        return None if row is None else self._request(row)

    def pending_requests(
        self, *, after: int | None = None, limit: int = 50
    ) -> list[PendingRequest]:
        run_cols = ", ".join(f"r.{c.strip()}" for c in self._RUN_COLS.split(","))
        req_cols = ", ".join(f"q.{c.strip()}" for c in self._REQ_COLS.split(","))
        with self._lock:
            rows = self._exec(
                f"SELECT {run_cols}, {req_cols} FROM requests q INDEXED BY requests_waiting"
                " JOIN runs r ON r.run_id = q.run_id WHERE q.state = 'open' AND q.closed = 0"
                " AND q.ord > ? AND r.status != 'sealed' ORDER BY q.ord LIMIT ?",
                (after or 0, limit),
            ).fetchall()
        return [
            PendingRequest(self._run(row[:RUN_WIDTH]), self._request(row[RUN_WIDTH:]))
            for row in rows
        ]

    def record_decisions(self, run_id: str, decisions: dict[str, dict[str, Any]]) -> None:
        with self._lock:
            self._exec("PRAGMA synchronous=FULL")
            try:
                with self.transaction():
                    self._fence(run_id)
                    for address, decision in decisions.items():
                        self._exec(
                            "UPDATE requests SET state = 'decided', decision = ?"
                            " WHERE run_id = ? AND address = ? AND state != 'used'",
                            (dumps(decision), run_id, address),
                        )
            finally:
                self._exec("PRAGMA synchronous=NORMAL")

    # -- the audit log's newest anchor ---------------------------------------------------------

    def record_audit_anchor(self, anchor: dict[str, Any]) -> None:
        # an older anchor never replaces a newer one (two processes sealing at once)
        self._durable(
            "INSERT INTO audit_anchor (id, lines, body) VALUES (1, ?, ?) ON CONFLICT (id)"
            " DO UPDATE SET lines = excluded.lines, body = excluded.body"
            " WHERE excluded.lines >= audit_anchor.lines",
            (int(anchor["lines"]), self._texts.anchor_text(anchor)),
        )

    def audit_anchor(self) -> dict[str, Any] | None:
        return self.start_reads()[0]

    def start_reads(self) -> tuple[dict[str, Any] | None, bool]:
        """:meth:`audit_anchor`, and whether a bundle journal is open, in one read."""
        with self._lock:  # (its text as this store wrote it is decoded once: .data_text)
            row = self._exec(START_READS).fetchone()
        return None if row[0] is None else self._texts.anchor(row[0]), bool(row[1])

    def close(self) -> None:
        """Commit what waits, then close (marking the file its checkpoint leaves, when the
        store was as its last check's mark records: see ``store_file``)."""
        with self._lock:
            try:
                self.flush()
            finally:
                if str(self.path) == ":memory:":
                    self._conn.close()
                else:
                    store_file.close_marked(self._conn, self.path)


class _Transaction:
    """:meth:`SQLiteRunStore.transaction`'s context: the outer one begins (``BEGIN
    IMMEDIATE``, the run's fences and newest events read again in it) and commits, or rolls
    back on a raise (the waiting call records it joined go back in the queue when SQLite
    already rolled back); a nested one joins it. A class, not a generator's context: a run
    opens some fifteen, most of them nested, and a generator's costs several times more
    (a ``StopIteration`` at each exit)."""

    __slots__ = ("_outer", "_store")

    def __init__(self, store: SQLiteRunStore) -> None:
        self._store = store
        self._outer = False

    def __enter__(self) -> None:
        store = self._store
        store._lock.acquire()
        if store._depth == 0:
            try:
                store._checked.clear()  # each transaction reads a run's lease row again
                store._created.clear()
                store._exec("BEGIN IMMEDIATE")
            except BaseException:
                store._lock.release()
                raise
            self._outer = True
        store._depth += 1

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        store = self._store
        try:
            store._depth -= 1
            if not self._outer:
                return
            if kind is not None:  # the raise goes on, the transaction's writes undone
                store._released.clear()
                store._seqs.clear()  # the events it appended are not there
                if store._conn.in_transaction:  # SQLite rolls back a full disk's
                    store._exec("ROLLBACK")
                else:
                    store._pending[:0], store._joined = store._joined, []
                return
            try:
                store._exec("COMMIT")
            except BaseException:
                store._seqs.clear()
                raise
            for run_id in store._released:  # their releases committed (release_lease)
                store._fences.pop(run_id, None)
            store._released.clear()
        finally:
            store._lock.release()

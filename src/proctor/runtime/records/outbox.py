"""The notification outbox: what must be told to people about requests, kept in the run store
until it has been delivered.

Its own table (``notify_outbox``) beside the run store's, in the same database (SQLite file or
PostgreSQL), so a notification is written with the same durability as the request it is about:
a crash after the request is recorded never loses its notification, because the notification
is (re)written, idempotently, every time the run pauses on the request.

An entry's ``id`` is a digest of what it is about (run, address, request digest, channel and
stage): writing it twice keeps the first, and every delivery attempt of it (a retry, a resend
after a crash between sending and recording) carries the same id, so a receiver can drop a
duplicate. Delivery is at least once: an entry is *taken* (its ``due_at`` moved past the
attempt's time-out, a compare-and-set on the old value so two senders never hold it at once),
sent, then settled ``delivered`` or put back with a later ``due_at``; a sender killed between
sending and settling leaves it due again once the time-out passes.

Refused: nothing here refuses; the stores' own errors (``StoreError``) pass through.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from proctor.contracts.values import dataclass
from proctor.receipts.canonical import digest
from proctor.runtime.records.rows import dumps, now
from proctor.runtime.records.runs import RunStore

__all__ = ["OUTBOX_SQLITE", "OUTBOX_STATES", "Outbox", "OutboxEntry", "notification_id"]

OUTBOX_SQLITE = """
CREATE TABLE IF NOT EXISTS notify_outbox (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    address TEXT NOT NULL,
    request_digest TEXT NOT NULL,
    channel TEXT NOT NULL,
    stage TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    due_at REAL NOT NULL,
    created_at TEXT NOT NULL,
    note TEXT
);
CREATE INDEX IF NOT EXISTS notify_outbox_due ON notify_outbox (due_at) WHERE state = 'pending';
"""
"""The outbox's table in the SQLite store (PostgreSQL: migration 3 of ``postgres_schema``)."""

OUTBOX_STATES = ("pending", "delivered", "failed")
"""``pending`` (to send, or to send again), ``delivered``, ``failed`` (gave up: attempts ran
out; kept, listed and audited)."""

_COLS = "id, run_id, address, request_digest, channel, stage, body, state, attempts, due_at, note"


def notification_id(
    run_id: str, address: str, request_digest: str, channel: str, stage: str
) -> str:
    """The id every delivery of one notification carries (``ntf_`` and 24 hex digits)."""
    key = {"run": run_id, "address": address, "digest": request_digest}
    key |= {"channel": channel, "stage": stage}
    return "ntf_" + digest(key).removeprefix("sha256:")[:24]


@dataclass
class OutboxEntry:
    """One notification to deliver on one channel.

    Attributes:
        id: see :func:`notification_id`.
        run_id, address, request_digest: the request it is about.
        channel: the ``[notify.<name>]`` it goes to; ``stage`` ``opened`` or ``escalated``.
        body: the notification document (already safe to send: no secret, no payload unless
            the channel asks for it).
        state, attempts, due_at (epoch seconds), note (the last failure, if any).
    """

    id: str
    run_id: str
    address: str
    request_digest: str
    channel: str
    stage: str
    body: dict[str, Any]
    state: str = "pending"
    attempts: int = 0
    due_at: float = 0.0
    note: str | None = None


def _entry(row: tuple[Any, ...]) -> OutboxEntry:
    return OutboxEntry(
        id=row[0],
        run_id=row[1],
        address=row[2],
        request_digest=row[3],
        channel=row[4],
        stage=row[5],
        body=json.loads(row[6]),
        state=row[7],
        attempts=int(row[8]),
        due_at=float(row[9]),
        note=row[10],
    )


class Outbox:
    """The outbox of one run store (SQLite or PostgreSQL), through the store's connection."""

    def __init__(self, store: RunStore) -> None:
        self._store: Any = store
        self._pg = hasattr(store, "url")

    @contextmanager
    def _tx(self) -> Iterator[None]:
        if self._pg:
            with self._store.transaction():
                yield
        else:
            with self._store._lock, self._store.transaction():
                yield

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self._pg:
            return list(self._store._rows(sql, params))
        with self._store._lock:
            return list(self._store._exec(sql.replace("%s", "?"), params).fetchall())

    def put(self, entries: Iterable[OutboxEntry]) -> int:
        """Write ``entries`` that are not there yet (by id), due at once; how many were new."""
        added = 0
        with self._tx():
            for e in entries:
                seen = self._rows("SELECT 1 FROM notify_outbox WHERE id = %s", (e.id,))
                if seen:
                    continue
                self._rows(
                    f"INSERT INTO notify_outbox ({_COLS}, created_at)"
                    " VALUES (%s,%s,%s,%s,%s,%s,%s,'pending',0,%s,NULL,%s)",
                    (
                        e.id,
                        e.run_id,
                        e.address,
                        e.request_digest,
                        e.channel,
                        e.stage,
                        dumps(e.body),
                        e.due_at or time.time(),
                        now(),
                    ),
                )
                added += 1
        return added

    def has(self, entry_id: str) -> bool:
        """Whether an entry with this id was ever written."""
        return bool(self._rows("SELECT 1 FROM notify_outbox WHERE id = %s", (entry_id,)))

    def due(self, at: float, *, limit: int = 50) -> list[OutboxEntry]:
        """Pending entries due at ``at`` (epoch seconds), oldest due first."""
        rows = self._rows(
            f"SELECT {_COLS} FROM notify_outbox WHERE state = 'pending' AND due_at <= %s"
            " ORDER BY due_at, id LIMIT %s",
            (at, limit),
        )
        return [_entry(r) for r in rows]

    def take(self, entry: OutboxEntry, until: float) -> bool:
        """Hold ``entry`` for one attempt: move its ``due_at`` to ``until`` and count the
        attempt, only if nobody took it since it was read. False: another sender has it."""
        with self._tx():
            rows = self._rows(
                "UPDATE notify_outbox SET due_at = %s, attempts = attempts + 1"
                " WHERE id = %s AND state = 'pending' AND due_at = %s RETURNING attempts",
                (until, entry.id, entry.due_at),
            )
        if not rows:
            return False
        entry.attempts, entry.due_at = int(rows[0][0]), until
        return True

    def settle(self, entry_id: str, state: str, *, due_at: float, note: str | None) -> None:
        """Record the end of an attempt: ``delivered``, ``failed`` (given up) or ``pending``
        again, due at ``due_at``."""
        assert state in OUTBOX_STATES
        with self._tx():
            self._rows(
                "UPDATE notify_outbox SET state = %s, due_at = %s, note = %s WHERE id = %s",
                (state, due_at, note, entry_id),
            )

    def entries(self, *, limit: int = 200) -> list[OutboxEntry]:
        """The newest ``limit`` entries, newest first (for ``proctor notify list``)."""
        rows = self._rows(
            f"SELECT {_COLS} FROM notify_outbox ORDER BY created_at DESC, id LIMIT %s", (limit,)
        )
        return [_entry(r) for r in rows]

    def get(self, entry_id: str) -> OutboxEntry | None:
        """The entry with this id, if it was ever written."""
        rows = self._rows(f"SELECT {_COLS} FROM notify_outbox WHERE id = %s", (entry_id,))
        return _entry(rows[0]) if rows else None

"""The PostgreSQL run store's bundle journal and audit anchor (:class:`PostgresJournal`, a
part of :class:`~.postgres.PostgresRunStore`): a bundle's before-images, recorded open before
it applies and closed after, so a crashed driver's half-applied bundle is rolled back by the
next start (:mod:`proctor.runtime.tools.fs_bundle`); and the audit log's newest anchor."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from proctor.runtime.records.postgres_leases import NOW
from proctor.runtime.records.rows import dumps
from proctor.runtime.records.runs import START_READS, JournalRecord

__all__ = ["PostgresJournal"]


class PostgresJournal(ABC):
    """The journal and anchor methods of :class:`~.postgres.PostgresRunStore` (which defines
    what is declared here: its statements and its fenced writes)."""

    @abstractmethod
    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement in its own transaction (or the thread's), its rows."""

    @abstractmethod
    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        """One statement's first row."""

    @abstractmethod
    def _fenced_rows(
        self,
        run_id: str,
        sql: str,
        params: tuple[Any, ...],
        *also: tuple[str, tuple[Any, ...]],
        quick: bool = False,
        result: str = "w0",
    ) -> list[Any]:
        """``sql`` for ``run_id`` under its lease's fence, in one round trip."""

    # -- journal ----------------------------------------------------------------------------

    def journal_open(self, record: JournalRecord) -> None:
        self._fenced_rows(
            record.run_id,
            "INSERT INTO journal (bundle_id, run_id, state, entries) SELECT %s,%s,%s,%s"
            " WHERE {ok} RETURNING 1",
            (record.bundle_id, record.run_id, "open", dumps(record.entries)),
        )

    def journal_close(self, bundle_id: str, state: str) -> None:
        owner = self._one("SELECT run_id FROM journal WHERE bundle_id = %s", (bundle_id,))
        self._fenced_rows(
            "" if owner is None else str(owner[0]),
            "UPDATE journal SET state = %s WHERE bundle_id = %s AND {ok} RETURNING 1",
            (state, bundle_id),
        )

    def journal_pending(self) -> list[JournalRecord]:
        """Open bundles, except those of a run whose live lease is held on another machine:
        that driver is applying the bundle now (a bundle's owner is checked by process id,
        which only means something on its own machine; across machines the lease tells)."""
        import socket

        rows = self._rows(
            "SELECT bundle_id, run_id, state, entries FROM journal j WHERE state = 'open'"
            " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.run_id = j.run_id"
            f" AND l.expires_at > {NOW} AND split_part(l.holder, '|', 1) <> %s)",
            (socket.gethostname(),),
        )
        return [JournalRecord(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    # -- the audit log's newest anchor, and what a run's start reads ------------------------

    def record_audit_anchor(self, anchor: dict[str, Any]) -> None:
        self._rows(
            "INSERT INTO audit_anchor (id, lines, body) VALUES (1, %s, %s) ON CONFLICT (id)"
            " DO UPDATE SET lines = excluded.lines, body = excluded.body"
            " WHERE excluded.lines >= audit_anchor.lines",
            (int(anchor["lines"]), dumps(anchor)),
        )

    def audit_anchor(self) -> dict[str, Any] | None:
        return self.start_reads()[0]

    def start_reads(self) -> tuple[dict[str, Any] | None, bool]:
        row = self._rows(START_READS)[0]  # (no FROM: one row, whatever the tables hold)
        return None if row[0] is None else dict(json.loads(row[0])), bool(row[1])

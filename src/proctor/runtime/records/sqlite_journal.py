"""The SQLite run store's bundle journal (:class:`SQLiteJournal`, a part of
:class:`~.sqlite.SQLiteRunStore`): a bundle's before-images, recorded open before it applies
and closed after, so a crashed driver's half-applied bundle is rolled back by the next start
(:mod:`proctor.runtime.tools.fs_bundle`)."""

from __future__ import annotations

import json
import sqlite3
from abc import ABC, abstractmethod
from typing import Any

from proctor.runtime.records.rows import dumps
from proctor.runtime.records.runs import JournalRecord

__all__ = ["SQLiteJournal"]


class SQLiteJournal(ABC):
    """The journal methods of :class:`~.sqlite.SQLiteRunStore` (which defines what is declared
    here: its lock, its statements and its durable writes)."""

    _lock: Any

    @abstractmethod
    def _exec(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """One statement on the store's connection."""

    @abstractmethod
    def _durable(self, sql: str, params: tuple[Any, ...], run_id: str | None = None) -> None:
        """One write that must survive a crash before the caller goes on (fenced for
        ``run_id``)."""

    def journal_open(self, record: JournalRecord) -> None:
        self._durable(
            "INSERT INTO journal (bundle_id, run_id, state, entries) VALUES (?,?,?,?)",
            (record.bundle_id, record.run_id, "open", dumps(record.entries)),
            record.run_id,
        )

    def journal_close(self, bundle_id: str, state: str) -> None:
        with self._lock:
            row = self._exec("SELECT run_id FROM journal WHERE bundle_id = ?", (bundle_id,))
            owner = row.fetchone()
            self._durable(
                "UPDATE journal SET state = ? WHERE bundle_id = ?",
                (state, bundle_id),
                None if owner is None else str(owner[0]),
            )

    def journal_pending(self) -> list[JournalRecord]:
        with self._lock:
            rows = self._exec(
                "SELECT bundle_id, run_id, state, entries FROM journal WHERE state = 'open'"
            ).fetchall()
        return [JournalRecord(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

"""The SQLite run store's leases (:class:`SQLiteLeases`, a part of
:class:`~.sqlite.SQLiteRunStore`): take, renew, read and release a run's lease row, whose epoch
fences every write a driver makes for the run (see :mod:`.fencing`)."""

from __future__ import annotations

import sqlite3
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any

from proctor.runtime.records.runs import LeaseRecord

__all__ = ["SQLiteLeases"]


class SQLiteLeases(ABC):
    """The lease methods of :class:`~.sqlite.SQLiteRunStore` (which defines what is declared
    here: its lock, its transactions, its statements and its fences)."""

    _lock: Any
    _depth: int
    _fences: dict[str, int]
    _checked: set[str]
    _created: set[str]
    _released: list[str]
    _taken: dict[str, LeaseRecord]

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """One commit for every write inside (the store's)."""

    @abstractmethod
    def _exec(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """One statement on the store's connection."""

    def _took(self, run_id: str, holder: str, epoch: int, taken_from: str | None = None) -> None:
        """This process took ``run_id``'s lease for ``holder`` under ``epoch`` (from
        ``taken_from``), written in the transaction now open: its fence needs no read of the
        row again in this transaction (nobody else writes while it holds SQLite's write lock;
        the next transaction reads it again), nor the row a read for :meth:`taken_lease`."""
        self._fences[run_id] = epoch
        self._checked.add(run_id)
        self._taken[run_id] = LeaseRecord(holder, epoch, False, taken_from)

    def acquire_lease(
        self, run_id: str, holder: str, ttl_seconds: float, *, steal_from: str | None = None
    ) -> str | None:
        now = time.time()
        with self.transaction():
            if run_id in self._created:  # its row is new unless a run of that id left one
                taken = self._exec(
                    "INSERT INTO leases (run_id, holder, expires_at, epoch) VALUES (?,?,?,1)"
                    " ON CONFLICT (run_id) DO NOTHING",
                    (run_id, holder, now + ttl_seconds),
                )
                if taken.rowcount == 1:
                    self._took(run_id, holder, 1)
                    return None
            row = self._exec(
                "SELECT holder, expires_at, epoch FROM leases WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                self._exec(
                    "INSERT INTO leases (run_id, holder, expires_at, epoch) VALUES (?,?,?,1)",
                    (run_id, holder, now + ttl_seconds),
                )
                self._took(run_id, holder, 1)
                return None
            current, expires, epoch = str(row[0]), float(row[1]), int(row[2])
            if current == holder and self._fences.get(run_id) == epoch:
                self._exec(
                    "UPDATE leases SET expires_at = ? WHERE run_id = ?", (now + ttl_seconds, run_id)
                )
                return None
            if current not in ("", holder) and expires > now and current != steal_from:
                return current
            taken_from = None if current in ("", holder) else current
            self._exec(
                "UPDATE leases SET holder = ?, expires_at = ?, epoch = ?, taken_from = ?"
                " WHERE run_id = ?",
                (holder, now + ttl_seconds, epoch + 1, taken_from, run_id),
            )
            self._took(run_id, holder, epoch + 1, taken_from)
        return None

    def renew_lease(self, run_id: str, holder: str, ttl_seconds: float) -> bool:
        epoch = self._fences.get(run_id)
        if epoch is None:
            return False
        with self.transaction():
            done = self._exec(
                "UPDATE leases SET expires_at = ? WHERE run_id = ? AND holder = ? AND epoch = ?",
                (time.time() + ttl_seconds, run_id, holder, epoch),
            )
            return done.rowcount == 1

    def lease(self, run_id: str) -> LeaseRecord | None:
        with self._lock:
            row = self._exec(
                "SELECT holder, epoch, expires_at, taken_from FROM leases WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        if row is None:
            return None
        return LeaseRecord(str(row[0]), int(row[1]), float(row[2]) <= time.time(), row[3])

    def taken_lease(self, run_id: str) -> LeaseRecord | None:
        return self._taken.get(run_id)  # as acquire_lease wrote it: no read of the row

    def release_lease(self, run_id: str, holder: str) -> None:
        with self.transaction():  # the row stays: its epoch must only grow
            epoch = self._fences.get(run_id)
            done = self._exec(
                "UPDATE leases SET holder = '', expires_at = 0, taken_from = NULL"
                " WHERE run_id = ? AND holder = ? AND epoch IS ?",
                (run_id, holder, epoch),
            )
            if done.rowcount == 1:  # its fence goes once the release commits
                self._released.append(run_id)
                self._taken.pop(run_id, None)  # asked only just after a take

"""The SQLite state store: ``.proctor/store.sqlite``, one connection per process, WAL mode.

Every write is one ``BEGIN IMMEDIATE`` transaction: the idempotency record, then the event or
the key, so a crash leaves the write whole or absent.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from proctor.errors import StoreError
from proctor.runtime.storage.base import check_migration, encode_value, same_write

__all__ = ["SqliteStateStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
  ns TEXT NOT NULL, stream TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (ns, stream, seq)
);
CREATE TABLE IF NOT EXISTS keyvals (
  ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, version INTEGER NOT NULL,
  PRIMARY KEY (ns, key)
);
CREATE TABLE IF NOT EXISTS writes (
  ns TEXT NOT NULL, idem TEXT NOT NULL, result TEXT NOT NULL, PRIMARY KEY (ns, idem)
);
"""


_TABLES = (("events", "events"), ("keys", "keyvals"), ("writes", "writes"))


def _count(conn: sqlite3.Connection, table: str, ns: str) -> int:
    (count,) = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE ns = ?", (ns,)).fetchone()
    return int(count)


class SqliteStateStore:
    """The default backend (see :mod:`proctor.runtime.storage.base` for the contract)."""

    def __init__(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(path), isolation_level=None, check_same_thread=False, timeout=30
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"the state store cannot be opened ({type(exc).__name__})",
                code="state_store_error",
            ) from exc
        self._lock = threading.Lock()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreError(
                    f"the state store failed ({type(exc).__name__})", code="state_store_error"
                ) from exc

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(
                    f"the state store failed ({type(exc).__name__})", code="state_store_error"
                ) from exc

    @staticmethod
    def _done(conn: sqlite3.Connection, ns: str, idem: str) -> dict[str, Any] | None:
        row = conn.execute(
            "SELECT result FROM writes WHERE ns = ? AND idem = ?", (ns, idem)
        ).fetchone()
        return None if row is None else {**json.loads(row[0]), "already_done": True}

    def append(self, ns: str, stream: str, event: Any, idem: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        body = encode_value(event)
        with self._write() as conn:
            done = self._done(conn, ns, idem)
            if done is not None:
                return same_write(done, stream=stream)
            (last,) = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE ns = ? AND stream = ?",
                (ns, stream),
            ).fetchone()
            seq = int(last) + 1
            conn.execute("INSERT INTO events VALUES (?, ?, ?, ?)", (ns, stream, seq, body))
            result = {"seq": seq, "stream": stream}
            conn.execute("INSERT INTO writes VALUES (?, ?, ?)", (ns, idem, json.dumps(result)))
        return {**result, "already_done": False}

    def read(self, ns: str, stream: str, cursor: int, limit: int) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        rows = self._query(
            "SELECT seq, body FROM events WHERE ns = ? AND stream = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (ns, stream, cursor, limit),
        )
        events = [{"seq": int(seq), "event": json.loads(body)} for seq, body in rows]
        return {"events": events, "next_cursor": events[-1]["seq"] if events else cursor}

    def put(self, ns: str, key: str, value: Any, idem: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        body = encode_value(value)
        with self._write() as conn:
            done = self._done(conn, ns, idem)
            if done is not None:
                return same_write(done, key=key)
            row = conn.execute(
                "SELECT version FROM keyvals WHERE ns = ? AND key = ?", (ns, key)
            ).fetchone()
            version = 1 if row is None else int(row[0]) + 1
            conn.execute(
                "INSERT INTO keyvals VALUES (?, ?, ?, ?) ON CONFLICT (ns, key) DO UPDATE"
                " SET value = excluded.value, version = excluded.version",
                (ns, key, body, version),
            )
            result = {"key": key, "version": version}
            conn.execute("INSERT INTO writes VALUES (?, ?, ?)", (ns, idem, json.dumps(result)))
        return {**result, "already_done": False}

    def get(self, ns: str, key: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        rows = self._query("SELECT value, version FROM keyvals WHERE ns = ? AND key = ?", (ns, key))
        if not rows:
            return {"found": False, "value": None, "version": None}
        return {"found": True, "value": json.loads(rows[0][0]), "version": int(rows[0][1])}

    def list_keys(self, ns: str, prefix: str, cursor: str, limit: int) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        rows = self._query(
            "SELECT key FROM keyvals WHERE ns = ? AND key > ? AND substr(key, 1, ?) = ?"
            " ORDER BY key LIMIT ?",
            (ns, cursor, len(prefix), prefix, limit + 1),
        )
        keys = [str(r[0]) for r in rows]
        more = len(keys) > limit
        keys = keys[:limit]
        return {"keys": keys, "next_cursor": keys[-1] if more and keys else None}

    def applied(self, ns: str, idem: str) -> dict[str, Any] | None:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        rows = self._query("SELECT result FROM writes WHERE ns = ? AND idem = ?", (ns, idem))
        return None if not rows else {**json.loads(rows[0][0]), "already_done": True}

    def migrate(self, source: str, target: str) -> dict[str, int]:
        """See :class:`~proctor.runtime.storage.base.StateStore`: one transaction."""
        with self._write() as conn:
            counts = [
                {name: _count(conn, table, ns) for name, table in _TABLES}
                for ns in (source, target)
            ]
            moved = check_migration(source, target, counts[0], counts[1])
            for _, table in _TABLES:
                conn.execute(f"UPDATE {table} SET ns = ? WHERE ns = ?", (target, source))
        return moved

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

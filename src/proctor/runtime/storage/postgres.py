"""The PostgreSQL state store: psycopg 3 with a connection pool, tables in one schema.

Chosen by ``PROCTOR_STORE_URL=postgresql://...``. A stream's sequence numbers are taken under
a transaction-scoped advisory lock on the stream, so concurrent appenders never share one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from proctor.errors import ConfigError, StoreError
from proctor.runtime.storage.base import check_migration, encode_value, same_write

__all__ = ["PostgresStateStore"]

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresStateStore:
    """A backend on PostgreSQL (see :mod:`proctor.runtime.storage.base` for the contract).

    ``schema`` holds the tables (created when missing); tests give each a schema of its own.
    """

    def __init__(self, url: str, *, schema: str = "proctor_store", max_size: int = 4) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise ConfigError("the store schema name is invalid", code="store_url_invalid")
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise ConfigError(
                "PROCTOR_STORE_URL names PostgreSQL; install proctor[store]"
                " (psycopg, psycopg-pool)",
                code="store_backend_missing",
            ) from exc
        self._errors: tuple[type[BaseException], ...] = (psycopg.Error,)
        self.schema = schema
        try:
            self._pool = ConnectionPool(url, min_size=1, max_size=max_size, open=True, timeout=30)
            with self._pool.connection() as conn:
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {schema}.events (ns TEXT NOT NULL, stream TEXT"
                    " NOT NULL, seq BIGINT NOT NULL, body TEXT NOT NULL,"
                    " PRIMARY KEY (ns, stream, seq))"
                )
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {schema}.keyvals (ns TEXT NOT NULL, key TEXT"
                    ' COLLATE "C" NOT NULL, value TEXT NOT NULL, version BIGINT NOT NULL,'
                    " PRIMARY KEY (ns, key))"
                )
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {schema}.writes (ns TEXT NOT NULL, idem TEXT"
                    " NOT NULL, result TEXT NOT NULL, PRIMARY KEY (ns, idem))"
                )
        except Exception as exc:
            self._raise(exc)

    def _raise(self, exc: BaseException) -> None:
        # a connection error's text can carry the URL (and its password): name the class only
        raise StoreError(
            f"the PostgreSQL state store failed ({type(exc).__name__})", code="state_store_error"
        ) from exc

    def _done(self, conn: Any, ns: str, idem: str) -> dict[str, Any] | None:
        row = conn.execute(
            f"SELECT result FROM {self.schema}.writes WHERE ns = %s AND idem = %s", (ns, idem)
        ).fetchone()
        return None if row is None else {**json.loads(row[0]), "already_done": True}

    def _lock(self, conn: Any, ns: str, name: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{ns}\x1f{name}",))

    def append(self, ns: str, stream: str, event: Any, idem: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        body = encode_value(event)
        try:
            with self._pool.connection() as conn, conn.transaction():
                self._lock(conn, ns, "w:" + idem)
                done = self._done(conn, ns, idem)
                if done is not None:
                    return same_write(done, stream=stream)
                self._lock(conn, ns, "s:" + stream)
                row: Any = conn.execute(
                    f"SELECT COALESCE(MAX(seq), 0) FROM {self.schema}.events"
                    " WHERE ns = %s AND stream = %s",
                    (ns, stream),
                ).fetchone()
                seq = int(row[0]) + 1
                conn.execute(
                    f"INSERT INTO {self.schema}.events VALUES (%s, %s, %s, %s)",
                    (ns, stream, seq, body),
                )
                result = {"seq": seq, "stream": stream}
                conn.execute(
                    f"INSERT INTO {self.schema}.writes VALUES (%s, %s, %s)",
                    (ns, idem, json.dumps(result)),
                )
        except self._errors as exc:
            self._raise(exc)
        return {**result, "already_done": False}

    def read(self, ns: str, stream: str, cursor: int, limit: int) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        try:
            with self._pool.connection() as conn:
                rows = conn.execute(
                    f"SELECT seq, body FROM {self.schema}.events WHERE ns = %s AND stream = %s"
                    " AND seq > %s ORDER BY seq LIMIT %s",
                    (ns, stream, cursor, limit),
                ).fetchall()
        except self._errors as exc:
            self._raise(exc)
        events = [{"seq": int(seq), "event": json.loads(body)} for seq, body in rows]
        return {"events": events, "next_cursor": events[-1]["seq"] if events else cursor}

    def put(self, ns: str, key: str, value: Any, idem: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        body = encode_value(value)
        try:
            with self._pool.connection() as conn, conn.transaction():
                self._lock(conn, ns, "w:" + idem)
                done = self._done(conn, ns, idem)
                if done is not None:
                    return same_write(done, key=key)
                self._lock(conn, ns, "k:" + key)
                row = conn.execute(
                    f"SELECT version FROM {self.schema}.keyvals WHERE ns = %s AND key = %s",
                    (ns, key),
                ).fetchone()
                version = 1 if row is None else int(row[0]) + 1
                conn.execute(
                    f"INSERT INTO {self.schema}.keyvals VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value,"
                    " version = EXCLUDED.version",
                    (ns, key, body, version),
                )
                result = {"key": key, "version": version}
                conn.execute(
                    f"INSERT INTO {self.schema}.writes VALUES (%s, %s, %s)",
                    (ns, idem, json.dumps(result)),
                )
        except self._errors as exc:
            self._raise(exc)
        return {**result, "already_done": False}

    def get(self, ns: str, key: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        try:
            with self._pool.connection() as conn:
                row = conn.execute(
                    f"SELECT value, version FROM {self.schema}.keyvals WHERE ns = %s AND key = %s",
                    (ns, key),
                ).fetchone()
        except self._errors as exc:
            self._raise(exc)
        if row is None:
            return {"found": False, "value": None, "version": None}
        return {"found": True, "value": json.loads(row[0]), "version": int(row[1])}

    def list_keys(self, ns: str, prefix: str, cursor: str, limit: int) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        try:
            with self._pool.connection() as conn:
                rows = conn.execute(
                    f"SELECT key FROM {self.schema}.keyvals WHERE ns = %s AND key > %s"
                    " AND left(key, %s) = %s ORDER BY key LIMIT %s",
                    (ns, cursor, len(prefix), prefix, limit + 1),
                ).fetchall()
        except self._errors as exc:
            self._raise(exc)
        keys = [str(r[0]) for r in rows]
        more = len(keys) > limit
        keys = keys[:limit]
        return {"keys": keys, "next_cursor": keys[-1] if more and keys else None}

    def applied(self, ns: str, idem: str) -> dict[str, Any] | None:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        try:
            with self._pool.connection() as conn:
                return self._done(conn, ns, idem)
        except self._errors as exc:
            self._raise(exc)
        return None

    def _count(self, conn: Any, table: str, ns: str) -> int:
        row: Any = conn.execute(
            f"SELECT COUNT(*) FROM {self.schema}.{table} WHERE ns = %s", (ns,)
        ).fetchone()
        return int(row[0])

    def migrate(self, source: str, target: str) -> dict[str, int]:
        """See :class:`~proctor.runtime.storage.base.StateStore`: one transaction, under an
        advisory lock on each namespace."""
        tables = (("events", "events"), ("keys", "keyvals"), ("writes", "writes"))
        try:
            with self._pool.connection() as conn, conn.transaction():
                for ns in sorted((source, target)):
                    self._lock(conn, ns, "migrate")
                counts = [
                    {name: self._count(conn, table, ns) for name, table in tables}
                    for ns in (source, target)
                ]
                moved = check_migration(source, target, counts[0], counts[1])
                for _, table in tables:
                    conn.execute(
                        f"UPDATE {self.schema}.{table} SET ns = %s WHERE ns = %s", (target, source)
                    )
        except self._errors as exc:
            self._raise(exc)
        return moved

    def drop(self) -> None:
        """Drop the schema and everything in it (tests)."""
        with self._pool.connection() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()

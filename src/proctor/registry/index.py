"""The registry's index database: SQLite in the registry folder, or PostgreSQL.

``PROCTOR_DATABASE_URL`` (``postgresql://...``) puts the index on PostgreSQL (the ``postgres``
extra: psycopg); otherwise it is ``registry.db`` in the registry folder. Statements are written
once with ``?`` placeholders (and ``LIKE``, read as ``ILIKE`` on PostgreSQL) in the SQL both
engines read; tables are named ``registry_*`` so
they never meet the run store's tables in a shared database. Driver errors become
:class:`~proctor.errors.StoreError`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from proctor.errors import ConfigError, StoreError

__all__ = ["Index", "open_index"]

_TABLES = (
    "CREATE TABLE IF NOT EXISTS registry_publishers ("
    " namespace TEXT NOT NULL, key_hex TEXT NOT NULL, tier TEXT NOT NULL,"
    " token_sha256 TEXT NOT NULL, PRIMARY KEY (namespace, key_hex))",
    "CREATE TABLE IF NOT EXISTS registry_packages ("
    " name TEXT PRIMARY KEY, description TEXT NOT NULL, tier TEXT NOT NULL,"
    " latest_version TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS registry_versions ("
    " name TEXT NOT NULL, version TEXT NOT NULL, content_digest TEXT NOT NULL,"
    " manifest TEXT NOT NULL, files TEXT NOT NULL, size INTEGER NOT NULL,"
    " published_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (name, version))",
)


class Index:
    """One connection, used under a lock; :meth:`transaction` commits or rolls back whole."""

    def __init__(self, connection: Any, *, postgres: bool) -> None:
        self._conn = connection
        self._postgres = postgres
        self._lock = threading.RLock()
        self._errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        if postgres:
            import psycopg

            self._errors = (psycopg.Error,)
        with self.transaction():
            for statement in _TABLES:
                self.execute(statement)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (empty for writes).

        Raises:
            StoreError: (code ``registry_index_failed``) the database refused it.
        """
        if self._postgres:  # SQLite's LIKE ignores ASCII case; PostgreSQL's ILIKE does
            sql = sql.replace("?", "%s").replace(" LIKE ", " ILIKE ")
        with self._lock:
            try:
                cursor = self._conn.execute(sql, tuple(params))
                rows = cursor.fetchall() if cursor.description is not None else []
            except self._errors as exc:
                raise StoreError(
                    f"the registry index refused a statement: {type(exc).__name__}",
                    code="registry_index_failed",
                ) from exc
        return [tuple(row) for row in rows]

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the lock; commit when the block ends, roll back when it raises."""
        with self._lock:
            try:
                yield
            except BaseException:
                self._conn.rollback()
                raise
            try:
                self._conn.commit()
            except self._errors as exc:
                raise StoreError(
                    "the registry index could not commit", code="registry_index_failed"
                ) from exc

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()


def open_index(folder: Path, database_url: str | None) -> Index:
    """The index: PostgreSQL at ``database_url`` when given, else ``folder/registry.db``.

    Raises:
        StoreError: (code ``registry_index_failed``) the database cannot be opened.
        ConfigError: (code ``postgres_driver_missing``) a PostgreSQL URL without psycopg.
    """
    if database_url:
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigError(
                "PROCTOR_DATABASE_URL names PostgreSQL, which needs `pip install "
                "'proctor[postgres]'`",
                code="postgres_driver_missing",
            ) from exc
        try:
            connection = psycopg.connect(database_url, connect_timeout=10)
        except psycopg.Error as exc:
            raise StoreError(
                "the registry's PostgreSQL database could not be reached",
                code="registry_index_failed",
            ) from exc
        return Index(connection, postgres=True)
    try:
        local = sqlite3.connect(folder / "registry.db", check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(
            "the registry database could not be opened", code="registry_index_failed"
        ) from exc
    return Index(local, postgres=False)

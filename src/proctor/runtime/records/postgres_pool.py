"""The PostgreSQL run store's connections: one pool per database and process, opened (and the
schema migrated) on first use; driver errors turned into messages without the URL's secrets."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from proctor.errors import StoreError
from proctor.runtime.records.postgres_schema import migrate

__all__ = [
    "POOL_SIZE",
    "begin",
    "close_pools",
    "driver_message",
    "ended_by_server",
    "is_postgres_url",
    "plan_once",
    "pool_for",
    "store_error",
]

_ENDED = frozenset({"57P01", "57P02", "57P03"})
"""SQLSTATEs of a backend the server ended (admin shutdown, crash shutdown, cannot connect
now): the statement that meets one on an idle connection never ran."""


def ended_by_server(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the server ended the backend (the statement never ran)."""
    return getattr(exc, "sqlstate", None) in _ENDED


def store_error(exc: Exception, url: str, shown: str) -> StoreError:
    """The store's error for a driver's ``exc``: ``store_unreachable`` when the connection
    failed (a closed connection surfaces as either class, by when it is noticed), the
    driver's message otherwise; ``url``'s password never in it."""
    import psycopg

    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreError(
            f"the run store {shown} failed: {driver_message(exc, url)}",
            code="store_unreachable",
        )
    return StoreError(f"run store error: {driver_message(exc, url)}")


def is_postgres_url(url: str) -> bool:
    """True for the URLs this store serves (``postgresql://`` or ``postgres://``)."""
    return url.startswith(("postgresql://", "postgres://"))


_POOLS: dict[str, Any] = {}
_POOLS_LOCK = threading.Lock()
POOL_SIZE = 20
"""Connections per process and database: a worker's slots (at most 16) and its heartbeat."""


def driver_message(exc: Exception, url: str = "") -> str:
    """The first line of a driver error, without the URL's user or password in it (a URL
    psycopg cannot parse is named as such, its text never echoed)."""
    import psycopg

    if isinstance(exc, psycopg.ProgrammingError) and "dsn" in str(exc).lower():
        return "it is not a valid PostgreSQL URL"
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    for secret in _userinfo(url):
        text = text.replace(secret, "***")
    return text


def _userinfo(url: str) -> list[str]:
    """The user and password a URL carries (longest first), to keep out of messages."""
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
    except ValueError:
        found = []
    head = url.split("://", 1)[-1].rsplit("@", 1)
    if len(head) == 2:
        found += head[0].split(":", 1)
    found += [unquote(f) for f in found]
    return sorted({f for f in found if len(f) >= 3}, key=len, reverse=True)


_PLAN_ONCE = [False]


def plan_once() -> None:
    """This process's connections opened from now on plan each prepared statement once, with
    no look at its values (``plan_cache_mode = force_generic_plan``). For a worker: PostgreSQL
    plans a prepared statement anew at each of its first five runs on a connection (and for
    good when a plan for its values looks cheaper), and a worker's connections, each seeing a
    statement a few times a minute and replaced every hour, spent a fifth of their CPU there.
    A worker's statements are keyed (a run's rows by its id, the queue's by state): no value
    changes their best plan. Not for every process: a listing page's best plan depends on its
    limit and cursor, and the console and the commands list."""
    _PLAN_ONCE[0] = True


def _configure(conn: Any) -> None:
    if _PLAN_ONCE[0]:
        conn.execute("SET plan_cache_mode = force_generic_plan")


def pool_for(url: str, shown: str) -> Any:
    """This process's pool for ``url``, opened (and the schema migrated) on first use.

    Raises:
        StoreError: ``store_unreachable``, ``store_schema_newer``.
    """
    with _POOLS_LOCK:
        pool = _POOLS.get(url)
        if pool is not None:
            return pool
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - the postgres extra is not installed
            raise StoreError(
                "the run store on PostgreSQL needs the postgres extra"
                " (pip install 'proctor[postgres]')",
                code="store_unreachable",
            ) from exc
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                migrate(conn, shown)
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot open the run store {shown}: {driver_message(exc, url)}",
                code="store_unreachable",
            ) from exc
        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            # a statement is prepared on its second use by a connection (psycopg's default
            # waits for its sixth): a worker's connections each see a statement a few times a
            # minute, so most ran unprepared, parsed and planned anew at about three times
            # the database's CPU of a prepared one. Not on its first: preparing costs a round
            # trip of its own, which a statement a command makes once would not win back.
            # The texts are fixed (values are parameters, the fence's epoch too), so a
            # connection prepares each once
            kwargs={"autocommit": True, "connect_timeout": 5, "prepare_threshold": 1},
            open=False,
            name="proctor-runs",
            configure=_configure,
        )
        pool.open(wait=True, timeout=10.0)
        _POOLS[url] = pool
        return pool


def close_pools() -> None:
    """Close every pool this process opened (a worker at exit; tests between databases)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


def begin(pool: Any) -> Any:
    """A transaction on a connection of ``pool``, held by the returned ``ExitStack`` (its
    ``conn``, and its ``pipe``: the connection's pipeline); closing the stack commits (rolls
    back when closed with an error) and gives the connection back.

    The connection is in pipeline mode: ``BEGIN`` is queued, and goes with the transaction's
    first statement, which the caller sends with ``pipe.sync()`` (one round trip, not two);
    ``COMMIT`` is sent, and waited for, as the stack closes. Nothing reaches the server here.
    """
    import psycopg

    stack = contextlib.ExitStack()
    try:
        conn = stack.enter_context(pool.connection())
        stack.pipe = stack.enter_context(conn.pipeline())  # type: ignore[attr-defined]
        # not conn.transaction(): in pipeline mode it sends its BEGIN at once, alone
        stack.enter_context(psycopg.Transaction(conn))
    except BaseException:
        stack.close()  # the pool drops a broken connection as it comes back
        raise
    stack.conn = conn  # type: ignore[attr-defined]
    return stack

"""Which state store a process uses: ``PROCTOR_STORE_URL``, else SQLite in the workspace.

One store per process and target, opened on first use and closed by
:func:`close_state_stores` (and at exit).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Mapping
from pathlib import Path

from proctor.errors import ConfigError
from proctor.runtime.storage.base import StateStore

__all__ = ["close_state_stores", "open_state_store"]

_OPEN: dict[str, StateStore] = {}
_LOCK = threading.Lock()


def open_state_store(environ: Mapping[str, str], state_dir: Path) -> StateStore:
    """The process's store for ``PROCTOR_STORE_URL`` (``postgresql://``, ``redis://``), or the
    SQLite file ``<state_dir>/store.sqlite``; opened once per process and target.
    ``PROCTOR_STORE_PREFIX`` names the PostgreSQL schema or the Redis key prefix.

    Raises:
        ConfigError: ``store_url_invalid`` for any other scheme.
        StoreError: the backend cannot be opened.
    """
    url = environ.get("PROCTOR_STORE_URL", "").strip()
    # the PostgreSQL schema or the Redis key prefix (default proctor_store, proctor:store)
    prefix = environ.get("PROCTOR_STORE_PREFIX", "").strip()
    target = f"{url}#{prefix}" if url else str(state_dir / "store.sqlite")
    with _LOCK:
        found = _OPEN.get(target)
        if found is not None:
            return found
        if not url:
            from proctor.runtime.storage.sqlite import SqliteStateStore

            store: StateStore = SqliteStateStore(state_dir / "store.sqlite")
        elif url.startswith(("postgresql://", "postgres://")):
            from proctor.runtime.storage.postgres import PostgresStateStore

            store = PostgresStateStore(url, schema=prefix or "proctor_store")
        elif url.startswith(("redis://", "rediss://")):
            from proctor.runtime.storage.redis import RedisStateStore

            store = RedisStateStore(url, prefix=prefix or "proctor:store")
        else:
            raise ConfigError(
                "PROCTOR_STORE_URL must name postgresql://... or redis://... (unset: SQLite in"
                " .proctor/store.sqlite)",
                code="store_url_invalid",
            )
        _OPEN[target] = store
        return store


def close_state_stores() -> None:
    """Close every store this process opened (tests, and the end of a process)."""
    with _LOCK:
        while _OPEN:
            _OPEN.popitem()[1].close()


atexit.register(close_state_stores)

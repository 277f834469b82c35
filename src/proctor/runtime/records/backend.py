"""Which run store a workspace uses: PostgreSQL when ``PROCTOR_DATABASE_URL`` is set."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from proctor.runtime.records.runs import RunStore
from proctor.runtime.records.store_file import run_store_path

__all__ = ["open_run_store"]


def open_run_store(state_dir: Path, environ: Mapping[str, str], shown: str) -> RunStore:
    """The workspace's run store: PostgreSQL when ``PROCTOR_DATABASE_URL`` is set, else the
    SQLite file of :func:`.store_file.run_store_path` (``shown`` names it in messages).

    Raises:
        StoreError: ``store_unreachable`` for a URL that is not ``postgresql://`` or a server
            that cannot be used; the SQLite store's refusals otherwise.
    """
    url = environ.get("PROCTOR_DATABASE_URL")
    if url:
        from proctor.runtime.records.postgres import PostgresRunStore

        return PostgresRunStore(url)
    from proctor.runtime.records.sqlite import SQLiteRunStore

    return SQLiteRunStore(run_store_path(state_dir, environ), shown=shown)

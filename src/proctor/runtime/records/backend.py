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
            that cannot be used; ``store_missing`` (a missing SQLite store that the audit
            log, the receipts or its check mark show existed); the SQLite store's refusals.
    """
    url = environ.get("PROCTOR_DATABASE_URL")
    if url:
        from proctor.runtime.records.postgres import PostgresRunStore

        return PostgresRunStore(url)
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from proctor.runtime.records.store_evidence import refuse_forgotten_in

    path = run_store_path(state_dir, environ)
    # a store the workspace's records show existed is never re-created empty
    refuse_forgotten_in(state_dir.parent, state_dir, environ, path, shown)
    return SQLiteRunStore(path, shown=shown)

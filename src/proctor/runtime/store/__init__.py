"""Run stores: the durable truth of runs. SQLite by default; PostgreSQL later, same interface."""

from proctor.runtime.store.base import RunStore

__all__ = ["RunStore"]

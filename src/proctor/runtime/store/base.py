"""The run store interface. SQLite implements it today; PostgreSQL will implement the same.

The store is the truth of a run: its record, its append-only events, the calls it claimed and
settled, and the journal of file bundles. Rules every implementation keeps:

- events are append-only; nothing updates or deletes one;
- a claim (``claim_call``, ``journal_open``) is durable before the method returns, so an effect
  sent after it can always be reconciled;
- JSON bodies are stored as text and given back as parsed values.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class RunRecord:
    """One run as the store holds it."""

    run_id: str
    skill: str
    method: str
    status: str = "running"
    outcome: str | None = None
    cursor: int = 0
    created_at: str = ""
    updated_at: str = ""
    receipt_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON state of the run (inputs digest, authority, envelope once sealed, ...)."""


@dataclass
class CallRecord:
    """A tool call claimed by a run; ``state`` is ``claimed`` until settled."""

    run_id: str
    call_id: str
    step_id: str | None
    tool: str
    state: str
    args_digest: str
    outcome: str | None = None
    result: Any = None
    idempotency_key: str | None = None


@dataclass
class JournalRecord:
    """A journaled file bundle: before-images of every member, so a half-applied one rolls back."""

    bundle_id: str
    run_id: str
    state: str
    entries: list[dict[str, Any]]


class RunStore(Protocol):
    """What every run store offers. Methods raise :class:`proctor.errors.StoreError`."""

    def transaction(self) -> AbstractContextManager[None]:
        """Group writes into one durable commit (re-entrant: nested uses join the outer one)."""
        ...

    def create_run(self, record: RunRecord) -> RunRecord:
        """Insert a new run; returns it with ``cursor`` and times filled in."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None`` when no run has that id."""
        ...

    def update_run(
        self,
        run_id: str,
        *,
        status: str | None = None,
        outcome: str | None = None,
        receipt_id: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Change a run's status, outcome, receipt id or merge keys into its ``data``."""
        ...

    def list_runs(self, *, after: int | None = None, limit: int = 50) -> list[RunRecord]:
        """Runs newest first; ``after`` is a cursor: only runs older than it."""
        ...

    def append_event(self, run_id: str, kind: str, body: dict[str, Any]) -> int:
        """Append one event to a run; returns its sequence number (from 1)."""
        ...

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """A run's events in order, each ``{seq, at, kind, body}``."""
        ...

    def claim_call(self, call: CallRecord) -> None:
        """Record that a call is about to be sent (durable before returning)."""
        ...

    def settle_call(self, run_id: str, call_id: str, outcome: str, result: Any) -> None:
        """Record how a claimed call ended."""
        ...

    def record_call(self, call: CallRecord) -> None:
        """Claim and settle in one write (for calls with no effect)."""
        ...

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """A call by id, or ``None``."""
        ...

    def calls(self, run_id: str) -> list[CallRecord]:
        """A run's calls in the order they were claimed."""
        ...

    def find_idempotent(self, key: str) -> CallRecord | None:
        """The settled call that carried ``key``, if any."""
        ...

    def journal_open(self, record: JournalRecord) -> None:
        """Journal a bundle's before-images (durable before any member is touched)."""
        ...

    def journal_close(self, bundle_id: str, state: str) -> None:
        """Mark a bundle ``applied`` or ``rolled_back``."""
        ...

    def journal_pending(self) -> list[JournalRecord]:
        """Bundles still ``open``: a crash interrupted them; the next driver reconciles them."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


"""The run store interface, implemented on SQLite (:mod:`.sqlite`) and PostgreSQL.

The store is the truth of a run: its record, its append-only events, the calls it claimed and
settled, and the journal of file bundles. Rules every implementation keeps:

- events are append-only; nothing updates or deletes one;
- a claim (``claim_call``, ``journal_open``) is durable before the method returns, so an effect
  sent after it can always be reconciled;
- JSON bodies are stored as text and given back as parsed values;
- every write for a run whose lease this process holds is fenced by the lease's epoch in the
  same transaction (:mod:`.fencing`): a stale one is refused ``lease_lost``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

from proctor.contracts.values import dataclass, field

PAUSED = "paused_event"
"""The key of a run's data holding the seq of its last ``paused`` event."""


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
    identity: str | None = None
    """The run's package identity (``core:``, ``registry:``, ``local:``; see
    :attr:`proctor.runtime.skills.LoadedSkill.identity`), kept in a column of its own; ``None``
    for a run recorded before identities were."""


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
    result_json: str | None = field(default=None, repr=False, compare=False)
    """The JSON text a store keeps for ``result`` (``rows.dumps`` of it), when the caller has
    it already; the store then writes it as it is instead of encoding ``result`` again."""
    site: dict[str, Any] | None = None
    """Where a claimed call's effect runs (``host``, ``pid``, ``started``: the claiming
    driver's process, the root of the tree its command runs in); the store records it with
    the claim (:func:`proctor.runtime.records.fencing.process_site`)."""
    seq: int = field(default=0, repr=False, compare=False)
    """The call's place in the store's claim order (a later claim has a greater one), set by
    the paged reads (:meth:`RunStore.iter_calls`, :meth:`RunStore.iter_step_calls`); 0 from
    the others."""


@dataclass(frozen=True)
class RunCounts:
    """How much a run has recorded, counted without reading its records.

    Attributes:
        calls: every call recorded (claimed or settled, refused ones included).
        admitted: the calls not refused (what ``max_calls`` counts).
        steps: the settled steps.
    """

    calls: int = 0
    admitted: int = 0
    steps: int = 0


@dataclass(frozen=True)
class LeaseRecord:
    """A run's lease row: its ``holder`` (empty once released), its ``epoch`` (grows by one
    each time another holder takes it), whether it ran out (``lapsed``), and ``taken_from``:
    the holder whose live-but-lapsed (or dead) lease the current holder took over, if any."""

    holder: str
    epoch: int
    lapsed: bool
    taken_from: str | None = None


@dataclass
class RequestRecord:
    """What a paused run waits on: an approval, questions, a retry decision or an agent turn.

    ``state`` is ``open`` (waiting), ``decided`` (a decision no step has used yet) or ``used``
    (a settled step consumed it). ``decision`` is the normalized decision once one is recorded.
    """

    run_id: str
    address: str
    kind: str
    request_digest: str
    body: dict[str, Any]
    state: str = "open"
    decision: dict[str, Any] | None = None
    cursor: int = 0
    """Where the request stands in the store's order of first asking (a page cursor)."""


@dataclass
class PendingRequest:
    """A request a person (or an agent) has not answered yet, with the run that waits on it."""

    run: RunRecord
    request: RequestRecord

    @property
    def cursor(self) -> int:
        """The page cursor: pass it as ``after`` for the next page."""
        return self.request.cursor


@dataclass
class JournalRecord:
    """A journaled file bundle: before-images of every member, so a half-applied one rolls back."""

    bundle_id: str
    run_id: str
    state: str
    entries: list[dict[str, Any]]


START_READS = (
    "SELECT (SELECT body FROM audit_anchor WHERE id = 1),"
    " EXISTS (SELECT 1 FROM journal WHERE state = 'open')"
)
""":meth:`RunStore.start_reads` in SQL (the same text for SQLite and PostgreSQL): one row."""


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

    def find_reusable(self, reuse_key: str, *, since: str) -> RunRecord | None:
        """The newest run sealed ``completed`` whose ``data.reuse_key`` is ``reuse_key`` and
        that sealed at or after ``since`` (an ISO time); ``None`` when there is none."""
        ...

    def list_runs(
        self, *, after: int | None = None, limit: int = 50, data: bool = True
    ) -> list[RunRecord]:
        """Runs newest first; ``after`` is a cursor: only runs older than it (one read of the
        primary key from there). ``data=False`` leaves each record's ``data`` empty (a list of
        runs, with nothing of their state decoded)."""
        ...

    def append_event(self, run_id: str, kind: str, body: dict[str, Any]) -> int:
        """Append one event to a run; returns its sequence number (from 1)."""
        ...

    def events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """A run's events in order, each ``{seq, at, kind, body}``: those after ``after`` (a
        ``seq``), at most ``limit`` of them (``None``: all). The store reads only those rows
        (from the primary key at ``after``), so a page costs the same late in a long run."""
        ...

    def claim_call(self, call: CallRecord) -> None:
        """Record that a call is about to be sent (durable before returning)."""
        ...

    def settle_call(
        self, run_id: str, call_id: str, outcome: str, result: Any, *, reconciled: bool = False
    ) -> None:
        """Record how a claimed call ended: only a call still ``claimed``, and only under the
        epoch that claimed it; ``reconciled`` settles a claim an earlier holder of the lease
        left (the current holder deciding what it means).

        Raises:
            LeaseLost: this process no longer holds the run's lease (nothing written).
            StoreError: ``call_not_claimed``: the call is not claimed under this epoch.
        """
        ...

    def record_call(self, call: CallRecord) -> None:
        """Claim and settle in one write (for calls with no effect)."""
        ...

    def note_call_site(self, run_id: str, call_id: str, tree: dict[str, float]) -> None:
        """Add to a claimed call's site the process tree its effect runs in (``tree``: the
        started program's root pids and start times), so that a taker can end it.

        Raises:
            LeaseLost: this process no longer holds the run's lease (nothing written).
        """
        ...

    def get_call(self, run_id: str, call_id: str) -> CallRecord | None:
        """A call by id, or ``None``."""
        ...

    def calls(self, run_id: str) -> list[CallRecord]:
        """A run's calls in the order they were claimed."""
        ...

    def iter_calls(
        self,
        run_id: str,
        *,
        batch: int = 1000,
        newest_first: bool = False,
        after: int | None = None,
        through: int | None = None,
    ) -> Iterator[CallRecord]:
        """A run's calls in claim order (``newest_first``: the other way), each with its
        ``seq``, read ``batch`` rows at a time from where the last page ended: a run of a
        million calls is read holding one page (:mod:`.paged`). Calls claimed while the
        iterator runs may or may not be included. ``after`` and ``through`` bound the calls
        read by ``seq`` (those past ``after``, those up to ``through``); with both, the run's
        first and last ``seq`` are not looked up.

        Raises:
            ValueError: ``batch`` is below 1.
        """
        ...

    def iter_step_calls(
        self, run_id: str, step_id: str | None, *, batch: int = 1000
    ) -> Iterator[CallRecord]:
        """:meth:`step_calls` a page of ``batch`` at a time, each with its ``seq``.

        Raises:
            ValueError: ``batch`` is below 1.
        """
        ...

    def unsettled_call_steps(self, run_id: str) -> list[str | None]:
        """The step ids of the run's calls that no settled step has, in the order of each
        one's first claim (``None``: calls of no step)."""
        ...

    def step_calls(self, run_id: str, step_id: str | None) -> list[CallRecord]:
        """One step's calls in the order they were claimed; reads that step's rows only, so a
        step's work does not grow with the run."""
        ...

    def run_counts(self, run_id: str) -> RunCounts:
        """The run's call and step counts, in time independent of the run's length."""
        ...

    def find_idempotent(self, key: str) -> CallRecord | None:
        """The settled call that carried ``key``, if any."""
        ...

    def settle_step(
        self, run_id: str, step_id: str, body: dict[str, Any], *, used: list[str] | None = None
    ) -> None:
        """Record a step's settlement (outcome, output, times) once, durably, and mark the
        decisions at ``used`` addresses as used in the same commit.

        Raises:
            StoreError: the step is already settled.
        """
        ...

    def step_records(self, run_id: str) -> dict[str, dict[str, Any]]:
        """Settled steps by id, in the order they settled."""
        ...

    def step_record(self, run_id: str, step_id: str) -> dict[str, Any] | None:
        """One settled step's record, read by its key (``None``: not settled)."""
        ...

    def iter_step_records(
        self, run_id: str, *, batch: int = 1000
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """:meth:`step_records` as ``(step_id, body)`` pairs, a page of ``batch`` at a time.

        Raises:
            ValueError: ``batch`` is below 1.
        """
        ...

    def put_request(self, request: RequestRecord) -> RequestRecord:
        """Open a request at its address. The same digest keeps what is recorded (a decision
        included); a different digest replaces the request and drops a decision not used."""
        ...

    def requests(self, run_id: str) -> list[RequestRecord]:
        """Every request of a run (open, decided and used), in the order first asked."""
        ...

    def request(self, run_id: str, address: str) -> RequestRecord | None:
        """The run's request at ``address`` (open, decided or used), else ``None``: one row by
        the key it is unique on, however many requests the run has."""
        ...

    def pending_requests(
        self, *, after: int | None = None, limit: int = 50
    ) -> list[PendingRequest]:
        """Requests still ``open`` on runs that have not sealed, with their runs, in the order
        first asked; ``after`` is a cursor (a request's ``cursor``): only requests asked after
        it. Reads one page of the index of open requests, so the time does not grow with the
        number of runs, sealed or paused, before the page."""
        ...

    def record_decisions(self, run_id: str, decisions: dict[str, dict[str, Any]]) -> None:
        """Record decisions by address in one durable commit (state ``decided``)."""
        ...

    def acquire_lease(
        self, run_id: str, holder: str, ttl_seconds: float, *, steal_from: str | None = None
    ) -> str | None:
        """Take the run's lease; ``None`` when taken, else the live holder's id. An expired
        lease, or one held by ``steal_from`` (a holder known to be dead), is taken over."""
        ...

    def renew_lease(self, run_id: str, holder: str, ttl_seconds: float) -> bool:
        """Extend ``holder``'s lease by ``ttl_seconds`` from now, only while it holds the lease
        under the epoch it took; False when it does not (another holder took it, or it was
        released), and nothing is changed then."""
        ...

    def lease(self, run_id: str) -> LeaseRecord | None:
        """The run's lease row, or ``None`` when no driver ever held it."""
        ...

    def taken_lease(self, run_id: str) -> LeaseRecord | None:
        """The run's lease as this store's last :meth:`acquire_lease` of it left it (a store
        may read the row again; one that remembers it spares a round trip), or ``None``."""
        ...

    def release_lease(self, run_id: str, holder: str) -> None:
        """Give the lease back if ``holder`` holds it (the row and its epoch stay)."""
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

    def record_audit_anchor(self, anchor: dict[str, Any]) -> None:
        """Keep ``anchor`` (``{lines, last_digest, run_id, receipt_id}``: the audit log's head
        after a run sealed) as the newest anchor, unless one with more lines is kept already."""
        ...

    def audit_anchor(self) -> dict[str, Any] | None:
        """The newest audit anchor kept, or ``None``."""
        ...

    def start_reads(self) -> tuple[dict[str, Any] | None, bool]:
        """:meth:`audit_anchor` and whether a bundle journal is open, in one read: what a run's
        start checks before its first write. ``False`` means :meth:`journal_pending` would
        answer none; ``True`` that it may answer some (on PostgreSQL it leaves out bundles
        whose run another machine holds)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...

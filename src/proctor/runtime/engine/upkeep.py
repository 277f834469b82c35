"""What is due on a workspace's waiting requests: notifications to send and deadlines to settle.

The seam: the run driver decides *that* a run pauses (:mod:`.pausing`); this module writes
what the pause owes people later, into the outbox of the run store (:func:`on_pause`), and
settles what has come due (:func:`settle`): it sends due notifications
(:func:`proctor.runtime.notify.deliver.deliver_due`) and decides every request whose deadline
passed by its default, as the author ``deadline`` with the reason ``expired``, as a
``proctor.resume.v1`` document through :meth:`Session.resume`, the path every person's decision
takes (so it is recorded in the run store, the audit log and the receipt like any other
decision, and the run moves on). A paused run past its authority's ``deadline`` is sealed
``failed`` (``deadline_passed``). A timed wait (a wait step's request) has a timer due at its
``until``: once due, the run is resumed with the empty document, which settles the wait
(:mod:`.waits`).

Who settles: a worker's loop, the console's process, and in a workspace with neither the next
``proctor`` command that opens the run store (:meth:`Session.close`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from proctor.core.resume import PERSON_KINDS
from proctor.errors import ProctorError
from proctor.runtime.engine.host import RunHost
from proctor.runtime.engine.request_lines import summary_of
from proctor.runtime.notify.config import NotifyConfig, load_notify
from proctor.runtime.notify.queue import DEADLINE_CHANNEL, RequestFacts, deadline_entry, entries_for
from proctor.runtime.records.outbox import Outbox, OutboxEntry, notification_id

if TYPE_CHECKING:
    from proctor.contracts.envelope import RunEnvelope
    from proctor.runtime.engine.host import StepRunner
    from proctor.runtime.records.runs import RequestRecord

__all__ = [
    "EXPIRED",
    "RUN_DEADLINE_CHANNEL",
    "WAIT_CHANNEL",
    "notify_config",
    "on_pause",
    "settle",
]

RUN_DEADLINE_CHANNEL = "@run_deadline"
"""The pseudo-channel of a paused run's own deadline (its authority's ``deadline``)."""

WAIT_CHANNEL = "@wait"
"""The pseudo-channel of a timed wait's timer (due at its ``until``)."""

EXPIRED = "expired"
"""The reason a deadline's decision records (its author is ``deadline``)."""

_CONFIGS: dict[Path, tuple[float, NotifyConfig]] = {}


class Settling(RunHost, Protocol):
    """What settling uses of a session (:class:`proctor.runtime.engine.session.Session`)."""

    def _acquire(self, run_id: str) -> None: ...

    def _release(self, run_id: str) -> None: ...

    def resume(
        self, run_id: str, document: dict[str, Any], *, decided_by: str | None = None
    ) -> RunEnvelope: ...


def notify_config(root: Path) -> NotifyConfig:
    """The workspace's ``[notify]``/``[approvals]`` (read again when ``proctor.toml`` changes).

    Raises:
        ConfigError: ``notify_config_invalid``, ``bad_config``.
    """
    try:  # by the path's text: asked at every run's start
        stamp = os.stat(os.path.join(root, "proctor.toml")).st_mtime
    except OSError:
        return NotifyConfig()
    cached = _CONFIGS.get(root)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    config = load_notify(root)
    _CONFIGS[root] = (stamp, config)
    return config


def _deadline(body: dict[str, Any], config: NotifyConfig) -> tuple[int | None, str]:
    expires_in = body.get("expires_in")
    if isinstance(expires_in, int) and not isinstance(expires_in, bool) and expires_in > 0:
        on_expiry = "approve" if body.get("on_expiry") == "approve" else "decline"
        return expires_in, on_expiry
    return config.expires_in, "decline"


def on_pause(run: StepRunner, requests: list[RequestRecord], views: list[dict[str, Any]]) -> None:
    """Write the outbox entries ``requests`` owe (their notifications and deadline timers),
    keeping any written by an earlier pause (their ids and times).

    Raises:
        ConfigError: ``proctor.toml``'s ``[notify]`` or ``[approvals]`` is invalid (the run
            pauses only once it is mended: a notification is never silently dropped).
    """
    s = run.s
    config = notify_config(s.workspace.root)
    deadline = run.authority.deadline_at()
    waits = [_wait_timer(run.run_id, r) for r in requests if r.kind == "wait"]
    if (
        not config.channels
        and config.expires_in is None
        and deadline is None
        and not waits
        and not any("expires_in" in r.body for r in requests)
    ):
        return
    outbox = Outbox(s.store)
    at = time.time()
    entries: list[OutboxEntry] = [w for w in waits if not outbox.has(w.id)]
    if deadline is not None:
        stated = run.authority.deadline or ""
        entries.append(_run_deadline(run.run_id, stated, deadline.timestamp()))
    for request, view in zip(requests, views, strict=True):
        if request.kind not in PERSON_KINDS:
            continue
        facts = RequestFacts(
            run_id=run.run_id,
            skill=run.record.skill,
            method=run.record.method,
            address=request.address,
            kind=request.kind,
            request_digest=request.request_digest,
            summary=summary_of(request.kind, view),
            payload=view.get("payload"),
        )
        expires_in, on_expiry = _deadline(request.body, config)
        if expires_in is not None:
            timer = deadline_entry(_with(facts, at + expires_in), on_expiry)
            kept = outbox.get(timer.id)
            facts.expires_at = kept.due_at if kept is not None else timer.due_at
            entries.append(deadline_entry(facts, on_expiry) if kept is None else kept)
        entries.extend(e for e in entries_for(config, facts, opened_at=at) if not outbox.has(e.id))
    if entries:
        outbox.put(entries)


def _run_deadline(run_id: str, deadline: str, at: float) -> OutboxEntry:
    entry_id = notification_id(run_id, "", deadline, RUN_DEADLINE_CHANNEL, "deadline")
    return OutboxEntry(
        id=entry_id,
        run_id=run_id,
        address="",
        request_digest="",
        channel=RUN_DEADLINE_CHANNEL,
        stage="deadline",
        body={"deadline": deadline},
        due_at=at,
    )


def _wait_timer(run_id: str, request: RequestRecord) -> OutboxEntry:
    """The timer of a wait request, due at its ``until`` (milliseconds since the epoch)."""
    entry_id = notification_id(run_id, request.address, request.request_digest, WAIT_CHANNEL, "due")
    return OutboxEntry(
        id=entry_id,
        run_id=run_id,
        address=request.address,
        request_digest=request.request_digest,
        channel=WAIT_CHANNEL,
        stage="due",
        body={"until": request.body.get("until")},
        due_at=float(request.body.get("until") or 0) / 1000,
    )


def _wake(session: Settling, outbox: Outbox, entry: OutboxEntry, at: float) -> None:
    """Resume a run whose timed wait is due with the empty document (which settles it), if it
    still waits on the same request; a run another process drives is tried again shortly."""
    if not _take_open(session, outbox, entry, at, answered="settled"):
        return
    try:
        session.resume(entry.run_id, {})
    except ProctorError as exc:
        if exc.code in ("run_busy", "lease_held"):
            outbox.settle(entry.id, "pending", due_at=at + 5, note=exc.code)
            return
        outbox.settle(entry.id, "failed", due_at=at, note=exc.code)
        return
    if _still_open(session, entry):  # the run's clock is behind this one's: look again soon
        outbox.settle(entry.id, "pending", due_at=at + 5, note="not yet due")
        return
    outbox.settle(entry.id, "delivered", due_at=at, note="woken")


def _stop_run(session: Settling, outbox: Outbox, entry: OutboxEntry, at: float) -> None:
    """Stop a run still paused past its authority's deadline: sealed ``failed``
    (``deadline_passed``), under its lease."""
    from proctor.contracts.envelope import Refusal
    from proctor.runtime.engine.sealing import seal_run

    if not outbox.take(entry, at + 30):
        return
    try:
        session._acquire(entry.run_id)
    except ProctorError as exc:
        outbox.settle(entry.id, "pending", due_at=at + 5, note=exc.code)
        return
    try:
        record = session.store.get_run(entry.run_id)
        if record is None or record.status == "sealed":
            outbox.settle(entry.id, "delivered", due_at=at, note="skipped: sealed")
            return
        deadline = str(entry.body.get("deadline"))
        session.audit.emit(
            "run_deadline_passed", run_id=entry.run_id, step_index=None, deadline=deadline
        )
        message = f"the run's deadline ({deadline}) passed while it waited; it was stopped"
        seal_run(
            session,
            record,
            outcome="failed",
            seal_reason="deadline_passed",
            result=None,
            refusal=Refusal(code="run_deadline_passed", message=message),
        )
        outbox.settle(entry.id, "delivered", due_at=at, note="stopped")
    finally:
        session._release(entry.run_id)


def _with(facts: RequestFacts, expires_at: float) -> RequestFacts:
    facts.expires_at = expires_at
    return facts


def _take_open(
    session: Settling, outbox: Outbox, entry: OutboxEntry, at: float, *, answered: str
) -> bool:
    """Take ``entry`` for this process; True when its request still waits with the same digest
    on a run not sealed. Otherwise the entry is settled as skipped (``answered`` names why a
    request that no longer waits stopped waiting) and False is returned."""
    if not outbox.take(entry, at + 30):
        return False
    if not _still_open(session, entry):
        outbox.settle(entry.id, "delivered", due_at=at, note=f"skipped: {answered}")
        return False
    run = session.store.get_run(entry.run_id)
    if run is None or run.status == "sealed":
        outbox.settle(entry.id, "delivered", due_at=at, note="skipped: sealed")
        return False
    return True


def _still_open(host: Settling, entry: OutboxEntry) -> bool:
    for request in host.store.requests(entry.run_id):
        if request.address == entry.address:
            return request.state == "open" and request.request_digest == entry.request_digest
    return False


def _expire(session: Settling, outbox: Outbox, entry: OutboxEntry, at: float) -> None:
    """Decide ``entry``'s request by its default, if it still waits with the same digest."""
    if not _take_open(session, outbox, entry, at, answered="decided"):
        return
    approve = entry.body.get("on_expiry") == "approve"
    session.audit.emit(
        "request_expired",
        run_id=entry.run_id,
        step_index=None,
        address=entry.address,
        request_digest=entry.request_digest,
        on_expiry="approve" if approve else "decline",
        decided_by="deadline",
    )
    try:
        _decide_by_default(session, entry, approve)
    except ProctorError as exc:
        if exc.code in ("run_busy", "lease_held"):
            outbox.settle(entry.id, "pending", due_at=at + 5, note=exc.code)
            return
        outbox.settle(entry.id, "failed", due_at=at, note=exc.code)
        return
    outbox.settle(entry.id, "delivered", due_at=at, note=EXPIRED)


def _decide_by_default(session: Settling, entry: OutboxEntry, approve: bool) -> None:
    """Record the deadline's decision as a resume document, as a person's would be: an
    approval approved or declined, a retry not sent, questions closed ``declined``.

    Raises:
        ResumeRefused: every refusal of ``Session.resume`` (``approvals_needed``: a deadline
            never stands in for the people a two-person rule needs).
    """
    kind = next(
        (r.kind for r in session.store.requests(entry.run_id) if r.address == entry.address), ""
    )
    base = {"request_digest": entry.request_digest}
    if kind == "approval":
        answer = {**base, "approved": approve, "reason": EXPIRED}
    elif kind == "retry":
        answer = {**base, "value": {"retry": False}}
    else:  # questions have no default answer: they close the run declined
        session._acquire(entry.run_id)
        try:
            session.audit.emit(
                "close_decided",
                run_id=entry.run_id,
                step_index=None,
                address=entry.address,
                outcome="declined",
                request_digest=entry.request_digest,
                decided_by="deadline",
            )
            declined = {**base, "approved": False, "reason": EXPIRED, "decided_by": "deadline"}
            session.store.record_decisions(entry.run_id, {entry.address: declined})
            session.resume(entry.run_id, {"schema": RESUME, "close": {"outcome": "declined"}})
        finally:
            session._release(entry.run_id)
        return
    document = {"schema": RESUME, "approvals": {entry.address: answer}}
    session.resume(entry.run_id, document, decided_by="deadline")


RESUME = "proctor.resume.v1"


def settle(session: Settling, *, now: float | None = None) -> None:
    """Send the notifications due and settle the deadlines that passed (see the module).

    Raises:
        ConfigError: ``proctor.toml`` is invalid.
        StoreError: the run store's refusals.
    """
    config = notify_config(session.workspace.root)
    outbox = Outbox(session.store)
    at = time.time() if now is None else now
    for entry in outbox.due(at, limit=100):
        if entry.channel == DEADLINE_CHANNEL:
            _expire(session, outbox, entry, at)
        elif entry.channel == RUN_DEADLINE_CHANNEL:
            _stop_run(session, outbox, entry, at)
        elif entry.channel == WAIT_CHANNEL:
            _wake(session, outbox, entry, at)
    if config.channels:
        from proctor.runtime.notify.deliver import deliver_due, profile_keys

        home = session.environ.get("PROCTOR_HOME")
        deliver_due(
            outbox,
            config,
            session.workspace.root,
            session.audit,
            now=at,
            secret_lookup=profile_keys(Path(home) if home else None),
            still_open=lambda e: _still_open(session, e),
        )

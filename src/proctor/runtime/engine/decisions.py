"""Recording what an admitted resume document decided, before the run moves on.

Each decision is written to the run store (with who decided, when a surface names them), then
an event and an audit line; standing approvals replace the run's recorded ones. All of it is
durable before any step runs again, so a crash after this point resumes with the decisions
already made and never asks again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proctor.contracts.values import replace
from proctor.core.authority import parse_authority
from proctor.errors import ResumeRefused
from proctor.runtime.records.runs import PAUSED
from proctor.runtime.testhooks import kill_point

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from proctor.core.resume import RequestView, ResumePlan
    from proctor.runtime.engine.host import RunHost
    from proctor.runtime.records.runs import RunRecord, RunStore

__all__ = ["approvers_of", "needed_approvers", "record_plan"]


def needed_approvers(body: Mapping[str, Any]) -> int:
    """How many distinct people must approve the request with ``body`` (1 unless it says)."""
    needed = body.get("approvals")
    return needed if isinstance(needed, int) and not isinstance(needed, bool) else 1


def approvers_of(record: RunRecord, address: str, request_digest: str) -> list[str]:
    """The people counted so far as approving ``address`` at exactly ``request_digest``."""
    counted = (record.data.get("approvers") or {}).get(address) or {}
    if counted.get("request_digest") != request_digest:
        return []
    return [str(p) for p in counted.get("people") or []]


def _check_approvers(
    session: RunHost, record: RunRecord, plan: ResumePlan, asked: Sequence[RequestView]
) -> None:
    """Refuse an approval of a request that needs more people than have been counted."""
    read = {view.address: view for view in asked}
    for address, decision in plan.decisions.items():
        view = read.get(address)
        if view is not None and view.digest == decision.get("request_digest"):
            body = view.body  # the request decided, as the resume read it: not read again
        else:
            row = session.store.request(record.run_id, address)  # by its key, not every one
            body = row.body if row is not None else {}
        needed = needed_approvers(body)
        if needed < 2 or decision.get("approved") is not True:
            continue
        have = approvers_of(record, address, str(decision.get("request_digest")))
        if len(have) < needed:
            raise ResumeRefused(
                f"{address!r} needs {needed} distinct people to approve, and {len(have)}"
                " have: each approves with `proctor approve`, the console or an MCP client;"
                " nothing was recorded",
                code="approvals_needed",
            )


def record_plan(
    session: RunHost,
    record: RunRecord,
    plan: ResumePlan,
    decided_by: str | None,
    *,
    views: Sequence[RequestView] = (),
) -> RunRecord:
    """Record ``plan``'s decisions and standing approvals; the run's record as it is after.
    ``views``: the requests the plan was admitted on (a decided request's body, where its
    digest is the decision's, is taken from there rather than read again)."""
    run_id = record.run_id
    store, audit = session.store, session.audit
    if plan.decisions:
        _check_approvers(session, record, plan, views)
        if decided_by is not None:
            plan.decisions = {a: {**d, "decided_by": decided_by} for a, d in plan.decisions.items()}
        store.record_decisions(run_id, plan.decisions)
        asked = _asked_at(_pause_events(store, record, plan.decisions))
        for address, decision in plan.decisions.items():
            store.append_event(run_id, "decision_recorded", {"address": address})
            audit.emit(
                "decision_recorded",
                run_id=run_id,
                step_index=None,
                address=address,
                lane=decision.get("lane"),
                approved=decision.get("approved"),
                retry=decision.get("retry"),
                request_digest=decision.get("request_digest"),
                decided_by=decision.get("decided_by"),
                waited_since=asked.get(address),
            )
        kill_point("resume.recorded")
    if plan.standing is None:
        return record
    recorded = record.data.get("authority") or {}
    current = parse_authority(recorded, recorded=True)
    updated = replace(current, standing_approvals=plan.standing)
    store.update_run(run_id, data={"authority": {**recorded, **updated.to_json()}})
    store.append_event(run_id, "standing_approvals", {"count": len(plan.standing)})
    audit.emit(
        "standing_approvals_set",
        run_id=run_id,
        step_index=None,
        entries=[s.to_json() for s in plan.standing],
    )
    fresh = store.get_run(run_id)
    assert fresh is not None  # the run was read under this driver's lease
    return fresh


def _pause_events(
    store: RunStore, record: RunRecord, decided: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The run's last ``paused`` event (its seq is in the run's data) when it names every
    address decided, else every event of the run (a record from before it was kept)."""
    seq = record.data.get(PAUSED)
    if isinstance(seq, int) and seq > 0:
        last = store.events(record.run_id, after=seq - 1, limit=1)
        named = set((last[0].get("body") or {}).get("addresses") or ()) if last else set()
        if last and last[0].get("kind") == "paused" and named.issuperset(decided):
            return last
    return store.events(record.run_id)


def _asked_at(events: list[dict[str, Any]]) -> dict[str, Any]:
    """When the run last paused on each address (the approval wait's start, for telemetry)."""
    asked: dict[str, Any] = {}
    for event in events:
        if event.get("kind") == "paused":
            for address in (event.get("body") or {}).get("addresses") or ():
                asked[str(address)] = event.get("at")
    return asked

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
from proctor.runtime.testhooks import kill_point

if TYPE_CHECKING:
    from proctor.core.resume import ResumePlan
    from proctor.runtime.engine.host import RunHost
    from proctor.runtime.records.runs import RunRecord

__all__ = ["record_plan"]


def record_plan(
    session: RunHost, record: RunRecord, plan: ResumePlan, decided_by: str | None
) -> RunRecord:
    """Record ``plan``'s decisions and standing approvals; the run's record as it is after."""
    run_id = record.run_id
    store, audit = session.store, session.audit
    if plan.decisions:
        if decided_by is not None:
            plan.decisions = {a: {**d, "decided_by": decided_by} for a, d in plan.decisions.items()}
        store.record_decisions(run_id, plan.decisions)
        asked = _asked_at(store.events(run_id))
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


def _asked_at(events: list[dict[str, Any]]) -> dict[str, Any]:
    """When the run last paused on each address (the approval wait's start, for telemetry)."""
    asked: dict[str, Any] = {}
    for event in events:
        if event.get("kind") == "paused":
            for address in (event.get("body") or {}).get("addresses") or ():
                asked[str(address)] = event.get("at")
    return asked

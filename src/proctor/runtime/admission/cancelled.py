"""A call ended from outside is settled, never left in doubt.

A call whose program was stopped (a cancelled MCP call, Ctrl-C, a worker's SIGTERM) is
settled ``cancelled`` at once, so it is never left in doubt.

Seam: the governor runs and records calls that end; this is the record of one that was ended
from outside. The program's whole process tree was killed and waited for before
:class:`~proctor.runtime.tools.base.CommandStopped` reached here, so nothing of it can still
change anything: the claim is settled (``status: cancelled``, with what proctor knows: when it
started, when it was stopped, that the tree was killed), the audit log names it, and the step
sends the call again when the run is resumed, with no retry question (the stop was a person's
or a client's decision, recorded here; there is no crash to reconcile).

A write whose answer never came (:class:`~proctor.runtime.tools.base.OutcomeUnknown`) is
handed back to a fixed step, which reconciles it at once (its readback, or a person); any other
caller settles it ``failed`` (:func:`unanswered`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from proctor.errors import ToolFailed
from proctor.runtime.tools.base import CommandStopped, OutcomeUnknown, Tool

if TYPE_CHECKING:
    from proctor.runtime.admission.calls import CallOutcome, CallSpec
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.records.runs import RunStore

__all__ = ["settle_cancelled", "unanswered"]


def settle_cancelled(
    store: RunStore,
    audit: AuditLog,
    run_id: str,
    spec: CallSpec,
    tool: Tool,
    outcome: CallOutcome,
    stopped: CommandStopped,
    extra: dict[str, Any],
    *,
    ended: datetime,
) -> None:
    """Settle the claimed call ``outcome.call_id`` as ``cancelled`` and audit it
    (``tool_call``, outcome ``cancelled``).

    Raises:
        StoreError: the store could not record it (the claim then stays for a person).
    """
    started = outcome.started_at
    error = {"code": "call_cancelled", "message": str(stopped)}
    store.settle_call(
        run_id,
        outcome.call_id,
        "cancelled",
        {
            "status": "cancelled",
            "result": None,
            "error": error,
            "effect": tool.effect,
            "started_at": None if started is None else started.isoformat(),
            "ended_at": ended.isoformat(),
            "process_tree_killed": True,
            **extra,
        },
    )
    audit.emit(
        "tool_call",
        run_id=run_id,
        step_index=spec.step_index,
        tool=tool.name,
        call_id=outcome.call_id,
        effect=tool.effect,
        outcome="cancelled",
        code="call_cancelled",
    )


def unanswered(unknown: OutcomeUnknown, reconciles: bool) -> dict[str, Any]:
    """The error a write whose answer never came settles with (``operation_outcome_unknown``),
    for a caller that does not reconcile it itself.

    Raises:
        OutcomeUnknown: ``unknown`` again when the caller reconciles it (a fixed step: its
            readback, or a person), the claim left unsettled for it.
    """
    if reconciles:
        raise unknown
    return ToolFailed(str(unknown), code="operation_outcome_unknown").to_dict()

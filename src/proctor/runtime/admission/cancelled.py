"""A call whose program was stopped (a cancelled MCP call, Ctrl-C, a worker's SIGTERM) is
settled ``cancelled`` at once, so it is never left in doubt.

Seam: the governor runs and records calls that end; this is the record of one that was ended
from outside. The program's whole process tree was killed and waited for before
:class:`~proctor.runtime.tools.base.CommandStopped` reached here, so nothing of it can still
change anything: the claim is settled (``status: cancelled``, with what proctor knows: when it
started, when it was stopped, that the tree was killed), the audit log names it, and the step
sends the call again when the run is resumed, with no retry question (the stop was a person's
or a client's decision, recorded here; there is no crash to reconcile).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from proctor.runtime.tools.base import CommandStopped

if TYPE_CHECKING:
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.records.runs import RunStore

__all__ = ["settle_cancelled"]


def settle_cancelled(
    store: RunStore,
    audit: AuditLog,
    *,
    run_id: str,
    call_id: str,
    tool: str,
    effect: str,
    step_index: int | None,
    started: datetime | None,
    ended: datetime,
    stopped: CommandStopped,
    extra: dict[str, Any],
) -> None:
    """Settle the claimed call ``call_id`` as ``cancelled`` and audit it (``tool_call``,
    outcome ``cancelled``).

    Raises:
        StoreError: the store could not record it (the claim then stays for a person).
    """
    error = {"code": "call_cancelled", "message": str(stopped)}
    store.settle_call(
        run_id,
        call_id,
        "cancelled",
        {
            "status": "cancelled",
            "result": None,
            "error": error,
            "effect": effect,
            "started_at": None if started is None else started.isoformat(),
            "ended_at": ended.isoformat(),
            "process_tree_killed": True,
            **extra,
        },
    )
    audit.emit(
        "tool_call",
        run_id=run_id,
        step_index=step_index,
        tool=tool,
        call_id=call_id,
        effect=effect,
        outcome="cancelled",
        code="call_cancelled",
    )

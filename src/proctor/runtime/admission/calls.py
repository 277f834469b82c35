"""What one proposed call is and what became of it: the types :mod:`.governor` admits and
answers with (re-exported there, so callers import them from either)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from proctor.runtime.records.runs import CallRecord

if TYPE_CHECKING:
    from proctor.runtime.boundary.sandbox import SandboxUse

__all__ = ["AwaitApproval", "CallOutcome", "CallSpec", "CallStatus"]

CallStatus = Literal["completed", "failed", "refused"]


@dataclass(frozen=True)
class CallSpec:
    """One proposed call.

    Attributes:
        tool: the tool name as proposed.
        args: the arguments as proposed (never trusted).
        allowance: tools the step or turn may call; empty admits nothing.
        step_id / step_index: where in the run the call is made.
        reason: the caller's stated reason.
        call_id: a host-pinned id (a repeat returns the recorded call); generated when absent.
        idempotency_key: an effect already done under this key is not sent again.
        address: where an approval of this call is asked (default: the step id).
        cancel: set it to cancel the call: a read in flight stops (``call_cancelled``); an
            effect in flight runs to its end and settles as it ended, the cancel recorded
            beside it; a call not started yet is not sent.
        can_wait: ``False`` for a caller that cannot pause on a person (a managed agent
            turn): a change the floor would hold is refused ``approval_required`` instead,
            recorded like any refusal.
        problem: why the caller could not read the call's arguments (a model's arguments
            that are not a JSON object: ``arguments_unparsable``, ``duplicate_key``,
            ``too_deep``); the call is refused with that code and recorded, ``args`` empty.
    """

    tool: str
    args: Mapping[str, Any]
    allowance: frozenset[str]
    step_id: str | None = None
    step_index: int | None = None
    reason: str = ""
    call_id: str | None = None
    idempotency_key: str | None = None
    address: str | None = None
    cancel: threading.Event | None = field(default=None, compare=False)
    can_wait: bool = True
    problem: str | None = None


class _AlreadyDone(Exception):
    def __init__(self, record: CallRecord) -> None:
        super().__init__(record.call_id)
        self.record = record


class AwaitApproval(Exception):
    """The floor holds a change under ``effects: ask``: the run pauses on this request.

    Attributes:
        address: where the request is asked (a step id, or ``step/call`` in a turn).
        body: what the person sees: the tool, the reason and exactly what executes.
        request_digest: the digest of ``body``; a decision binds to it.
    """

    def __init__(self, address: str, body: dict[str, Any], request_digest: str) -> None:
        super().__init__(f"{address} waits on a person's approval")
        self.address = address
        self.body = body
        self.request_digest = request_digest


@dataclass
class CallOutcome:
    """What became of one call. ``result`` and ``error`` are already sanitized."""

    call_id: str
    tool: str
    step_id: str | None
    status: CallStatus
    result: Any = None
    error: dict[str, Any] | None = None
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    args_digest: str = ""
    outputs_digest: str | None = None
    effect: str = "none"
    started_at: datetime | None = None
    ended_at: datetime | None = None
    already_done: str | None = None
    approved_by: str | None = None
    sandbox: SandboxUse | None = None

    @property
    def ok(self) -> bool:
        """True when the tool ran and completed."""
        return self.status == "completed"

    @property
    def code(self) -> str | None:
        """The refusal or failure code, if any."""
        return None if self.error is None else str(self.error.get("code"))

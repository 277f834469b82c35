"""What admission takes and gives: a proposed call, its outcome, and the floor's pause.

These are the governor's surface (re-exported by :mod:`.governor`), kept apart so the path
itself stays one readable module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from proctor.contracts.values import dataclass, field

if TYPE_CHECKING:
    import threading

    from proctor.runtime.boundary.sandbox import SandboxUse
    from proctor.runtime.tools.base import Tool

__all__ = ["AwaitApproval", "CallOutcome", "CallSpec", "CallStatus", "Clock", "Deliver", "utc_now"]

CallStatus = Literal["completed", "failed", "refused"]
Clock = Callable[[], datetime]
Deliver = Callable[["CallSpec", "Tool"], dict[str, Any]]
"""The delivery seam: returns extras for the tool context (e.g. a resolved credential)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


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
        reconciles: the caller (a fixed step) reconciles a write whose answer never came:
            :class:`~proctor.runtime.tools.base.OutcomeUnknown` reaches it with the claim
            unsettled. Otherwise such a call settles ``failed`` (``operation_outcome_unknown``).
        approvals: distinct people the floor's approval of this call needs (the authority's
            ``min_approvers`` when more).
        expires_in: seconds the floor's approval waits before it is declined (else the
            authority's ``expires_in``).
        required: the step asks a person for this call (an operation step's ``approval:``),
            as an operation declared ``approval: required`` does: only a decision bound to
            the exact call admits it, under any ``effects`` but ``none`` (which refuses it).
        approval_type: the kind of decision the step asks for (``approval.type``), stated in
            the request.
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
    reconciles: bool = False
    approvals: int = 1
    expires_in: int | None = None
    required: bool = False
    approval_type: str | None = None


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
    retained_args: Any = None
    """The call's arguments, scrubbed, when its run retains them for replay (they are
    recorded beside its result; :mod:`proctor.runtime.records.retention`)."""
    result_text: str | None = field(default=None, repr=False, compare=False)
    """``result`` as the JSON text its digest was taken over when the governor wrote it
    (``json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``; ``None``
    otherwise): a caller that answers with the result as JSON text need not encode it again."""

    @property
    def ok(self) -> bool:
        """True when the tool ran and completed."""
        return self.status == "completed"

    @property
    def code(self) -> str | None:
        """The refusal or failure code, if any."""
        return None if self.error is None else str(self.error.get("code"))

"""A person's decisions as admission reads them: whether a call may ask at all, the decision
recorded for a request, a decline bound to the exact call it was asked for, and the refusal
of a call that would ask in a turn that cannot wait.

A decline is looked for before anything reads the world (containment, policy, the idempotency
record, the floor's preview): a call that went stale while the run waited is still the call
the person declined, and is never re-checked or sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proctor.core.authority import Authority
from proctor.errors import RefusedCall
from proctor.runtime.admission.calls import CallOutcome
from proctor.runtime.admission.operations import approval_required
from proctor.runtime.records.runs import RequestRecord, RunStore
from proctor.runtime.tools.base import CHANGING_EFFECTS, Tool

__all__ = ["cannot_wait", "decision_for", "declined", "may_ask", "unless_declined"]


def may_ask(tool: Tool, authority: Authority, *, required: bool = False) -> bool:
    """Whether the floor may ask a person about a call of ``tool`` under ``authority``
    (``required``: the step itself asks for the call's approval)."""
    if required or approval_required(tool):
        return True
    return tool.effect in CHANGING_EFFECTS and authority.effects != "allow"


def cannot_wait(tool: str, *, required: bool) -> RefusedCall:
    """``approval_required``: a call that would ask a person, in a managed agent turn (which
    does not wait on one)."""
    message = (
        f"'{tool}' is declared approval: required and a managed agent turn does not wait on a"
        " person; let a host work the turn"
        if required
        else f"'{tool}' changes something and this run's authority is effects: ask; a managed"
        " agent turn does not wait on a person. Grant it a standing approval (edits, commands"
        " or operations) or let a host work the turn"
    )
    return RefusedCall(message, code="approval_required")


def decision_for(
    requests: Iterable[RequestRecord], address: str, request_digest: str
) -> dict[str, Any] | None:
    """The decision recorded for the request of ``request_digest`` at ``address``, if any."""
    for request in requests:
        if request.address == address and request.request_digest == request_digest:
            return request.decision
    return None


def declined(
    requests: Iterable[RequestRecord], *, address: str, tool: str, args_digest: str
) -> RefusedCall | None:
    """The refusal of a call a person declined: the approval request at ``address``, asked for
    ``tool`` with the arguments of ``args_digest``, carries a decline. ``None`` otherwise.

    The refusal is ``approval_declined``, naming who declined (``details.decided_by``, ``None``
    for a document piped to resume) and the address.
    """
    for request in requests:
        body, decision = request.body, request.decision
        if (
            request.address != address
            or request.kind != "approval"
            or body.get("tool") != tool
            or body.get("args_digest") != args_digest
            or decision is None
            or decision.get("approved") is not False
        ):
            continue
        who = decision.get("decided_by")
        by = f"a person ({who})" if isinstance(who, str) else "a person"
        return RefusedCall(
            f"{by} declined '{tool}' at {address}; nothing was sent",
            code="approval_declined",
            details={
                "address": address,
                "request_digest": request.request_digest,
                "decided_by": who if isinstance(who, str) else None,
            },
        )
    return None


def unless_declined(
    store: RunStore,
    run_id: str,
    authority: Authority,
    tool: Tool,
    address: str,
    call: CallOutcome,
    *,
    required: bool = False,
) -> list[RequestRecord]:
    """The run's requests, read once for a call of ``tool`` at ``address`` (none when the floor
    would not ask), for the floor to find its decision in (nothing before it writes one).

    Raises:
        RefusedCall: ``approval_declined`` when a person declined this very call (:func:`declined`).
    """
    if not may_ask(tool, authority, required=required):
        return []
    requests = store.requests(run_id)
    refusal = declined(requests, address=address, tool=tool.name, args_digest=call.args_digest)
    if refusal is not None:
        raise refusal
    return requests

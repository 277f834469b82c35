"""Turn calls: one call an agent turn makes, held to the turn's allowance and priced.

The seam: the step loop (:mod:`.drive`) runs a method's steps; a turn (an agent step) makes
calls of its own, from a managed agent in this process (:func:`turn_call_spec`, never waits) or
from a host answering a paused turn (:func:`turn_call`, may pause the run on a person). Both are
admitted by the run's governor under the turn's allowance, reserved on the tree's spend limit
before they run (:func:`spend_call`), and a host's ``call_id`` names one call only
(:func:`call_id_reused`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from proctor.contracts.values import replace
from proctor.errors import ProctorError, ResumeRefused
from proctor.receipts.canonical import digest
from proctor.runtime.admission.governor import AwaitApproval, CallOutcome, CallSpec
from proctor.runtime.engine.host import StepRunner as Run
from proctor.runtime.engine.pausing import pause
from proctor.runtime.tools.base import OPERATION_PREFIX

__all__ = [
    "call_id_reused",
    "quote",
    "spend_call",
    "turn_call",
    "turn_call_spec",
    "turn_spec",
    "unpriced",
]


def _offered_name(tool: str, allowance: frozenset[str]) -> str:
    """The allowance's tool ``tool`` names: itself, or the one offered tool whose name with
    its dots written as underscores it is (the runx reference names turn tools so,
    ``data_digest`` for ``data.digest``)."""
    if tool in allowance or "." in tool:
        return tool
    named = [t for t in allowance if "." in t and t.replace(".", "_") == tool]
    return named[0] if len(named) == 1 else tool


def turn_spec(run: Run, turn: dict[str, Any], spec: CallSpec) -> CallSpec:
    """A managed or host-side turn call, held to the turn's allowance and step."""
    allowance = frozenset(turn.get("allowance", {}).get("tools", []))
    step_id = str(turn["step"])
    call_id = None if spec.call_id is None else f"{step_id}/turn/{spec.call_id}"
    return CallSpec(
        tool=_offered_name(spec.tool, allowance),
        args=spec.args,
        allowance=allowance,
        step_id=step_id,
        step_index=turn.get("step_index"),
        reason=spec.reason,
        call_id=call_id,
        # a host-pinned call is approved at its own address: <step>/turn/<call_id>
        address=call_id or f"{step_id}/call",
        cancel=spec.cancel,
    )


def turn_call_spec(run: Run, turn: dict[str, Any], spec: CallSpec) -> CallOutcome:
    """Admit one call of a managed turn; a change the floor holds is refused
    ``approval_required``.

    A managed turn's conversation lives in this process only; pausing it would mean either
    storing the model's transcript (untrusted text) to continue it later, or working the
    turn again, when the model may not make the approved call at all. So it does not wait:
    the model reads the refusal, and a person grants what a managed turn may change ahead
    of time (standing approvals) or lets a host work the turn.
    """
    admitted = replace(turn_spec(run, turn, spec), can_wait=False)
    refused = unpriced(run, admitted)
    if refused is not None:
        return refused
    # refused and recorded like any refusal
    return spend_call(run, admitted, lambda: run.governor().call(admitted))


def call_id_reused(run: Run, spec: CallSpec, outcome: CallOutcome) -> CallOutcome:
    """``outcome``, unless it is the recorded call a host's ``call_id`` already names and
    its arguments differ from these: then ``call_id_reused`` (a repeat answers the
    recorded call only when it is the same call). Nothing ran: the governor answered
    from the record, which keeps the first call; the refusal is audited."""
    try:
        proposed = digest(dict(spec.args))
    except ProctorError:
        return outcome
    if spec.call_id is None or not outcome.args_digest or outcome.args_digest == proposed:
        return outcome
    message = (
        f"call_id {spec.call_id.rpartition('/turn/')[2][:80]!r} already names a"
        f" {outcome.tool} call with other arguments: pick a new call_id for a new call"
    )
    run.s.audit.emit(
        "call_refused",
        run_id=run.run_id,
        step_index=spec.step_index,
        tool=spec.tool,
        call_id=spec.call_id,
        step=spec.step_id,
        code="call_id_reused",
        message=message,
    )
    return CallOutcome(
        call_id=spec.call_id,
        tool=spec.tool,
        step_id=spec.step_id,
        status="refused",
        error={"code": "call_id_reused", "message": message},
    )


def turn_call(
    run: Run,
    turn: dict[str, Any],
    tool: str,
    args: dict[str, Any],
    call_id: str,
    reason: str,
    cancel: threading.Event | None = None,
) -> CallOutcome:
    """One host-side call of a paused turn (see :meth:`Session.turn_call`).

    A change the floor holds under ``effects: ask`` pauses the run ``needs_approval`` on
    a request at the call's address (``<step>/turn/<call_id>``) carrying exactly what
    executes; the outcome is ``refused`` with code ``approval_pending`` (nothing was sent
    or recorded under ``call_id``). Once a person approves it, the same call (same
    ``call_id``) executes, once.
    """
    if "child_run" in turn:  # a child run's turn, shown at the root: answered, not called
        raise ResumeRefused("this turn belongs to a child run: answer it with its value"
                            " (proctor resume); its calls cannot be made from the root",
                            code="child_turn_call")  # fmt: skip
    if tool == "ask_human":  # a person answers; the run waits (see .turn_ask)
        from proctor.runtime.engine.turn_ask import ask_human

        outcome, waiting_on = ask_human(run, turn, args, call_id)
        if waiting_on is not None:
            pause(run, [waiting_on])
        return outcome
    spec = CallSpec(
        tool=tool,
        args=args,
        allowance=frozenset(),
        reason=reason,
        call_id=call_id,
        cancel=cancel,
    )
    from proctor.runtime.engine.skill_calls import ChildPending

    governor = run.governor()
    admitted = turn_spec(run, turn, spec)
    refused = unpriced(run, admitted)
    if refused is not None:
        return refused
    run.host_turn = True
    try:
        return call_id_reused(
            run, admitted, spend_call(run, admitted, lambda: governor.call(admitted))
        )
    except ChildPending as pending:  # the call's child waits on a person (.skill_calls)
        pause(run, pending.requests)
        return pending.outcome(admitted.call_id or call_id, tool, admitted.step_id)
    except AwaitApproval as waiting:
        request = run.open_request(waiting.address, waiting.body)
        pause(run, [request])
        return CallOutcome(
            call_id=admitted.call_id or waiting.address,
            tool=tool,
            step_id=admitted.step_id,
            status="refused",
            error={
                "code": "approval_pending",
                "message": f"'{tool}' changes something and this run's authority is"
                f" effects: ask: the run waits on a person's approval at {waiting.address}"
                f" (proctor approve {run.run_id} {waiting.address}, or the console); once"
                " it is approved, make this call again with the same call_id",
                "details": {
                    "address": waiting.address,
                    "request_digest": request.request_digest,
                    "run_status": "needs_approval",
                },
            },
        )


def unpriced(run: Run, spec: CallSpec) -> CallOutcome | None:
    """Refuse before admission, sending nothing: a turn's priced call (``http.request``, an
    operation without ``cost:``) has no declared price, so under a spend limit it is
    ``price_unknown``; an Agent Skills package's command outside its ``Bash(...)`` entries
    is ``command_not_allowed``."""
    from proctor.core.spend import SpendRefused
    from proctor.runtime.engine.kinds import priced

    mapping = run.skill.tool_mapping
    argv = spec.args.get("argv")
    if spec.tool == "command.execute" and mapping is not None and not mapping.allows_argv(argv):
        error = {
            "code": "command_not_allowed",
            "message": "this Agent Skills package's allowed-tools do not name this command"
            " (Bash(...) entries); nothing was run",
        }
        return CallOutcome(spec.call_id or "", spec.tool, spec.step_id, "refused", error=error)
    if not priced(spec.tool) or quote(run, spec.tool) is not None:
        return None
    try:
        run.spend_ledger().reserve(None, what=f"a turn's {spec.tool} call")
    except SpendRefused as exc:
        call_id = spec.call_id or spec.address or ""
        return CallOutcome(call_id, spec.tool, spec.step_id, "refused", error=exc.to_dict())
    return None


def spend_call(run: Run, spec: CallSpec, call: Callable[[], CallOutcome]) -> CallOutcome:
    """Make a turn's ``call``; a priced operation's quote is reserved against the tree's
    limit before it (``cost_limit_exceeded`` sends nothing) and becomes spend when it ran.

    A call refused or answered from its record (already done) gives the hold back; a call
    that pauses on a person gives it back too (it is reserved again when it runs).
    """
    from proctor.core.spend import SpendRefused

    price = quote(run, spec.tool)
    if price is None:
        return call()
    ledger = run.spend_ledger()
    try:
        held = ledger.reserve(price, what=f"a turn's {spec.tool} call")
    except SpendRefused as exc:
        call_id = spec.call_id or spec.address or ""
        return CallOutcome(call_id, spec.tool, spec.step_id, "refused", error=exc.to_dict())
    try:
        outcome = call()
    except BaseException:
        ledger.release(held)
        raise
    if outcome.status == "refused" or outcome.already_done is not None:
        ledger.release(held)
    else:
        ledger.settle(held, price)
    return outcome


def quote(run: Run, tool: str) -> int | None:
    """A connector operation's declared price per call, else ``None``."""
    if not tool.startswith(OPERATION_PREFIX):
        return None
    from proctor.runtime.connectors.operations import quote_micro_usd

    found = run.operation_tools().get(tool)
    return None if found is None else quote_micro_usd(found)

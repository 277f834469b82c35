"""The step kinds a run drives: tool steps (with crash reconciliation), ask steps, agent steps.

Each function returns what the step became: settled (``StepDone``) or a pause on requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import Refusal
from proctor.contracts.skill import AgentStep, AskStep, StepApproval, ToolStep
from proctor.core.spend import SpendRefused
from proctor.errors import ProctorError
from proctor.parser.refs import resolve
from proctor.parser.skill import PRICED_TOOLS
from proctor.runtime.admission.governor import AwaitApproval, CallOutcome, CallSpec, Governor
from proctor.runtime.engine.host import StepDone, StepPause, StepRunner, run_refs, step_failed
from proctor.runtime.engine.skill_calls import context_skills, offered_skills
from proctor.runtime.records.runs import CallRecord
from proctor.runtime.tools.base import OPERATION_PREFIX, OutcomeUnknown

if TYPE_CHECKING:
    from proctor.core.authority import Authority

__all__ = ["Confirm", "agent_step", "ask_step", "priced", "tool_step"]

Confirm = Callable[[CallRecord], "dict[str, Any] | bool | None"]
"""Asked about a crashed claim before a person is: the result it proves done, ``False`` when it
proves the call was not applied (it is sent again), or ``None`` when it cannot tell."""


# -- tool steps -----------------------------------------------------------------------------


def tool_step(
    run: StepRunner,
    governor: Governor,
    index: int,
    step: ToolStep,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    confirm: Confirm | None = None,
    asks: StepApproval | None = None,
) -> StepDone | StepPause:
    """Reconcile a crashed claim of the step, then call its tool through admission.

    ``confirm`` (operation steps: the write's readback) is asked about a claim with no
    settlement before a person is: the result it returns settles the call as done. ``asks``
    (an operation step's ``approval:``) has a person decide the call, in addition to the
    floor.
    """
    try:
        refs = run_refs(run)
        args = resolve(step.inputs, inputs, outputs, run=refs)
        key = None
        if step.idempotency_key is not None:
            key = str(resolve(step.idempotency_key, inputs, outputs, run=refs))
    except ProctorError as exc:
        return step_failed(step.id, exc)
    used: list[str] = []
    # the step's own calls only (a crashed driver's): reading the run's would make each step
    # cost as much as the run so far; a run this driver's start created has none to read
    recorded = [] if run.fresh else run.s.store.step_calls(run.run_id, step.id)
    governor.numbered_from(step.id, len(recorded))  # its next call numbered on from them
    settled = _settled_call(recorded, step.id, step.tool)
    if settled is not None:
        # The call settled but its step did not (a crash between the two): reuse the record.
        return _settled(step, settled, used)
    claims = [c for c in recorded if c.state == "claimed"]
    if claims:
        got = _reconcile(run, governor, step, claims[-1], args, confirm)
        if got is not None and not isinstance(got, str):
            return got
        if isinstance(got, str):
            used.append(got)
    held = None
    if priced(step.tool):  # reserved before anything is sent (proctor.core.spend)
        try:
            quote = None if step.cost is None else step.cost.usd_micro
            held = run.spend_ledger().reserve(quote, what=f"step '{step.id}' ({step.tool})")
        except SpendRefused as exc:
            return _spend_refused(step, exc)
    spec = CallSpec(
        tool=step.tool,
        args=args if isinstance(args, dict) else {},
        allowance=frozenset({step.tool}),
        step_id=step.id,
        step_index=index,
        reason=step.reason or "",
        idempotency_key=key,
        address=step.id,
        reconciles=True,
        approvals=step.approvals,
        expires_in=step.expires_in,
        required=asks is not None,
        approval_type=None if asks is None else asks.type,
    )
    try:
        call = governor.call(spec)
    except AwaitApproval as waiting:
        if held is not None:
            run.spend_ledger().release(held)
        return StepPause([run.open_request(waiting.address, waiting.body)])
    except OutcomeUnknown as unknown:  # sent, no answer: its readback decides, or a person
        if held is not None:
            run.spend_ledger().settle(held, held.quote)
        return _unknown_outcome(run, governor, step, args, confirm, unknown)
    done = _settled(step, call, used)
    if held is not None:
        if call.status == "refused" or call.already_done is not None:
            run.spend_ledger().release(held)  # nothing was sent
        else:
            # per: success is charged only when the provider answered as the step accepts
            unpaid = step.cost is not None and step.cost.per == "success"
            charge = 0 if unpaid and call.status != "completed" else held.quote
            run.spend_ledger().settle(held, charge)
            done.spend_micro_usd = charge
    if call.already_done is not None:
        # Nothing was sent: the act was done under this key; the record names its receipt.
        done.already_done = call.already_done
        run.s.store.append_event(
            run.run_id, "already_done", {"step": step.id, "receipt": call.already_done}
        )
    return done


def priced(tool: str) -> bool:
    """Whether a call of ``tool`` costs money: ``http.request`` and every connector operation
    (each sends a request to a provider). Under a spend limit such a call needs a price."""
    return tool in PRICED_TOOLS or tool.startswith(OPERATION_PREFIX)


def budget_blocked(step_id: str, exc: ProctorError, tool: str | None = None) -> StepDone:
    """The settled form of a step a budget refused (spend, receipts): it seals the run
    ``blocked`` (``budget_exceeded``) with the budget's code."""
    refusal = Refusal(code=exc.code, message=exc.message, step=step_id, tool=tool)
    return StepDone(
        "blocked",
        refusal=refusal,
        seal_reason="budget_exceeded",
        run_outcome="blocked",
        run_seal_reason="budget_exceeded",
    )


def _spend_refused(step: ToolStep, exc: SpendRefused) -> StepDone:
    return budget_blocked(step.id, exc, step.tool)


def _settled_call(recorded: list[CallRecord], step_id: str, tool: str) -> CallOutcome | None:
    """The last settled call of a step whose own settlement was never recorded (its own tool's:
    an operation step's readback is a call of another tool)."""
    for record in reversed(recorded):
        readback = record.tool != tool and record.tool.startswith(OPERATION_PREFIX)
        if record.state != "settled" or readback:
            continue
        body = record.result if isinstance(record.result, dict) else {}
        status = body.get("status")
        if status not in ("completed", "failed", "refused"):
            return None  # abandoned after a reconcile: the step sends it again
        approved = body.get("approved_by")
        return CallOutcome(
            call_id=record.call_id,
            tool=record.tool,
            step_id=step_id,
            status=status,
            result=body.get("result"),
            error=body.get("error"),
            verdicts=list(body.get("verdicts") or []),
            args_digest=record.args_digest,
            approved_by=approved if isinstance(approved, str) else None,
        )
    return None


def _settled(step: ToolStep, call: CallOutcome, used: list[str]) -> StepDone:
    if call.approved_by == f"person:{step.id}":
        used = [*used, step.id]
    if call.ok:
        return StepDone("completed", output=call.result, used=used)
    error = call.error or {}
    refused = call.status == "refused"
    code = str(error.get("code", "failed"))
    refusal = Refusal(
        code=code,
        message=str(error.get("message", "the call failed")),
        step=step.id,
        tool=step.tool,
        rule_id=(error.get("details") or {}).get("rule_id"),
    )
    if code == "approval_declined":
        # the decline is what the step settled on: used, as an approval it executed on is
        declined_at = (error.get("details") or {}).get("address")
        if isinstance(declined_at, str) and declined_at not in used:
            used = [*used, declined_at]
        return StepDone(
            "declined",
            refusal=refusal,
            seal_reason="approval_declined",
            run_outcome="declined",
            run_seal_reason="approval_declined",
            used=used,
        )
    return StepDone(
        "blocked" if refused else "failed",
        refusal=refusal,
        seal_reason=_reason_of(call),
        run_outcome="blocked" if refused else "failed",
        run_seal_reason="child_failed",
        used=used,
    )


def _reason_of(call: CallOutcome) -> str:
    if call.status == "failed":
        return "tool_failed"
    code = call.code or ""
    if any(v.get("effect") == "refused" for v in call.verdicts):
        return "policy_refused"
    if code.endswith("budget_exceeded"):
        return "budget_exceeded"
    if code == "schema_invalid":
        return "inputs_invalid"
    return "admission_refused"


def _digest_now(run: StepRunner, rel: str) -> str | None:
    from proctor.runtime.tools.fsutil import current_state

    try:
        workspace = run.s.workspace
        return current_state(workspace, workspace.resolve(rel, "write")).digest
    except ProctorError:
        return None


def _unknown_outcome(
    run: StepRunner,
    governor: Governor,
    step: ToolStep,
    args: Any,
    confirm: Confirm | None,
    unknown: OutcomeUnknown,
) -> StepDone | StepPause:
    """Reconcile the claim a write left unsettled when its answer never came, before the
    step settles: confirmed by readback, or a retry question for a person."""
    claims = [c for c in run.s.store.step_calls(run.run_id, step.id) if c.state == "claimed"]
    run.s.audit.emit("call_outcome_unknown", run_id=run.run_id, step_index=None,
                     step=step.id, tool=step.tool, reason=str(unknown))  # fmt: skip
    why = "this call was sent and its answer never came (its readback could not confirm it)"
    got = _reconcile(run, governor, step, claims[-1], args, confirm, why) if claims else None
    if isinstance(got, StepDone | StepPause):
        return got
    return step_failed(step.id, ProctorError(str(unknown), code="operation_outcome_unknown"))


_STOPPED = "a driver stopped after this call was sent and before its outcome was recorded"


def _abandon(
    governor: Governor, claim: CallRecord, note: str, counted: tuple[str, Any] | None = None
) -> None:
    """Settle ``claim`` as of unknown outcome; ``counted`` (its tool and arguments) when it
    may have taken effect and is not sent again (it then spends the run's write budget)."""
    governor.settle_reconciled(
        claim.call_id,
        "unknown",
        {"status": "unknown", "result": None, "note": note},
        ("claim_reconciled", {"call_id": claim.call_id, "note": note}),
        counted,
    )


def retry_question(run: StepRunner, claim: CallRecord, why: str | None = None) -> dict[str, Any]:
    """The retry question for ``claim``, asked only once nothing of it can still change: what
    the claiming driver left running on this host is ended first (and waited for); the
    question says whether its lease lapsed or it stopped, and that an effect in flight on
    another host cannot be recalled."""
    from proctor.runtime.engine.lease import end_lapsed_effect

    ended = end_lapsed_effect(claim.site)
    lapsed = run.record.data.get("lapsed_holder")
    body: dict[str, Any] = {}
    if isinstance(lapsed, dict) and lapsed.get("lapsed"):
        body["lapsed_holder"] = lapsed.get("holder")
        what = "the lease of the driver that sent this call lapsed before its outcome was recorded"
    else:
        what = "a driver stopped after this call was sent and before its outcome was recorded"
    if why is not None and why != _STOPPED:
        what = why  # the call's own story (its answer never came) says more than a stop
    # the same words each time it is asked (its digest binds them): where the call ran, not
    # what this asking found of it
    if ended == "other_host":
        where = (
            "; it ran on another host, where an effect still in flight cannot be recalled from"
            " here, so it may yet take effect"
        )
    else:
        where = "; whatever it left running on this host was ended before this question"
    body["question"] = f"{what}{where}; it may have taken effect. Send it again?"
    return body


def _reconcile(
    run: StepRunner,
    governor: Governor,
    step: ToolStep,
    claim: CallRecord,
    args: Any,
    confirm: Confirm | None = None,
    why: str = _STOPPED,
) -> StepDone | StepPause | str | None:
    """Decide what a claim with no settlement means (``args``: the step's arguments, which
    the claim was sent with; a change it made is counted in the run's write tally).

    Returns a settled step (a file change confirmed), a pause on a retry request, the retry
    address a person's ``retry: true`` answered (send again), or ``None`` (not applied: send
    again).
    """
    pending = claim.result.get("pending") if isinstance(claim.result, dict) else None
    if isinstance(pending, list) and pending:
        now = [_digest_now(run, str(f["path"])) for f in pending]
        if all(n == f.get("after_digest") for n, f in zip(now, pending, strict=True)):
            changes = [
                {
                    "path": f["path"],
                    "content_digest": f.get("after_digest"),
                    "previous_digest": f.get("before_digest"),
                }
                for f in pending
            ]
            result: dict[str, Any] = {"confirmed": True, "changes": changes}
            if len(changes) == 1:
                result.update(changes[0])
            settled: dict[str, Any] = {
                "status": "completed",
                "result": result,
                "error": None,
                "verdicts": [],
                "effect": "write",
                "confirmed_by_digests": True,
            }
            confirmed_by = ("claim_confirmed", {"call_id": claim.call_id})
            governor.settle_reconciled(
                claim.call_id, "completed", settled, confirmed_by, (step.tool, args)
            )
            return StepDone("completed", output=result)
        if all(n == f.get("before_digest") for n, f in zip(now, pending, strict=True)):
            _abandon(governor, claim, "not applied (every file at its before-image); sent again")
            return None
    confirmed = None if confirm is None else confirm(claim)
    if confirmed is False:
        _abandon(governor, claim, "not applied (its key was never used); sent again")
        return None
    if isinstance(confirmed, dict):
        settled = {
            "status": "completed",
            "result": confirmed,
            "error": None,
            "verdicts": [],
            "effect": "network",
            "confirmed_by_readback": True,
        }
        confirmed_by = ("claim_confirmed", {"call_id": claim.call_id})
        governor.settle_reconciled(
            claim.call_id, "completed", settled, confirmed_by, (step.tool, args)
        )
        return StepDone("completed", output=confirmed)
    address = f"{step.id}/retry"
    body = {
        "kind": "retry",
        "address": address,
        "step": step.id,
        "tool": claim.tool,
        "call_id": claim.call_id,
        "args_digest": claim.args_digest,
        **retry_question(run, claim, why),
    }
    # The question as it was first asked of this claim (a write whose answer never came is
    # asked with its own story; a later drive knows only that a driver stopped): its digest
    # is what the person's decision names, so it is asked in the same words again (an HTTP
    # operation's unanswered write as an MCP one's; a new claim, sent again, is a new question).
    for asked in run.s.store.requests(run.run_id):
        if (
            asked.address == address
            and asked.kind == "retry"
            and asked.body.get("call_id") == claim.call_id
        ):
            body = dict(asked.body)
            break
    request = run.open_request(address, body)
    if request.decision is None:
        return StepPause([request])
    if request.decision.get("retry") is True:
        _abandon(governor, claim, "a person chose to send it again")
        return address
    _abandon(governor, claim, "a person chose not to send it again", (step.tool, args))
    refusal = Refusal(
        code="retry_declined",
        message="the call's outcome is unknown and a person chose not to send it again",
        step=step.id,
        tool=step.tool,
    )
    return StepDone(
        "failed",
        refusal=refusal,
        seal_reason="tool_failed",
        run_outcome="failed",
        run_seal_reason="child_failed",
        used=[address],
    )


# -- ask steps ------------------------------------------------------------------------------


def ask_body(step: AskStep, authority: Authority | None = None) -> dict[str, Any]:
    """What an ask step asks: an approval (``reason``) or questions; with its deadline
    (the step's ``expires_in``, else the authority's) and, for an approval, how many distinct
    people must approve (the step's ``approvals`` or the authority's ``min_approvers``,
    whichever is more). Each is stated only when set, so the digest of a request that has
    none is what it always was."""
    extra: dict[str, Any] = {}
    expires_in = step.ask.expires_in or (authority.expires_in if authority else None)
    if expires_in is not None:
        extra["expires_in"] = expires_in
        extra["on_expiry"] = step.ask.on_expiry if step.ask.expires_in else "decline"
    if step.ask.reason is not None:
        needed = max(step.ask.approvals, (authority.min_approvers or 1) if authority else 1)
        if needed > 1:
            extra["approvals"] = needed
            if "on_expiry" in extra:  # a deadline never stands in for the people needed
                extra["on_expiry"] = "decline"
        body = {"kind": "approval", "gate": "ask", "address": step.id, "reason": step.ask.reason}
        return {**body, **extra}
    questions = [q.request_form() for q in step.ask.questions or []]
    return {"kind": "question", "address": step.id, "questions": questions, **extra}


def ask_step(run: StepRunner, step: AskStep) -> StepDone | StepPause:
    """Pause on the step's request until a person's decision is recorded, then settle."""
    request = run.open_request(step.id, ask_body(step, run.authority))
    decision = request.decision
    if decision is None:
        return StepPause([request])
    if request.kind == "question":
        return StepDone("completed", output={"answers": decision.get("value")}, used=[step.id])
    if decision.get("approved") is True:
        return StepDone(
            "completed", output={"approved": True, "reason": decision.get("reason")}, used=[step.id]
        )
    if decision.get("decided_by") == "deadline":
        code, message = "approval_expired", "nobody decided before the deadline: declined"
    else:
        code, message = "approval_declined", "a person declined this step"
    return StepDone(
        "declined",
        refusal=Refusal(code=code, message=message, step=step.id),
        seal_reason=code,
        run_outcome="declined",
        run_seal_reason=code,
        used=[step.id],
    )


# -- agent steps ----------------------------------------------------------------------------


def _turn(
    run: StepRunner, index: int, step: AgentStep, inputs: dict[str, Any], outputs: dict[str, Any]
) -> dict[str, Any]:
    body = run.skill.package.body.strip()
    instructions = (body + "\n\n" if body else "") + step.agent.instructions
    skills = offered_skills(run, step) if step.agent.calls.skills else {}
    turn: dict[str, Any] = {
        "kind": "agent_turn",
        "address": step.id,
        "step": step.id,
        "step_index": index,
        "instructions": instructions,
        "inputs": resolve(step.agent.inputs, inputs, outputs, run=run_refs(run)),
        "allowance": _allowance(run, step, list(skills)),
        "ask": step.agent.ask,
        "output_schema": step.agent.output,
    }
    if skills:  # what a skill call's tool takes, for a model that is shown them
        turn["skill_tools"] = skills
    if step.agent.context is not None:
        turn["context"] = context_skills(run, step.agent.context.skills)
    return turn


def _allowance(run: StepRunner, step: AgentStep, skill_tools: list[str]) -> dict[str, Any]:
    """What a turn may call: its tools, one tool per method of each skill it may call
    (``skill_tools``) and the connector operations it names."""
    calls = step.agent.calls
    allowance: dict[str, Any] = {
        "tools": list(calls.tools) + skill_tools,
        "skills": list(calls.skills),
    }
    if calls.operations:
        # c/op and c/* offered as the operation tools they name (none: nothing offered)
        from proctor.runtime.connectors.operations import expand_operations

        tools = run.operation_tools()
        offered = expand_operations(list(calls.operations), tools)
        allowance["tools"] += [n for n in offered if n not in allowance["tools"]]
        allowance["operations"] = list(calls.operations)
        # what an agent is shown of each (the operations are the run's, not the session's)
        allowance["operation_tools"] = [
            {
                "name": n,
                "description": tools[n].description,
                "input_schema": tools[n].schema,
            }
            for n in offered
        ]
    return allowance


def _check_output(step: AgentStep, value: Any) -> StepDone:
    from proctor.parser.inputs import validate_inputs

    schema = step.agent.output
    if schema is not None:
        try:
            validate_inputs(value, schema)
        except ProctorError as exc:
            message = exc.message.replace("inputs", "the agent's output", 1)
            refusal = Refusal(code="agent_output_invalid", message=message, step=step.id)
            return StepDone(
                "failed",
                refusal=refusal,
                seal_reason="tool_failed",
                run_outcome="failed",
                run_seal_reason="child_failed",
                used=[step.id],
            )
    return StepDone("completed", output=value, used=[step.id])


def agent_step(
    run: StepRunner,
    governor: Governor,
    index: int,
    step: AgentStep,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
) -> StepDone | StepPause:
    """Work the turn with the session's managed agent, or pause ``needs_agent`` on it."""
    try:
        turn = _turn(run, index, step, inputs, outputs)
    except ProctorError as exc:
        return step_failed(step.id, exc)
    agent = run.s.agent_driver
    if agent is not None:
        return _managed_turn(run, step, turn, agent)
    request = run.open_request(step.id, turn)
    if request.decision is None:
        # a turn call still waiting on a person is shown beside its turn, never hidden by it
        waiting = [
            r
            for r in run.s.store.requests(run.run_id)
            if (r.kind == "approval" or "#" in r.address)  # a call's own, or its child's
            and r.address.startswith(f"{step.id}/turn/")
            and r.state == "open"
        ]
        return StepPause([request, *waiting])
    failure = request.decision.get("failure")
    if isinstance(failure, dict):
        done = _turn_failed(run, step, str(failure.get("reason") or ""))
    else:
        done = _check_output(step, request.decision.get("value"))
    done.used += _turn_approvals(run, step.id)
    done.context_digests = [c["digest"] for c in turn.get("context") or []]
    return done


def _with_policy_rules(run: StepRunner, turn: dict[str, Any]) -> dict[str, Any]:
    """A directive turn as its model is shown it: with the run's policy rules (id, description,
    whether proctor enforces it) as ``policy_rules``, as the reference kernel gives a
    directive's model its policies; advisory rules exist only as this text. The turn itself
    (its request and digest) is unchanged."""
    if not run.directive_run():
        return turn
    rules = getattr(run.governor().policies, "rules", ())
    if not rules:
        return turn
    shown = [
        {
            "policy": r.policy_id,
            "id": r.id,
            "description": r.description,
            "enforced": r.enforceable,
        }
        for r in rules
    ]
    return {**turn, "policy_rules": shown}


def _managed_turn(run: StepRunner, step: AgentStep, turn: dict[str, Any], agent: Any) -> StepDone:
    """The session's managed agent works the turn. Its model requests are priced acts proctor
    makes: with the provider's ``cost`` declared, each is metered on the tree's ledger
    (:mod:`proctor.runtime.engine.metering`); without, a spend limit refuses the turn
    ``price_unknown`` before anything is sent (a missing price is never zero)."""
    prices = tuple(getattr(agent, "prices", ()) or ())
    ledger = run.spend_ledger()
    if not prices and ledger.limited:
        refusal = Refusal(
            code="price_unknown",
            message=f"step '{step.id}' is a managed agent turn whose model provider declares no"
            " price (agent.cost), and this run has a spend limit; nothing was sent",
            step=step.id,
        )
        return StepDone("blocked", refusal=refusal, seal_reason="budget_exceeded",
                        run_outcome="blocked", run_seal_reason="budget_exceeded")  # fmt: skip
    meter: Any = None
    if prices:
        from proctor.runtime.engine.metering import ModelMeter

        meter = ModelMeter(ledger, prices, what=f"step '{step.id}' (a managed agent turn)")
    if hasattr(agent, "prices"):  # a managed agent: each model request is audited
        from proctor.runtime.engine.model_watch import ModelRequestWatch

        meter = ModelRequestWatch(run, step.id, turn.get("step_index"), agent, meter)
    shown = _with_policy_rules(run, turn)

    def call(spec: Any) -> Any:
        return run.turn_call_spec(turn, spec)

    try:
        if meter is None:
            value = agent.drive_turn(shown, call)
        else:
            value = agent.drive_turn(shown, call, meter=meter)
    except SpendRefused as exc:
        done = budget_blocked(step.id, exc)
    except ProctorError as exc:
        done = step_failed(step.id, exc)
    else:
        done = _check_output(step, value)
        done.used = []
        done.context_digests = [c["digest"] for c in turn.get("context") or []]
    elided = getattr(getattr(agent, "last", None), "elided", None)
    if elided:  # older tool results the model was shown only as summaries
        run.s.audit.emit(
            "agent_context_elided",
            run_id=run.run_id,
            step_index=turn.get("step_index"),
            step=step.id,
            budget_chars=getattr(agent, "context_chars", None),
            results=list(elided),
        )
    if prices and meter is not None:
        done.spend_micro_usd = meter.spent
    return done


def _turn_approvals(run: StepRunner, step_id: str) -> list[str]:
    """The approvals the turn's calls executed on, and the declines they were refused on:
    used once the step settles."""
    used = [  # the root's copies of its skill calls' children's requests, answered
        r.address
        for r in run.s.store.requests(run.run_id)
        if r.address.startswith(f"{step_id}/turn/") and "#" in r.address and r.state == "decided"
    ]
    for call in run.s.store.iter_step_calls(run.run_id, step_id):  # a page at a time
        body = call.result if isinstance(call.result, dict) else {}
        approved = body.get("approved_by")
        if isinstance(approved, str) and approved.startswith("person:"):
            used.append(approved.removeprefix("person:"))
        error = body.get("error")
        if isinstance(error, dict) and error.get("code") == "approval_declined":
            declined_at = (error.get("details") or {}).get("address")
            if isinstance(declined_at, str):
                used.append(declined_at)
    return used


def _turn_failed(run: StepRunner, step: AgentStep, reason: str) -> StepDone:
    """The host ended the turn on its failure lane: the step fails with its reason."""
    # the reason is the host's free text: scrubbed of secrets, one line, bounded
    shown = " ".join(run.sanitizer.text(reason).split())[:500]
    refusal = Refusal(
        code="agent_failed", message=f"the agent could not do the turn: {shown}", step=step.id
    )
    return StepDone(
        "failed",
        refusal=refusal,
        seal_reason="tool_failed",
        run_outcome="failed",
        run_seal_reason="child_failed",
        used=[step.id],
    )

"""Drive one run's steps: tool, ask and agent steps; pauses; reconciling a crashed driver's claims.

:class:`RunDriver` is built from the run's record in the store (any process can build it) and
is used by :class:`proctor.runtime.engine.session.Session` while it holds the run's lease.

Each step either settles (its record goes to the store, once, durably, with the decisions it
used) or pauses the run on requests. A settled step is never executed again. A call a crashed
driver claimed but never settled is reconciled before its step runs again:

- a file change is confirmed by digests (every file at its after-image: the step settles with
  the recorded change) or found not applied (every file at its before-image, a journaled bundle
  rolled back): it is sent again;
- anything else (a command, a request) becomes a retry request at ``<step>/retry`` that a person
  answers ``{"retry": true|false}``; nothing is silently executed twice.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import Refusal, RunEnvelope
from proctor.contracts.skill import AgentStep, AskStep, Method, OperationStep, SkillStep, WorkerStep
from proctor.contracts.values import replace
from proctor.core.authority import narrow, parse_authority
from proctor.core.resume import PERSON_KINDS
from proctor.errors import (
    ConfigError,
    PolicyLoadError,
    ProctorError,
    ResumeRefused,
)
from proctor.receipts.canonical import digest
from proctor.runtime.admission.governor import (
    AwaitApproval,
    CallOutcome,
    CallSpec,
    Governor,
)
from proctor.runtime.boundary.reach import run_workspace
from proctor.runtime.engine import kinds as run_kinds
from proctor.runtime.engine.driver_parts import Blocked as _Blocked
from proctor.runtime.engine.driver_parts import DriverParts
from proctor.runtime.engine.host import (
    RunHost,
    RunInterrupted,
    StepDone,
    StepPause,
    narrow_outputs,
)
from proctor.runtime.records.runs import RequestRecord, RunRecord
from proctor.runtime.testhooks import kill_point
from proctor.runtime.tools.base import CommandStopped

if TYPE_CHECKING:
    from proctor.core.budget import ReceiptBudget
    from proctor.core.spend import SpendLedger
    from proctor.runtime.connectors.operations import OperationTool
    from proctor.runtime.skills import LoadedSkill
    from proctor.runtime.tools.base import Tool

__all__ = ["RunDriver"]


class RunDriver(DriverParts):
    """One run, rebuilt from its record, driven while its session holds the lease."""

    def __init__(
        self,
        session: RunHost,
        record: RunRecord,
        skill: LoadedSkill,
        method: Method,
        stop: threading.Event | None,
    ) -> None:
        from proctor.runtime.boundary.sanitize import Sanitizer

        self.s = session
        self.record = record
        self.run_id = record.run_id
        self.skill = skill
        self.method = method
        self.stop = stop
        # a child run's depth below its root; serial: it holds one of the tree's slots, so its
        # own fan-outs run one at a time (nesting never multiplies what runs at once)
        self.depth = int(record.data.get("depth") or 0)
        self.serial = False
        self.host_turn = False  # set by a host's turn call (.turn_call: one driver per call)
        self.ledger: SpendLedger | None = None  # a child is handed its root's
        self.receipts: ReceiptBudget | None = None  # likewise: the tree's receipt budget
        self.receipts_counted = False  # this run's own receipts are counted on it
        host = parse_authority(record.data.get("authority") or {}, recorded=True)
        self.authority = narrow(host, effects=method.effects, reach=method.reach)
        self.sanitizer = Sanitizer()
        self._governor: Governor | None = None
        self._operations: dict[str, OperationTool] | None = None
        # credential material for this command only (the Python API's request_secrets)
        self.request_secrets: Mapping[str, str] | None = None

    # -- drive ---------------------------------------------------------------------------

    def governor(self) -> Governor:
        """The run's governor, counting on from the calls already recorded."""
        if self._governor is not None:
            return self._governor
        from proctor.policy import write_budget
        from proctor.runtime.limits import max_receipts_from_env
        from proctor.runtime.skills import package_authority_files

        s = self.s
        try:
            policies, guards, unguarded = s.policy()
            limit = max_receipts_from_env(s.environ)
            wb = write_budget(s.environ)
        except (PolicyLoadError, ConfigError) as exc:
            raise _Blocked(exc.code, exc.message, "policy_refused") from exc
        deliver = self._with_state(self._deliver())
        sandbox = self._sandbox()
        policy_digest = None if unguarded else getattr(policies, "digest", None)
        if self.record.data.get("policy_digest") != policy_digest:
            s.store.update_run(self.run_id, data={"policy_digest": policy_digest})
            self.record.data["policy_digest"] = policy_digest
        if unguarded:
            s.audit.emit(
                "unguarded_mode_enabled",
                run_id=self.run_id,
                step_index=None,
                reason="no enforceable policy rule is loaded and PROCTOR_ALLOW_NO_POLICIES=1",
            )
        # counted, not read: a driver is built per turn call, and reading the run's calls
        # here would make every call of a long turn cost as much as the run so far
        counts = s.store.run_counts(self.run_id)
        from proctor.core.budget import RUN_RECEIPTS, ReceiptBudget

        # one budget for the tree: a child is handed its root's (its start already reserved
        # its own receipts there); what earlier drivers of this run admitted is counted on it
        if self.receipts is None:
            self.receipts = ReceiptBudget(limit)
        budget = self.receipts
        if not self.receipts_counted:
            earlier = int(self.record.data.get("child_receipts") or 0)  # sealed children's
            budget.count(RUN_RECEIPTS + counts.steps + counts.calls + earlier)
            self.receipts_counted = True
        extra = package_authority_files(self.skill, s.workspace.root)
        # the run's own package is authority, and proctor's state is where the session keeps it
        workspace = s.workspace.governing(extra_authority=extra, environ=s.environ)
        try:
            lifted = workspace.allow_write
        except ConfigError as exc:
            raise _Blocked(exc.code, exc.message, "policy_refused") from exc
        if lifted:
            s.audit.emit(
                "containment_narrowed",
                run_id=self.run_id,
                step_index=None,
                allow_write=sorted(lifted),
                reason="proctor.toml [containment] allow_write lets runs write these tool "
                "configuration paths",
            )
        workspace = run_workspace(workspace, self.authority, self.record.data)
        from proctor.runtime.directives import confined_run
        from proctor.runtime.engine.confinement import confined_tools
        from proctor.runtime.engine.skill_calls import skill_tools

        try:  # calls.skills: one tool per method of each skill a turn may call (a child run)
            tools: MutableMapping[str, Tool] = s.tools.copy()
            tools.update(skill_tools(self, list(self.method.steps)))
        except ProctorError as exc:
            raise _Blocked(exc.code, exc.message, "admission_refused") from exc
        tools.update(self._operations_or_blocked())
        if confined_run(self.record.data, s.workspace.state_dir):
            # a property of the run, not of the session class that drives it now
            tools = confined_tools(tools, workspace)
        governor = Governor(
            run_id=self.run_id,
            workspace=workspace,
            store=s.store,
            tools=tools,
            policies=policies,
            guards=guards,
            audit=s.audit,
            sanitizer=self.sanitizer,
            authority=self.authority,
            receipt_budget=budget,
            directive_id=self.skill.package.name,
            package_identity=self.skill.identity or None,
            write_budget=wb,
            deliver=deliver,
            clock=s.clock,
            sandbox=sandbox,
        )
        governor.resume_from(counts.admitted)
        self._governor = governor
        return governor

    def tree_receipts(self) -> ReceiptBudget:
        """The receipt budget the run's whole tree draws on (the root's).

        Raises:
            Blocked: the governor cannot be built (as :meth:`governor`).
        """
        self.governor()
        assert self.receipts is not None
        return self.receipts

    def _stopping(self) -> bool:
        return self.s.stop_event.is_set() or (self.stop is not None and self.stop.is_set())

    def _interrupt(self) -> ProctorError:
        self.s.store.update_run(self.run_id, status="stopped")
        self.s.store.append_event(self.run_id, "stopped", {})
        self.s.audit.emit("run_stopped", run_id=self.run_id, step_index=None)
        return RunInterrupted(
            f"run {self.run_id} stopped before its next step; continue it with"
            f" `proctor resume {self.run_id} -` and the document {{}}",
            details={"run_id": self.run_id},
        )

    def drive(self) -> RunEnvelope:
        """Drive from the first step not settled to the seal or the next pause.

        Raises:
            RunInterrupted: a stop was requested before a step began.
        """
        s = self.s
        from proctor.runtime.engine.bundles import recover_open_bundles

        # A bundle a crashed driver left half-applied is rolled back before any claim of it
        # is reconciled (its files are then at their before-images, and it is sent again).
        # The root's driver does it for its whole tree: a child's siblings may be applying one.
        if self.depth == 0:
            recover_open_bundles(s)
        refused = self._start_refusal()
        if refused is not None:
            return self._seal("blocked", refused[0], None, refused[1])
        try:
            governor = self.governor()
        except _Blocked as blocked:
            refusal = Refusal(code=blocked.code, message=self.sanitizer.text(blocked.message))
            return self._seal("blocked", blocked.seal_reason, None, refusal)
        inputs = dict(self.record.data.get("inputs") or {})
        settled = s.store.step_records(self.run_id)
        outputs: dict[str, Any] = {}
        for index, step in enumerate(self.method.steps):
            done = settled.get(step.id)
            if done is not None:
                if done.get("outcome") != "completed":
                    recorded = done.get("refusal")
                    return self._seal(
                        done.get("run_outcome", "failed"),
                        done.get("run_seal_reason", "child_failed"),
                        None,
                        None if recorded is None else Refusal.model_validate(recorded),
                    )
                outputs[step.id] = done.get("output")
                continue
            if self._stopping():
                raise self._interrupt()
            s._renew(self.run_id)
            kill_point("step.start")
            started = s.clock()
            try:
                got = self._step(governor, index, step, inputs, outputs)
            except (CommandStopped, RunInterrupted) as exc:
                raise self._interrupt() from exc
            if isinstance(got, StepPause):
                return self._pause(got.requests)
            body = {
                "outcome": got.outcome,
                "seal_reason": got.seal_reason,
                "output": got.output,
                "refusal": None if got.refusal is None else got.refusal.model_dump(),
                "run_outcome": got.run_outcome,
                "run_seal_reason": got.run_seal_reason,
                "already_done": got.already_done,
                "child_runs": got.child_runs,
                "spend_micro_usd": got.spend_micro_usd,
                "context_digests": got.context_digests,
                "started_at": started.isoformat(),
                "ended_at": s.clock().isoformat(),
            }
            s.store.settle_step(self.run_id, step.id, body, used=got.used)
            kill_point("step.settled")
            if got.outcome != "completed":
                return self._seal(got.run_outcome, got.run_seal_reason, None, got.refusal)
            outputs[step.id] = got.output
        try:
            value = self._result(outputs)
        except ProctorError as exc:
            return self._seal(
                "failed", "tool_failed", None, Refusal(code=exc.code, message=exc.message)
            )
        return self._seal("completed", None, value, None)

    def _start_refusal(self) -> tuple[str, Refusal] | None:
        """The refusal a run's start recorded (see :mod:`.start`), or ``start_incomplete`` for
        a record without its inputs (left by a version whose start was not one transaction):
        such a run seals blocked and never runs a step."""
        data = self.record.data
        blocked = data.get("start_blocked")
        if isinstance(blocked, dict):
            refusal = Refusal(code=str(blocked["code"]), message=str(blocked["message"]))
            return str(blocked["seal_reason"]), refusal
        if "inputs_digest" not in data:
            message = (
                "this run's start never completed (its inputs were not recorded), so no step"
                " ran; start the run again"
            )
            return "inputs_invalid", Refusal(code="start_incomplete", message=message)
        return None

    def _result(self, outputs: dict[str, Any]) -> Any:
        method = self.method
        if method.result_from:
            if len(method.result_from) == 1:
                value = outputs.get(method.result_from[0])
            else:
                value = {sid: outputs.get(sid) for sid in method.result_from}
        else:
            value = outputs.get(method.steps[-1].id)
        if method.outputs is None:
            return value
        return narrow_outputs(value, method.outputs)

    def _step(
        self,
        governor: Governor,
        index: int,
        step: Any,
        inputs: dict[str, Any],
        outputs: dict[str, Any],
    ) -> StepDone | StepPause:
        try:  # every step's own receipt is reserved before it runs (one budget for the tree)
            if governor.receipt_budget is not None:
                governor.receipt_budget.reserve(1)
        except ProctorError as exc:
            return run_kinds.budget_blocked(step.id, exc)
        if isinstance(step, AskStep):
            return run_kinds.ask_step(self, step)
        if isinstance(step, AgentStep):
            return run_kinds.agent_step(self, governor, index, step, inputs, outputs)
        if isinstance(step, SkillStep):
            from proctor.runtime.engine import compose  # a run that composes: loaded here

            return compose.skill_step(self, step, inputs, outputs)
        if isinstance(step, OperationStep):
            from proctor.runtime.engine.operations import operation_step

            return operation_step(self, governor, index, step, inputs, outputs)
        if isinstance(step, WorkerStep):
            from proctor.runtime.engine.pyfunc_step import worker_step

            return worker_step(self, governor, index, step, inputs, outputs)
        if step.tool in ("store.events.append", "store.key.put"):
            from proctor.runtime.engine.operations import store_step

            return store_step(self, governor, index, step, inputs, outputs)
        return run_kinds.tool_step(self, governor, index, step, inputs, outputs)

    # -- requests and pauses ---------------------------------------------------------------

    def open_request(self, address: str, body: dict[str, Any]) -> RequestRecord:
        """Record a request (its digest over exactly ``body``); a recorded decision for the
        same digest is kept."""
        record = RequestRecord(
            run_id=self.run_id,
            address=address,
            kind=str(body["kind"]),
            request_digest=digest(body),
            body=body,
        )
        return self.s.store.put_request(record)

    def _pause(self, requests: list[RequestRecord]) -> RunEnvelope:
        from proctor.runtime.engine.sealing import audit_lost_note, authority_notes, trace_of

        s = self.s
        person_only = all(r.kind in PERSON_KINDS for r in requests)
        status = "needs_approval" if person_only else "needs_agent"
        shown = []
        template: dict[str, Any] = {"schema": "proctor.resume.v1"}
        for r in requests:
            view, redacted = self.sanitizer.value(
                {
                    "address": r.address,
                    "kind": r.kind,
                    "request_digest": r.request_digest,
                    **{k: v for k, v in r.body.items() if k not in ("address", "kind")},
                }
            )
            if redacted:
                # The digest binds the exact act, secret included; the view never shows the
                # secret, so it names what it hid (a host cannot recompute this digest).
                view["redacted"] = redacted
            shown.append(view)
            lane = "approvals" if r.kind in PERSON_KINDS else "answers"
            entry: dict[str, Any] = {"request_digest": r.request_digest}
            if r.kind == "approval":
                entry.update({"approved": None, "reason": None})
            elif r.kind == "retry":
                entry["value"] = {"retry": None}
            elif r.kind == "question":
                entry["value"] = {q["id"]: {} for q in r.body.get("questions", [])}
            else:
                entry["value"] = None
            template.setdefault(lane, {})[r.address] = entry
        lost = int(self.record.data.get("audit_lost") or 0) + s.audit.lost(self.run_id)
        envelope = RunEnvelope(
            status=status,  # type: ignore[arg-type]
            run_id=self.run_id,
            skill=self.record.skill,
            method=self.record.method,
            trace=trace_of(s.store.calls(self.run_id)),
            requests=shown,
            answers_template=template,
            resume_command=f"proctor resume {self.run_id} -",
            audit_lost=lost,
            notes=authority_notes(self.authority.to_json()) + audit_lost_note(lost),
        )
        doc, _ = self.sanitizer.value(envelope.to_json())
        s.store.update_run(self.run_id, status=status, data={"envelope": doc, "audit_lost": lost})
        self.record.data["audit_lost"] = lost
        s.audit.take_lost(self.run_id)
        s.store.append_event(
            self.run_id, "paused", {"status": status, "addresses": [r.address for r in requests]}
        )
        s.audit.emit(
            "run_paused",
            run_id=self.run_id,
            step_index=None,
            status=status,
            requests=[
                {"address": r.address, "kind": r.kind, "request_digest": r.request_digest}
                for r in requests
            ],
        )
        kill_point("run.paused")
        return RunEnvelope.model_validate(doc)

    def seal_reused(self, result: Any) -> RunEnvelope:
        """Seal the run ``completed`` with a reused run's ``result``, no step run (``reuse``)."""
        self.s.store.append_event(self.run_id, "reused", dict(self.record.data["reused_from"]))
        return self._seal("completed", None, result, None)

    def _seal(
        self, outcome: str, seal_reason: str | None, result: Any, refusal: Refusal | None
    ) -> RunEnvelope:
        from proctor.runtime.engine.sealing import seal_run

        kill_point("run.before_seal")
        record = self.s.store.get_run(self.run_id)
        assert record is not None
        return seal_run(
            self.s, record, outcome=outcome, seal_reason=seal_reason, result=result, refusal=refusal
        )

    # -- turn calls ------------------------------------------------------------------------

    def turn_spec(self, turn: dict[str, Any], spec: CallSpec) -> CallSpec:
        """A managed or host-side turn call, held to the turn's allowance and step."""
        allowance = frozenset(turn.get("allowance", {}).get("tools", []))
        step_id = str(turn["step"])
        call_id = None if spec.call_id is None else f"{step_id}/turn/{spec.call_id}"
        return CallSpec(
            tool=spec.tool,
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

    def turn_call_spec(self, turn: dict[str, Any], spec: CallSpec) -> CallOutcome:
        """Admit one call of a managed turn; a change the floor holds is refused
        ``approval_required``.

        A managed turn's conversation lives in this process only; pausing it would mean either
        storing the model's transcript (untrusted text) to continue it later, or working the
        turn again, when the model may not make the approved call at all. So it does not wait:
        the model reads the refusal, and a person grants what a managed turn may change ahead
        of time (standing approvals) or lets a host work the turn.
        """
        admitted = replace(self.turn_spec(turn, spec), can_wait=False)
        unpriced = self._unpriced(admitted)
        if unpriced is not None:
            return unpriced
        # refused and recorded like any refusal
        return self.spend_call(admitted, lambda: self.governor().call(admitted))

    def _call_id_reused(self, spec: CallSpec, outcome: CallOutcome) -> CallOutcome:
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
        self.s.audit.emit(
            "call_refused",
            run_id=self.run_id,
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
        self,
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

            outcome, waiting_on = ask_human(self, turn, args, call_id)
            if waiting_on is not None:
                self._pause([waiting_on])
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

        governor = self.governor()
        admitted = self.turn_spec(turn, spec)
        unpriced = self._unpriced(admitted)
        if unpriced is not None:
            return unpriced
        self.host_turn = True
        try:
            return self._call_id_reused(
                admitted, self.spend_call(admitted, lambda: governor.call(admitted))
            )
        except ChildPending as pending:  # the call's child waits on a person (.skill_calls)
            self._pause(pending.requests)
            return pending.outcome(admitted.call_id or call_id, tool, admitted.step_id)
        except AwaitApproval as waiting:
            request = self.open_request(waiting.address, waiting.body)
            self._pause([request])
            return CallOutcome(
                call_id=admitted.call_id or waiting.address,
                tool=tool,
                step_id=admitted.step_id,
                status="refused",
                error={
                    "code": "approval_pending",
                    "message": f"'{tool}' changes something and this run's authority is"
                    f" effects: ask: the run waits on a person's approval at {waiting.address}"
                    f" (proctor approve {self.run_id} {waiting.address}, or the console); once"
                    " it is approved, make this call again with the same call_id",
                    "details": {
                        "address": waiting.address,
                        "request_digest": request.request_digest,
                        "run_status": "needs_approval",
                    },
                },
            )

"""Admission: the one path every tool call takes, from any surface.

:meth:`Governor.call` runs the ordered checks of DESIGN.md and the first refusal stops the call:

1. scope (the tool is in the step's or turn's allowance; an empty allowance admits nothing);
   then a keyed write (a connector write, a ``store.*`` write) without an ``idempotency_key``
   is refused, and its key is scoped (:mod:`.operations`),
2. schema (the arguments validate against the tool's JSON Schema),
3. containment (every path resolves inside the workspace; sensitive and authority files refused),
4. policy (enforceable rules in their fixed order; ``warn`` continues, ``block`` refuses),
5. floor (``effects: none`` refuses every change; under ``ask`` a change with no approval of its
   own raises :class:`AwaitApproval` carrying what executes; the driver pauses the run on it;
   an operation declared ``approval: required`` does so under any effects but ``none``),
6. budget (calls and receipts are reserved before anything is sent),
7. delivery (credentials reach the adapter only, through ``ToolContext.extras``),
8. execution (an effect is claimed durably in the run store before it is sent, settled after;
   a process runs in the sandbox :mod:`.sandboxing` chose before the floor),
9. sanitization of the result (exact delivered secrets, credential shapes, secret-named fields),
10. record: the run store, then the audit log (receipts are sealed from the store's record).

A refusal is returned as a :class:`CallOutcome` with ``status="refused"`` and a stable ``code``;
it never raises and never ends the process. The call's types (:class:`CallSpec`,
:class:`CallOutcome`, :class:`AwaitApproval`) live in :mod:`.calls` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import replace
from proctor.core.authority import Authority
from proctor.core.floor import decide
from proctor.core.moments import iso_text
from proctor.errors import LeaseLost, ProctorError, RefusedCall
from proctor.policy import write_tally
from proctor.policy.evaluate import PolicyDecision, Unrestricted, evaluate
from proctor.policy.guards import GuardContext, RunHistory
from proctor.policy.model import PolicySet
from proctor.policy.registry import GuardRegistry
from proctor.policy.shipped_guards import CHANGING_TOOLS
from proctor.receipts.canonical import digest, digest_and_text
from proctor.runtime.admission.calls import AwaitApproval as AwaitApproval
from proctor.runtime.admission.calls import CallOutcome as CallOutcome
from proctor.runtime.admission.calls import CallSpec as CallSpec
from proctor.runtime.admission.calls import CallStatus as CallStatus
from proctor.runtime.admission.calls import Clock as Clock
from proctor.runtime.admission.calls import Deliver as Deliver
from proctor.runtime.admission.calls import utc_now as _utc_now
from proctor.runtime.admission.cancelled import settle_cancelled, unanswered
from proctor.runtime.admission.decisions import cannot_wait, decision_for, may_ask, unless_declined
from proctor.runtime.admission.names import name_refusal, recorded_name
from proctor.runtime.admission.operations import (
    admit_operation,
    approval_required,
    operation_spec,
    quoted,
)
from proctor.runtime.admission.sandboxing import choose_sandbox, hand_over
from proctor.runtime.boundary.views import admitted_workspace
from proctor.runtime.records.retention import RETAINED_ARGS
from proctor.runtime.records.rows import dumps_member
from proctor.runtime.records.runs import CallRecord, RequestRecord
from proctor.runtime.testhooks import kill_point
from proctor.runtime.tools.base import (
    CHANGING_EFFECTS,
    TAINT_EXTRA,
    CommandStopped,
    OutcomeUnknown,
    Tool,
    ToolContext,
    validate_args,
)

if TYPE_CHECKING:
    from proctor.core.budget import ReceiptBudget
    from proctor.runtime.boundary.sandbox import SandboxSetting
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.boundary.workspace import Resolved, Workspace
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.records.runs import RunStore


# A result's canonical text at least this long is spliced into its stored row rather than
# encoded again (below it, the splice costs more than the encoding it saves).
_SHARED_TEXT_MIN = 512
# At most this many bytes containment read are kept for one call's handler (a call naming
# many files keeps the first ones).
_SEEN_MAX = 1024 * 1024


class _AlreadyDone(Exception):
    def __init__(self, record: CallRecord) -> None:
        super().__init__(record.call_id)
        self.record = record


class Governor:
    """Admits, executes and records the calls of one run (one governor per run)."""

    def __init__(
        self,
        *,
        run_id: str,
        workspace: Workspace,
        store: RunStore,
        tools: Mapping[str, Tool],
        policies: PolicySet | Unrestricted,
        guards: GuardRegistry,
        audit: AuditLog,
        sanitizer: Sanitizer,
        authority: Authority | None = None,
        receipt_budget: ReceiptBudget | None = None,
        directive_id: str | None = None,
        package_identity: str | None = None,
        write_budget: int | None = None,
        deliver: Deliver | None = None,
        clock: Clock = _utc_now,
        sandbox: SandboxSetting | None = None,
        step_scopes: Mapping[str, tuple[Authority, Workspace]] | None = None,
        retain: bool = False,
    ) -> None:
        if not isinstance(policies, (PolicySet, Unrestricted)):  # no union built per run
            raise ProctorError(
                "incomplete context: policies not supplied; pass the loaded PolicySet, or "
                "proctor.UNRESTRICTED to evaluate no policy rule on purpose",
                code="incomplete_context",
            )
        self.run_id = run_id
        self.workspace = workspace
        self.store = store
        self.tools = tools
        self.policies = policies
        self.guards = guards
        self.audit = audit
        self.sanitizer = sanitizer
        self.authority = authority or Authority()
        self.receipt_budget = receipt_budget
        self.directive_id = directive_id
        # per-package keys (store and connector writes) are scoped by where the package came
        # from; the name (directive_id) is what guards see
        self.package_identity = package_identity or directive_id
        self.write_budget = write_budget
        self.deliver = deliver
        self.clock = clock
        self.sandbox = sandbox
        # a step that narrows its authority (effects, reach): every call made for it (its own,
        # its turn's, its worker's) is admitted under the narrowed authority and workspace
        self.step_scopes = dict(step_scopes or {})
        self.retain = retain
        self.history = RunHistory()
        self._seeded = False  # the history's write tallies start from the run's (write_tally)
        self._tally: Any = None  # the run's write tally as this governor last read or stored it
        self._tally_known = False
        # the run's data as it was before this governor counted a call, read once (_run_data);
        # holding the store and the id only, never the governor (no reference cycle)
        self._row = write_tally.Once(lambda: _data_of(store.get_run(run_id)))
        self.calls_made = 0
        self._per_step: dict[str | None, int] = {}
        self._fresh = False  # see resume_from

    def resume_from(self, admitted: int, *, fresh: bool = False) -> None:
        """Continue counting from the ``admitted`` calls (not refused) a previous driver
        recorded, so ``max_calls`` counts the whole run. Generated call ids stay unique: a
        step's are numbered on from the calls the store holds for it (read when the step
        first makes one), or from none when the run is ``fresh`` (its driver's own start
        created it a moment ago, under a lease no other driver held: nothing of it is stored)."""
        self.calls_made = admitted
        self._fresh = fresh

    def numbered_from(self, step_id: str | None, stored: int) -> None:
        """Number the step's calls on from the ``stored`` ones its driver read a moment ago,
        not counting them again (unless this governor numbers the step's calls already)."""
        self._per_step.setdefault(step_id, stored)

    # -- the path ---------------------------------------------------------------------------

    def call(self, spec: CallSpec) -> CallOutcome:
        """Admit, run and record one call; never raises for a refusal or a tool failure.

        Raises:
            StoreError: the run store could not record the call (the run cannot go on safely).
        """
        started = self.clock()
        if spec.tool not in self.tools:  # recorded scrubbed, bounded, never empty (names.py)
            spec = replace(spec, tool=recorded_name(spec.tool, self.sanitizer.text))
        call_id = spec.call_id or self._next_call_id(spec.step_id)
        if spec.call_id is not None:
            recorded = self.store.get_call(self.run_id, call_id)
            if recorded is not None and recorded.state == "settled":
                return self._recorded(spec, recorded, started)
        tool = self.tools.get(spec.tool)
        outcome = CallOutcome(
            call_id=call_id,
            tool=spec.tool,
            step_id=spec.step_id,
            status="refused",
            effect=tool.effect if tool is not None else "none",
            started_at=started,
        )
        try:
            outcome.args_digest = digest(dict(spec.args))
        except ProctorError:
            outcome.args_digest = digest({"unrepresentable": True})
        if self.retain:  # before an operation's spec is rewritten: the digest's arguments
            outcome.retained_args, _ = self.sanitizer.value(dict(spec.args))
        if spec.problem is not None:
            unreadable = RefusedCall(
                "the call's arguments could not be read as one JSON object"
                f" ({spec.problem}); nothing was called",
                code=spec.problem,
            )
            return self._refused(spec, outcome, unreadable)
        scope = self.scope(spec.step_id)
        try:
            spec = operation_spec(spec, tool, self.package_identity)
            args, resolved, seen = self._admit(spec, tool, outcome, scope)
        except RefusedCall as refusal:
            return self._refused(spec, outcome, refusal)
        except _AlreadyDone as done:
            return self._recorded(spec, done.record, started, already_done=True)
        assert tool is not None
        if spec.cancel is not None and spec.cancel.is_set():
            cancelled = RefusedCall(
                "the call was cancelled before it was sent", code="call_cancelled"
            )
            return self._refused(spec, outcome, cancelled)
        if outcome.approved_by is not None:
            self.audit.emit(
                "approval_used",
                run_id=self.run_id,
                step_index=spec.step_index,
                tool=tool.name,
                call_id=outcome.call_id,
                approved_by=outcome.approved_by,
            )
        return self._execute(spec, tool, args, resolved, seen, outcome, scope[1])

    def scope(self, step_id: str | None) -> tuple[Authority, Workspace]:
        """The authority and workspace a call of step ``step_id`` is admitted under: the
        step's narrowed ones when it narrows, else the run's."""
        found = self.step_scopes.get(step_id or "")
        return found if found is not None else (self.authority, self.workspace)

    def _admit(
        self,
        spec: CallSpec,
        tool: Tool | None,
        outcome: CallOutcome,
        scope: tuple[Authority, Workspace],
    ) -> tuple[dict[str, Any], dict[tuple[str, str], Resolved], dict[Resolved, bytes]]:
        authority, workspace = scope
        # 1. scope
        if (unnamed := name_refusal(spec.tool)) is not None:
            raise unnamed
        if spec.tool not in spec.allowance:
            if not spec.allowance:
                raise RefusedCall(
                    f"tool '{spec.tool}' is not allowed here: this step allows no tools",
                    code="tool_not_allowed",
                )
            allowed = ", ".join(sorted(spec.allowance))
            raise RefusedCall(
                f"tool '{spec.tool}' is not allowed here; allowed: {allowed}",
                code="tool_not_allowed",
            )
        if tool is None:
            raise RefusedCall(f"tool '{spec.tool}' is not registered", code="tool_unknown")
        # 2. schema
        args = dict(spec.args)
        problem = validate_args(tool, args)
        if problem is not None:
            raise RefusedCall(
                f"arguments of '{tool.name}' do not fit its schema: {problem}",
                code="schema_invalid",
            )
        # A person's decline is applied before anything reads the world (containment,
        # policy, the idempotency record, the floor's preview): a call that went stale while
        # the run waited is still the call the person declined, and is never re-checked or sent.
        address = spec.address or spec.step_id or outcome.call_id
        requests = unless_declined(
            self.store, self.run_id, authority, tool, address, outcome, required=spec.required
        )
        # an MCP operation's exact upstream call, against its tool's pinned definition
        admit_operation(tool, args)
        # 3. containment
        # each path as containment resolved it, reused by the handler of this call, with the
        # bytes of each file it read whole (the handler's read of it, then, opens nothing)
        resolved: dict[tuple[str, str], Resolved] = {}
        seen: dict[Resolved, bytes] = {}
        kept = 0
        for path, access in tool.paths(args):
            target, data = workspace.resolve_seen(path, access)
            resolved[(path, access)] = target
            if data is not None and access == "read" and kept + len(data) <= _SEEN_MAX:
                seen[target] = data
                kept += len(data)
        relpaths = [r.rel for r in resolved.values()]
        # 4. policy
        decision = self._policy(spec, tool, args, tuple(relpaths))
        outcome.verdicts = [_verdict_json(v) for v in decision.verdicts]
        for v in decision.verdicts:
            self.audit.emit(
                v.event,
                run_id=self.run_id,
                step_index=spec.step_index,
                taint=self.sanitizer.taint,
                tool=tool.name,
                call_id=outcome.call_id,
                rule_id=v.rule.id,
                allowed=v.verdict.allowed,
                code=v.verdict.code,
                message=v.verdict.message,
                enforcement=v.rule.enforcement,
                effect=v.effect,
            )
        decision.raise_if_refused()
        # An act already done under its idempotency key is neither asked for nor sent again.
        if spec.idempotency_key is not None and tool.effect in CHANGING_EFFECTS:
            done = self.store.find_idempotent(spec.idempotency_key)
            if done is not None:
                raise _AlreadyDone(done)
        outcome.sandbox = choose_sandbox(self.sandbox, authority, tool, workspace.root)
        # 5. floor
        self._floor(spec, tool, args, outcome, requests, scope)
        # 6. budget
        if authority.max_calls is not None and self.calls_made >= authority.max_calls:
            raise RefusedCall(
                f"the run's call limit ({authority.max_calls}) is used up",
                code="call_budget_exceeded",
            )
        if self.receipt_budget is not None:
            self.receipt_budget.reserve(1)
        return args, resolved, seen

    def _floor(
        self,
        spec: CallSpec,
        tool: Tool,
        args: dict[str, Any],
        outcome: CallOutcome,
        requests: list[RequestRecord],
        scope: tuple[Authority, Workspace],
    ) -> None:
        authority, workspace = scope
        if not may_ask(tool, authority, required=spec.required):
            return
        # the step's own approval (an operation step's approval:) adds to the floor's: a
        # person decides the call whatever effects: allow or a standing approval would admit
        required = approval_required(tool) or spec.required
        if authority.effects == "none" and tool.effect in CHANGING_EFFECTS:
            verdict = decide(authority, _bare_change(tool))
            raise RefusedCall(verdict.reason, code="effects_none")
        from proctor.runtime.admission.preview import approval_request_body, preview

        change, payload = preview(workspace, tool, args, self.package_identity)
        address = spec.address or spec.step_id or outcome.call_id
        body = approval_request_body(
            workspace,
            address=address,
            tool=tool.name,
            reason=spec.reason,
            payload=payload,
            args_digest=outcome.args_digest,
        )
        # who must approve and until when are part of what the person is asked (stated only
        # when set, so other requests' digests are unchanged)
        if spec.approval_type is not None:
            body["approval_type"] = spec.approval_type
        needed = max(spec.approvals, authority.min_approvers or 1)
        if needed > 1:
            body["approvals"] = needed
        expires_in = spec.expires_in or authority.expires_in
        if expires_in is not None:
            body.update(expires_in=expires_in, on_expiry="decline")
        request_digest = digest(body)
        decision = decision_for(requests, address, request_digest)
        if decision is not None and decision.get("approved") is False:
            # unless_declined applies every decline bound to this call before containment; a
            # decision is never taken for an approval it is not
            raise RefusedCall(
                f"a person declined '{tool.name}' at {address}", code="approval_declined"
            )
        verdict = decide(
            authority, replace(change, required=required), approved=decision is not None
        )
        if verdict.verdict == "pause":
            if not spec.can_wait:
                raise cannot_wait(tool.name, required=required)
            raise AwaitApproval(address, body, request_digest)
        if verdict.standing_index is not None:
            outcome.approved_by = f"standing_approvals[{verdict.standing_index}]"
        elif decision is not None:
            outcome.approved_by = f"person:{address}"

    def _site_noter(self, call_id: str) -> Callable[[dict[str, float]], None]:
        store, run_id = self.store, self.run_id
        return lambda tree: store.note_call_site(run_id, call_id, tree)

    def _expectation(
        self, tool: Tool, args: dict[str, Any], workspace: Workspace
    ) -> list[dict[str, Any]] | None:
        """Each file's before and after digest, so a crashed write is confirmed or redone."""
        from proctor.runtime.admission.preview import preview

        try:
            _, payload = preview(workspace, tool, args, self.package_identity)
        except ProctorError:
            return None
        files = payload.get("files")
        if not isinstance(files, list):
            return None
        return [
            {k: f.get(k) for k in ("path", "op", "before_digest", "after_digest")} for f in files
        ]

    def _policy(
        self, spec: CallSpec, tool: Tool, args: dict[str, Any], relpaths: tuple[str, ...]
    ) -> PolicyDecision:
        extra = {} if self.write_budget is None else {"write_budget": self.write_budget}
        self._seed()
        ctx = GuardContext(
            tool_name=tool.name,
            raw_args=spec.args,
            args=args,
            reason=spec.reason,
            directive_id=self.directive_id,
            run_history=self.history,  # a tuple only if a guard reads it
            workspace_relpaths=relpaths,
            **extra,
        )
        return evaluate(self.policies, ctx, self.guards)

    def _execute(
        self,
        spec: CallSpec,
        tool: Tool,
        args: dict[str, Any],
        resolved: dict[tuple[str, str], Resolved],
        seen: dict[Resolved, bytes],
        outcome: CallOutcome,
        workspace: Workspace,
    ) -> CallOutcome:
        self.calls_made += 1
        relpaths = [r.rel for r in resolved.values()]
        changes = tool.effect in CHANGING_EFFECTS
        record = CallRecord(
            run_id=self.run_id,
            call_id=outcome.call_id,
            step_id=spec.step_id,
            tool=tool.name,
            state="claimed",
            args_digest=outcome.args_digest,
            idempotency_key=spec.idempotency_key,
        )
        if changes:
            if tool.effect == "write":
                record.result = {"pending": self._expectation(tool, args, workspace)}
            # 8. the claim is durable before the effect is sent
            self.store.claim_call(record)
            kill_point("call.claimed")
        extras = self.deliver(spec, tool) if self.deliver is not None else {}
        extras[TAINT_EXTRA] = self.sanitizer.taint
        sandboxed = hand_over(outcome.sandbox, extras, self.audit, run_id=self.run_id,
                              step_index=spec.step_index, tool=tool.name,
                              call_id=outcome.call_id, taint=self.sanitizer.taint)  # fmt: skip
        ctx = ToolContext(
            workspace=admitted_workspace(workspace, resolved, seen),
            store=self.store,
            run_id=self.run_id,
            call_id=outcome.call_id,
            step_id=spec.step_id,
            extras=extras,
            # a read stops on a cancel; an effect in flight runs to its end
            cancel=None if changes else spec.cancel,
        )
        # a program the call starts records where it runs in the claim (fenced: a driver
        # that lost the lease ends it at once; see tools.process.STARTED)
        noted = None
        if changes:
            from proctor.runtime.tools.process import STARTED

            noted = STARTED.set(self._site_noter(outcome.call_id))
        try:
            raw_result: Any = tool.handler(ctx, args)
            status: CallStatus = "completed"
            error = None
        except LeaseLost:
            raise  # this driver stops: nothing more of it is recorded
        except CommandStopped as stopped:  # its tree was killed: settled, never left in doubt
            settle_cancelled(self.store, self.audit, self.run_id, spec, tool, outcome,
                             stopped, sandboxed, ended=self.clock())  # fmt: skip
            raise
        except OutcomeUnknown as unknown:  # sent, unanswered: a fixed step reconciles it
            raw_result, status, error = None, "failed", unanswered(unknown, spec.reconciles)
        except ProctorError as exc:
            raw_result = None
            status = "refused" if isinstance(exc, RefusedCall) else "failed"
            error = exc.to_dict()
        finally:
            if noted is not None:
                STARTED.reset(noted)
        # 9. sanitize
        result, redacted = self.sanitizer.value(raw_result)
        if error is not None:
            error, _ = self.sanitizer.value(error)
        outcome.status = status
        outcome.result = result
        outcome.error = error
        outcome.ended_at = self.clock()
        result_text = None
        if status == "completed":
            outcome.outputs_digest, result_text = digest_and_text(result)
            outcome.result_text = result_text
        settled = {
            "status": status,
            "result": result,
            "error": error,
            "verdicts": outcome.verdicts,
            "effect": tool.effect,
            "started_at": _iso(outcome.started_at),
            "ended_at": _iso(outcome.ended_at),
            "approved_by": outcome.approved_by,
            **sandboxed,
            **quoted(tool),
        }
        if outcome.retained_args is not None:
            settled[RETAINED_ARGS] = outcome.retained_args
        if spec.cancel is not None and spec.cancel.is_set():
            settled["cancel_requested"] = True  # recorded beside how the call actually ended
        # 10. record: the run store, then the audit log
        entry = {"tool": tool.name, "args": args, "outcome": _history(status)}
        if changes:
            kill_point("call.executed")
            with self.store.transaction():  # the call counted in the run's tally with it
                self.store.settle_call(self.run_id, outcome.call_id, status, settled)
                tally = self._carry(entry)
            self._carried(tally)
            kill_point("call.settled")
        else:
            record.outcome = status
            record.result = settled
            if result_text is not None and len(result_text) >= _SHARED_TEXT_MIN:
                # the digest's canonical text is the stored row's text of the result too
                record.result_json = dumps_member(settled, "result", result_text)
            if entry["tool"] in CHANGING_TOOLS:
                with self.store.transaction():
                    self.store.record_call(record)
                    tally = self._carry(entry)
                self._carried(tally)
            else:
                self.store.record_call(record)
        self.history.append(entry)
        self.audit.emit(
            "tool_call",
            run_id=self.run_id,
            step_index=spec.step_index,
            taint=self.sanitizer.taint,
            tool=tool.name,
            call_id=outcome.call_id,
            step=spec.step_id,
            effect=tool.effect,
            outcome=status,
            code=None if error is None else error.get("code"),
            paths=relpaths,
            args_digest=outcome.args_digest,
            outputs_digest=outcome.outputs_digest,
            result_redacted=redacted,
            started_at=settled["started_at"],
        )
        return outcome

    def _seed(self) -> None:
        """Start the history's write tallies from the run's calls made by other governors (a
        host's, a resume's, a crashed driver's), once, before this governor counts its own.

        The run's row is read when a guard first asks for a tally, or when this governor first
        counts a call (:meth:`_carry`), whichever comes first: while it holds the run's lease
        no other driver writes the tally, and its own count is stored only after the read, so
        the read sees what it would have seen now. A call no write guard looks at (a read)
        reads no row."""
        if not self._seeded:
            self._seeded = True
            if self._fresh:  # its driver's start created the run: no call of it is counted yet
                self._tally, self._tally_known = None, True
                return
            write_tally.seed_from(self.history, self._row)

    def _run_data(self) -> dict[str, Any] | None:
        """The run's data as it was before this governor counted a call (read once; ``None``:
        no such run)."""
        data: dict[str, Any] | None = self._row()
        if data is not None and not self._tally_known:
            self._tally, self._tally_known = data.get(write_tally.KEY), True
        return data

    def settle_reconciled(
        self,
        call_id: str,
        outcome: str,
        settled: dict[str, Any],
        event: tuple[str, dict[str, Any]],
        counted: tuple[str, Any] | None,
    ) -> None:
        """Settle a claim reconciliation decided (a crashed driver's, or one whose answer
        never came) with its event, in one transaction. ``counted`` (the claim's tool and
        arguments) is given when its effect took place or may have: the call then counts
        like one this governor settled, in the run's write tally in that transaction and in
        this governor's history, so a write a crash left unsettled still spends the budget."""
        entry = None
        if counted is not None:
            self._seed()  # from what the run counted before this settlement adds to it
            tool, args = counted
            entry = {
                "tool": tool,
                "args": args if isinstance(args, dict) else {},
                "outcome": "ok" if outcome == "completed" else outcome,  # as _history says
            }
        with self.store.transaction():
            self.store.settle_call(self.run_id, call_id, outcome, settled, reconciled=True)
            self.store.append_event(self.run_id, *event)
            tally = None if entry is None else self._carry(entry)
        self._carried(tally)
        if entry is not None:
            self.history.append(entry)

    def _carry(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        """Add a changing call to the write tally the run's data keeps (inside the
        transaction that records it), so the next governor of the run starts from it; the
        tally stored, if it changed. The run's row is read only when this governor has not
        read or stored the tally yet: while it holds the run's lease no other driver writes it."""
        if entry["tool"] not in CHANGING_TOOLS or entry["outcome"] == "refused":
            return None
        if not self._tally_known and self._run_data() is None:
            return None
        tally = write_tally.carried(self._tally, entry)
        if tally is not None:
            self.store.update_run(self.run_id, data={write_tally.KEY: tally})
            kill_point("call.counted")  # inside the settling commit: neither kept, or both
        return tally

    def _carried(self, tally: dict[str, Any] | None) -> None:
        """The tally :meth:`_carry` stored, kept once its transaction committed."""
        if tally is not None:
            self._tally = tally

    def _refused(self, spec: CallSpec, outcome: CallOutcome, refusal: RefusedCall) -> CallOutcome:
        error, _ = self.sanitizer.value(refusal.to_dict())
        outcome.status = "refused"
        outcome.error = error
        outcome.ended_at = self.clock()
        # a recorded refusal has a receipt too: with none left in the tree's budget it is
        # audited only, so refusals can never take the tree past its receipt limit
        if self._refusal_receipt():
            self._record_refusal(spec, outcome, error)
        self.history.append({"tool": spec.tool, "args": dict(spec.args), "outcome": "refused"})
        details = error.get("details") or {}
        # a decline names who declined (null for a document piped to resume)
        decider: dict[str, Any] = {}
        if "decided_by" in details:
            decider["decided_by"] = details["decided_by"]
        self.audit.emit(
            "call_refused",
            run_id=self.run_id,
            step_index=spec.step_index,
            taint=self.sanitizer.taint,
            tool=spec.tool,
            call_id=outcome.call_id,
            step=spec.step_id,
            code=error.get("code"),
            message=error.get("message"),
            rule_id=details.get("rule_id"),
            args_digest=outcome.args_digest,
            **decider,
        )
        return outcome

    def _refusal_receipt(self) -> bool:
        if self.receipt_budget is None:
            return True
        try:
            self.receipt_budget.reserve(1)
        except RefusedCall:
            return False
        return True

    def _record_refusal(self, spec: CallSpec, outcome: CallOutcome, error: Any) -> None:
        self.store.record_call(
            CallRecord(
                run_id=self.run_id,
                call_id=outcome.call_id,
                step_id=spec.step_id,
                tool=spec.tool,
                state="settled",
                args_digest=outcome.args_digest,
                outcome="refused",
                result={
                    "status": "refused",
                    "result": None,
                    "error": error,
                    "verdicts": outcome.verdicts,
                    "effect": outcome.effect,
                    "started_at": _iso(outcome.started_at),
                    "ended_at": _iso(outcome.ended_at),
                    **(
                        {}
                        if outcome.retained_args is None
                        else {RETAINED_ARGS: outcome.retained_args}
                    ),
                },
            )
        )

    def _recorded(
        self, spec: CallSpec, record: CallRecord, started: datetime, *, already_done: bool = False
    ) -> CallOutcome:
        settled = record.result if isinstance(record.result, dict) else {}
        result = settled.get("result")
        if already_done and isinstance(result, dict) and "already_done" in result:
            result = {**result, "already_done": True}  # answered from the run store: say so
        outcome = CallOutcome(
            call_id=spec.call_id or record.call_id,
            tool=record.tool,
            step_id=spec.step_id,
            status=settled.get("status", record.outcome or "completed"),
            result=result,
            error=settled.get("error"),
            args_digest=record.args_digest,
            started_at=started,
            ended_at=self.clock(),
            already_done=self._receipt_of(record) if already_done else None,
        )
        if outcome.status == "completed":
            outcome.outputs_digest = digest(outcome.result)
        return outcome

    def _receipt_of(self, record: CallRecord) -> str:
        """The receipt that records a done act: its run's, once that run sealed."""
        run = self.store.get_run(record.run_id)
        if run is not None and run.receipt_id:
            return run.receipt_id
        return f"{record.run_id}/{record.call_id}"

    def _next_call_id(self, step_id: str | None) -> str:
        if step_id not in self._per_step and self._fresh:
            self._per_step[step_id] = 0
        elif step_id not in self._per_step:
            # counted a page at a time: a turn of a million calls is never held to count it
            calls = self.store.iter_step_calls(self.run_id, step_id)
            self._per_step[step_id] = sum(1 for _ in calls)
        n = self._per_step[step_id] + 1
        self._per_step[step_id] = n
        return f"{step_id or 'call'}/{n}"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else iso_text(moment)


def _bare_change(tool: Tool) -> Any:
    from proctor.core.floor import Change

    return Change(tool.name, tool.effect)


def _history(status: CallStatus) -> str:
    return "ok" if status == "completed" else status


def _verdict_json(outcome: Any) -> dict[str, Any]:
    return {
        "rule_id": outcome.rule.id,
        "code": outcome.verdict.code,
        "enforcement": outcome.rule.enforcement,
        "effect": outcome.effect,
        "message": outcome.verdict.message,
    }


def _data_of(run: Any) -> dict[str, Any] | None:
    return None if run is None else run.data

"""Drive one run's steps: the driver's state, what it resolves once, and the step loop.

:class:`RunDriver` is built from the run's record in the store (any process can build it) and
is used by :class:`proctor.runtime.engine.session.Session` while it holds the run's lease.

The driver is split where its responsibilities part, not by size: this module holds the run's
state, the resources a driver resolves once (governor, spend ledger, connector operations, state
store seam, sandbox setting, credential delivery; one it cannot build seals the run blocked as
:class:`Blocked`) and the step loop; :mod:`.pausing` writes how the loop stopped (requests, the
paused envelope, the seal); :mod:`.turn_calls` makes the calls an agent turn asks for; the step
kinds themselves are :mod:`.kinds` and its siblings.

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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import Refusal, RunEnvelope
from proctor.contracts.skill import (
    AgentStep,
    AskStep,
    Method,
    OperationStep,
    ProcessStep,
    SkillStep,
    WaitStep,
    WorkerStep,
)
from proctor.core.authority import Authority, narrow, parse_authority
from proctor.core.budget import RUN_RECEIPTS, ReceiptBudget
from proctor.core.moments import iso_text
from proctor.errors import ConfigError, CredentialError, PolicyLoadError, ProctorError
from proctor.policy import write_budget
from proctor.receipts.jsontext import compact_encoder
from proctor.runtime.admission.governor import CallOutcome, CallSpec, Governor
from proctor.runtime.boundary.reach import run_workspace
from proctor.runtime.boundary.sandbox_setting import sandbox_setting, stricter
from proctor.runtime.boundary.sanitize import Sanitizer
from proctor.runtime.engine import kinds as run_kinds
from proctor.runtime.engine import pausing, turn_calls
from proctor.runtime.engine.bundles import recover_open_bundles
from proctor.runtime.engine.confinement import confined_tools
from proctor.runtime.engine.delivery import NeedsCredential, prepare_delivery, with_aliases
from proctor.runtime.engine.host import RunHost, RunInterrupted, StepDone, StepPause, narrow_outputs
from proctor.runtime.engine.operations import (
    mcp_credentials,
    operation_credentials,
    run_operation_tools,
    unreadable_upstream_tools,
)
from proctor.runtime.engine.skill_calls import skill_tools
from proctor.runtime.limits import max_receipts_from_env
from proctor.runtime.records.runs import RequestRecord, RunCounts, RunRecord, RunStore
from proctor.runtime.skills import package_authority_files
from proctor.runtime.storage.select import open_state_store
from proctor.runtime.testhooks import kill_point
from proctor.runtime.tools.base import PACKAGE_EXTRA, CommandStopped
from proctor.runtime.tools.store import store_deliver

if TYPE_CHECKING:
    from proctor.core.spend import SpendLedger
    from proctor.policy.cache import RunPolicies
    from proctor.runtime.admission.governor import Deliver
    from proctor.runtime.boundary.sandbox import SandboxSetting
    from proctor.runtime.connectors.operations import OperationTool
    from proctor.runtime.skills import LoadedSkill
    from proctor.runtime.tools.base import Tool

__all__ = ["Blocked", "RunDriver", "with_receipts_seam"]


class Blocked(Exception):
    """The run cannot go on as prepared: it seals blocked with ``code`` and ``seal_reason``."""

    def __init__(self, code: str, message: str, seal_reason: str) -> None:
        super().__init__(message)
        self.code, self.message, self.seal_reason = code, message, seal_reason


class RunDriver:
    """One run, rebuilt from its record, driven while its session holds the lease."""

    def __init__(
        self,
        session: RunHost,
        record: RunRecord,
        skill: LoadedSkill,
        method: Method,
        stop: threading.Event | None,
    ) -> None:

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
        host, self.authority = _authorities(record.data.get("authority") or {}, method)
        self.recorded_egress = host.egress  # the grant delivery enforces, parsed once here
        self.sanitizer = Sanitizer()
        self._governor: Governor | None = None
        # the run's counts as the governor's build read them, for the drive that built it
        self._built_counts: RunCounts | None = None
        self._operations: dict[str, OperationTool] | None = None
        # the policy state loaded when the run started (its digest went into the run's row
        # with it): the governor enforces that state, read once (None: it loads its own)
        self.start_policies: RunPolicies | None = None
        # whether the run is a directive's (its package folder resolves under the directive
        # packages): decided once per driver, as its skill and record are read once
        self.directive: bool | None = None
        # the start found no proctor.toml a moment ago (.start.no_config): none is read for it
        self.bare = False
        # the workspace's real folder as Session.run resolved it at its start (None: not a
        # folder), one answer for its held checks; "": resolved where asked (resume, turns)
        self.real_root: str | None = ""
        # credential material for this command only (the Python API's request_secrets)
        self.request_secrets: Mapping[str, str] | None = None
        # what crashed drivers left was recovered by this run's start a moment ago, and that
        # start created the run under this driver's lease: no other driver recorded any of it
        self.recovered = False
        self.fresh = False
        # a request of the run was recorded by this driver; a fresh driver that recorded none
        # seals without reading the run's requests (only a lease holder records one: fenced)
        self.asked = False

    # -- what a driver resolves once -----------------------------------------------------

    def spend_ledger(self) -> SpendLedger:
        """The ledger the run's tree spends from: the root's, rebuilt from its record (what a
        killed driver held counts as spent)."""
        if self.ledger is None:
            from proctor.core.spend import SpendLedger

            state = self.record.data.get("spend") or {}
            spent = int(state.get("spent") or 0) + int(state.get("held") or 0)
            store, run_id = self.s.store, self.run_id
            self.ledger = SpendLedger(
                self.authority.max_spend_micro_usd,
                spent=spent,
                persist=lambda now: store.update_run(run_id, data={"spend": now}),
            )
        return self.ledger

    def operation_tools(self) -> dict[str, OperationTool]:
        """The run's connector operations as tools (read once per driver).

        Raises:
            ParseError: a connector manifest is refused.
        """
        if self._operations is None:
            self._operations = run_operation_tools(self.skill, self.s.workspace, self.s.environ)
        return self._operations

    def _operations_or_blocked(self) -> dict[str, OperationTool]:
        try:
            return self.operation_tools()
        except ProctorError as exc:
            raise Blocked(exc.code, exc.message, "admission_refused") from exc

    def _with_state(self, deliver: Deliver) -> Deliver:
        """``deliver`` plus the ``store.*`` tools' seam: the state store (opened on first use)
        under the namespace of the run's package identity (never a name the package chose),
        which no call names; and the identity itself, which connector writes are keyed by."""

        s = self.s
        identity = self.skill.identity or self.skill.package.name
        state = store_deliver(identity, lambda: open_state_store(s.environ, s.workspace.state_dir))
        return lambda spec, tool: {
            **deliver(spec, tool),
            **state(spec, tool),
            PACKAGE_EXTRA: identity,
        }

    def _sandbox(self) -> SandboxSetting:
        """The run's sandbox setting: ``PROCTOR_SANDBOX``, else the strictest default any driver
        of the run had (recorded, so a looser session resuming it keeps it)."""

        recorded = self.record.data.get("sandbox_default")
        default = stricter(self.s.sandbox_default, recorded)
        if default == "required" and recorded != default:  # auto, the loosest, needs no record
            self.s.store.update_run(self.run_id, data={"sandbox_default": default})
            self.record.data["sandbox_default"] = default
        try:
            found = getattr(self.s, "found_executables", None)  # a session's (Session's)
            return sandbox_setting(self.s.environ, default=default, found=found)
        except ConfigError as exc:
            raise Blocked(exc.code, exc.message, "admission_refused") from exc

    def _deliver(self) -> Deliver:
        """Resolve the run's credentials once (see :mod:`proctor.runtime.engine.delivery`).

        Raises:
            NeedsCredential: a credential is missing (the caller parks the run).
        """

        operations = self._operations_or_blocked()
        extra = operation_credentials(self.method, operations)
        profile = self.record.data.get("credential_profile")
        try:
            inner = prepare_delivery(
                self.skill, self.method, run_id=self.run_id, store=self.s.store,
                workspace_root=self.s.workspace.root, environ=self.s.environ,
                egress=self.recorded_egress,
                taint=self.sanitizer.taint, profile=profile if isinstance(profile, str) else None,
                request_secrets=self.request_secrets, route=self.s.egress_route,
                extra_credentials=extra,
            )  # fmt: skip
            # an MCP connector's server credential, resolved now as an HTTP connector's is
            mcp_credentials(
                self.method, operations, self.s.workspace, self.s.environ, self.sanitizer.taint
            )
            if self.directive_run():  # a directive's http_request names aliases
                inner = with_aliases(
                    inner, skill=self.skill.package.name, workspace_root=self.s.workspace.root,
                    environ=self.s.environ, host_secrets=self.request_secrets,
                    taint=self.sanitizer.taint,
                )  # fmt: skip
        except NeedsCredential:
            raise
        except (CredentialError, ConfigError) as exc:
            raise Blocked(exc.code, exc.message, "credential_unavailable") from exc
        return with_receipts_seam(inner, self.s)

    def directive_run(self) -> bool:
        """Whether this is a directive's run (its ``http.request`` may name credential aliases;
        its file changes are confined). Resolved once per driver: each resolution is a path walk
        with an ``lstat`` per component, and a driver asked up to three times per call."""
        if self.directive is None:
            from proctor.runtime.directives import is_directive_run

            self.directive = is_directive_run(self.record.data, self.s.workspace.state_dir)
        return self.directive

    def confined(self) -> bool:
        """Whether the run's file changes are confined (:func:`~proctor.runtime.directives.
        confined_run`, its directive test answered once per driver)."""
        return bool(self.record.data.get("writable_dirs")) or self.directive_run()

    # -- the step loop------------------------------------------------------------------------

    def governor(self) -> Governor:
        """The run's governor, counting on from the calls already recorded."""
        if self._governor is not None:
            return self._governor

        s = self.s
        try:
            policies, guards, unguarded = self.start_policies or s.policy()
            self.start_policies = None
            limit = max_receipts_from_env(s.environ)
            wb = write_budget(s.environ)
        except (PolicyLoadError, ConfigError) as exc:
            raise Blocked(exc.code, exc.message, "policy_refused") from exc
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
        # here would make every call of a long turn cost as much as the run so far. A run its
        # start created under this driver has none yet: its calls are recorded through this
        # governor (built once, here) and its steps settle after it, and no other driver
        # writes the run while this one holds the lease its start took (its epoch fences them)
        counts = RunCounts(0, 0, 0) if self.fresh else s.store.run_counts(self.run_id)

        # one budget for the tree: a child is handed its root's (its start already reserved
        # its own receipts there); what earlier drivers of this run admitted is counted on it
        stated = self.authority.max_receipts  # the run's own limit narrows the host's
        if stated is not None:
            limit = min(limit, stated)
        if self.receipts is None:
            self.receipts = ReceiptBudget(limit)
        budget = self.receipts
        if not self.receipts_counted:
            earlier = int(self.record.data.get("child_receipts") or 0)  # sealed children's
            budget.count(RUN_RECEIPTS + counts.steps + counts.calls + earlier)
            self.receipts_counted = True
        extra = package_authority_files(self.skill, s.workspace.root)
        # the run's own package is authority, and proctor's state is where the session keeps it
        workspace = s.workspace.governing(
            extra_authority=extra, environ=s.environ, real_root=self.real_root
        )
        try:
            lifted = workspace.allow_write
        except ConfigError as exc:
            raise Blocked(exc.code, exc.message, "policy_refused") from exc
        if lifted:
            s.audit.emit(
                "containment_narrowed",
                run_id=self.run_id,
                step_index=None,
                allow_write=sorted(lifted),
                reason="proctor.toml [containment] allow_write lets runs write these tool "
                "configuration paths",
            )
        unreached = workspace
        workspace = run_workspace(workspace, self.authority, self.record.data)
        scopes = {}
        for step in self.method.steps:
            narrowed = self.step_authority(step)
            if narrowed != self.authority:
                # reach: workspace on a step of a reach: inputs run reaches no input's root
                scopes[step.id] = (narrowed, workspace if narrowed.reach == "inputs" else unreached)

        try:  # calls.skills: one tool per method of each skill a turn may call (a child run)
            tools: MutableMapping[str, Tool] = s.tools.copy()
            _add(tools, skill_tools(self, list(self.method.steps)))
        except ProctorError as exc:
            raise Blocked(exc.code, exc.message, "admission_refused") from exc
        _add(tools, self._operations_or_blocked())

        _add(tools, unreadable_upstream_tools(self.method, tools, s.workspace, s.environ))
        if self.confined():
            # a property of the run, not of the session class that drives it now
            tools = confined_tools(tools, workspace)
        table: Mapping[str, Tool] = tools
        if s.process_route is not None:  # proctor test's providers.processes: no process starts
            from proctor.runtime.engine.stand_ins import stand_in_processes

            table = stand_in_processes(tools, s.process_route)
        governor = Governor(
            run_id=self.run_id,
            workspace=workspace,
            store=s.store,
            tools=table,
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
            step_scopes=scopes,
            retain=bool(self.record.data.get("retain")),
        )
        governor.resume_from(counts.admitted, fresh=self.fresh)
        self._governor, self._built_counts = governor, counts
        return governor

    def step_authority(self, step: Any) -> Authority:
        """What applies to ``step``: the run's authority (its host's, narrowed by the method)
        narrowed again by the step's own ``effects`` and ``reach``; never wider."""
        if step.effects is None and step.reach is None:
            return self.authority
        return narrow(self.authority, effects=step.effects, reach=step.reach)

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

        # A bundle a crashed driver left half-applied is rolled back before any claim of it
        # is reconciled (its files are then at their before-images, and it is sent again).
        # The root's driver does it for its whole tree: a child's siblings may be applying one.
        # A run its start created just now has no claim yet, and the start recovered.
        if self.depth == 0 and not self.recovered:
            recover_open_bundles(s)
        refused = self._start_refusal()
        if refused is not None:
            return self.seal("blocked", refused[0], None, refused[1])
        try:
            self._built_counts = None
            governor = self.governor()
        except Blocked as blocked:
            refusal = Refusal(code=blocked.code, message=self.sanitizer.text(blocked.message))
            return self.seal("blocked", blocked.seal_reason, None, refusal)
        inputs = dict(self.record.data.get("inputs") or {})
        # counts the governor's build read a moment ago still hold: nothing settled since
        counts, self._built_counts = self._built_counts, None
        outputs, settled, first = self._settled(counts)
        short = self._receipts_short(governor, settled)
        if short is not None:
            return self.seal("blocked", "budget_exceeded", None, short)
        for index, step in enumerate(self.method.steps[first:], first):
            done = settled.get(step.id)
            if done is not None:
                if done.get("outcome") != "completed":
                    recorded = done.get("refusal")
                    return self.seal(
                        done.get("run_outcome", "failed"),
                        done.get("run_seal_reason", "child_failed"),
                        None,
                        None if recorded is None else Refusal.model_validate(recorded),
                    )
                outputs[step.id] = done.get("output")
                continue
            if self._stopping():
                raise self._interrupt()
            deadline = self.authority.deadline_at()
            if deadline is not None and datetime.now(UTC) >= deadline:
                # the authority's deadline: no step starts past it, the run stops failed
                message = (
                    f"the run's deadline ({self.authority.deadline}) passed; no step ran after it"
                )
                s.audit.emit(
                    "run_deadline_passed",
                    run_id=self.run_id,
                    step_index=index,
                    deadline=self.authority.deadline,
                )
                refusal = Refusal(code="run_deadline_passed", message=message, step=step.id)
                return self.seal("failed", "deadline_passed", None, refusal)
            s._renew(self.run_id, before_step=True)
            kill_point("step.start")
            started = s.clock()
            try:
                got = self._step(governor, index, step, inputs, outputs)
            except (CommandStopped, RunInterrupted) as exc:
                raise self._interrupt() from exc
            if isinstance(got, StepPause):
                return self.pause(got.requests)
            if got.outcome == "completed" and step.result_as is not None:
                got.output = {step.result_as: got.output}  # the step's one output (result_as)
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
                "started_at": iso_text(started),
                "ended_at": iso_text(s.clock()),
            }
            s.store.settle_step(self.run_id, step.id, body, used=got.used)
            kill_point("step.settled")
            if got.outcome != "completed":
                return self.seal(got.run_outcome, got.run_seal_reason, None, got.refusal)
            outputs[step.id] = got.output
        try:
            value = self._result(outputs)
        except ProctorError as exc:
            return self.seal(
                "failed", "tool_failed", None, Refusal(code=exc.code, message=exc.message)
            )
        return self.seal("completed", None, value, None)

    def _settled(self, counts: RunCounts | None) -> tuple[dict[str, Any], Mapping[str, Any], int]:
        """The outputs of the steps settled before this drive, the records the step loop looks
        at, and the index it starts from.

        Steps settle in the method's order, each once, and none after one that did not
        complete (the loop below is the only writer): the settled steps are the method's first
        ``n`` (the store's counter). Only the last of them is read; the loop starts there
        (it seals the run if that step did not complete) and an earlier step's output is read
        by its key when a step names it (:class:`_Outputs`), so a run resumed at its 10,000th
        step reads no more records than at its 10th. A count that does not fit (more than the
        method's steps, the last one not settled) reads every record, as before.
        """
        store, steps = self.s.store, self.method.steps
        n = (store.run_counts(self.run_id) if counts is None else counts).steps
        if n == 0:
            return {}, {}, 0
        last = store.step_record(self.run_id, steps[n - 1].id) if n <= len(steps) else None
        if last is None:
            every = store.step_records(self.run_id)
            return {}, every, 0
        outputs = _Outputs(store, self.run_id, [step.id for step in steps[: n - 1]])
        return outputs, {steps[n - 1].id: last}, n - 1

    def _receipts_short(self, governor: Governor, settled: Mapping[str, Any]) -> Refusal | None:
        """``receipt_budget_exceeded`` when the steps still to run need more receipts than the
        tree's budget has left, counted before any of them runs: one for each step, and one
        more for the call each tool, operation and worker step makes (agent, ask and skill
        steps may need more; they are counted as their calls and children are admitted)."""
        budget = governor.receipt_budget
        if budget is None or settled:  # counted once, before the first step settles
            return None
        steps = self.method.steps
        one = (AgentStep, AskStep, SkillStep, WaitStep)
        need = sum(1 if isinstance(step, one) else 2 for step in steps)
        if need <= budget.remaining:
            return None
        message = (
            f"this run's {len(steps)} steps need at least {need} receipts and its tree has"
            f" {budget.remaining} of its {budget.limit} left (max_receipts); no step was run"
        )
        return Refusal(code="receipt_budget_exceeded", message=message)

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
        if isinstance(step, ProcessStep):
            from proctor.runtime.engine.process_tools import process_step

            return process_step(self, governor, index, step, inputs, outputs)
        if isinstance(step, WaitStep):
            from proctor.runtime.engine.waits import wait_step

            return wait_step(self, step, inputs, outputs)
        if step.tool in ("store.events.append", "store.key.put"):
            from proctor.runtime.engine.operations import store_step

            return store_step(self, governor, index, step, inputs, outputs)
        return run_kinds.tool_step(self, governor, index, step, inputs, outputs)

    # -- pausing and sealing (.pausing), turn calls (.turn_calls) ---------------------------

    def open_request(self, address: str, body: dict[str, Any]) -> RequestRecord:
        """Record a request (see :func:`.pausing.open_request`)."""
        return pausing.open_request(self, address, body)

    def pause(self, requests: list[RequestRecord]) -> RunEnvelope:
        """Pause the run on ``requests`` (see :func:`.pausing.pause`)."""
        return pausing.pause(self, requests)

    def seal(
        self, outcome: str, seal_reason: str | None, result: Any, refusal: Refusal | None
    ) -> RunEnvelope:
        """Seal the run (see :func:`.pausing.seal`)."""
        return pausing.seal(self, outcome, seal_reason, result, refusal)

    def seal_reused(self, result: Any) -> RunEnvelope:
        """Seal the run with a reused run's result (see :func:`.pausing.seal_reused`)."""
        return pausing.seal_reused(self, result)

    def turn_call_spec(self, turn: dict[str, Any], spec: CallSpec) -> CallOutcome:
        """One call of a managed turn (see :func:`.turn_calls.turn_call_spec`)."""
        return turn_calls.turn_call_spec(self, turn, spec)

    def turn_call(
        self,
        turn: dict[str, Any],
        tool: str,
        args: dict[str, Any],
        call_id: str,
        reason: str,
        cancel: threading.Event | None = None,
    ) -> CallOutcome:
        """One host-side call of a paused turn (see :func:`.turn_calls.turn_call`)."""
        return turn_calls.turn_call(self, turn, tool, args, call_id, reason, cancel)


_AUTHORITIES: dict[tuple[str, Any, Any], tuple[Authority, Authority]] = {}
_AUTHORITIES_LIMIT = 64
_AUTHORITIES_LOCK = threading.Lock()
# the document's JSON text (sorted keys), from one C encoder built once: JSONEncoder.encode
# builds a new one per call, which costs more than encoding the document
_KEY = compact_encoder(sort_keys=True)


def _add(tools: MutableMapping[str, Tool], more: Mapping[str, Tool]) -> None:
    """``tools.update(more)``, not asked when ``more`` is empty (most runs' are: a table's
    update is a MutableMapping's, in Python, with an ABC check of ``more``)."""
    if more:
        tools.update(more)


def _authorities(doc: Any, method: Method) -> tuple[Authority, Authority]:
    """The run's recorded authority ``doc`` parsed, and narrowed by ``method``'s ``effects``
    and ``reach``: a pure function of the document's JSON text and those two (every
    :class:`Authority` is frozen), so the pair is kept by them (a driver is built per turn
    call, and the parse is a few percent of a call). A refused document is never kept."""
    try:
        key = (_KEY(doc), method.effects, method.reach)
    except (TypeError, ValueError, RecursionError):  # not JSON: parsed (and refused) as ever
        host = parse_authority(doc, recorded=True)
        return host, narrow(host, effects=method.effects, reach=method.reach)
    kept = _AUTHORITIES.get(key)
    if kept is not None:
        return kept
    host = parse_authority(doc, recorded=True)
    kept = host, narrow(host, effects=method.effects, reach=method.reach)
    with _AUTHORITIES_LOCK:
        if len(_AUTHORITIES) >= _AUTHORITIES_LIMIT:
            _AUTHORITIES.pop(next(iter(_AUTHORITIES)), None)
        _AUTHORITIES[key] = kept
    return kept


class _Outputs(dict[str, Any]):
    """The outputs of steps settled before this drive, each read from the store the first time
    a step names it (then kept); the outputs of steps settled since are set as they settle.
    Only looked up (``in``, ``[]``, ``get``), never listed."""

    def __init__(self, store: RunStore, run_id: str, earlier: list[str]) -> None:
        super().__init__()
        self._store, self._run_id, self._earlier = store, run_id, frozenset(earlier)

    def __missing__(self, step_id: str) -> Any:
        if step_id not in self._earlier:
            raise KeyError(step_id)
        record = self._store.step_record(self._run_id, step_id)
        if record is None:  # counted as settled, so never: a missing output, as before
            raise KeyError(step_id)
        value = self[step_id] = record.get("output")
        return value

    def __contains__(self, step_id: object) -> bool:
        return dict.__contains__(self, step_id) or step_id in self._earlier

    def get(self, step_id: str, default: Any = None) -> Any:
        return self[step_id] if step_id in self else default  # noqa: SIM401 - reads it


def with_receipts_seam(inner: Deliver, session: Any) -> Deliver:
    """``inner``, plus the run's own receipt store and trusted keys for ``receipts.*`` tools
    and ``receipt.read`` (and nothing for any other tool)."""

    def deliver(spec: Any, tool: Any) -> dict[str, Any]:
        out = inner(spec, tool)
        if tool.name.startswith("receipts.") or tool.name == "receipt.read":
            from proctor.runtime.home.keys import trusted_local_keys
            from proctor.runtime.tools.receipts_tool import RECEIPTS_EXTRA

            keys = [session.signer.public_key, *trusted_local_keys(session.environ)]
            out[RECEIPTS_EXTRA] = {"load": session.receipts.get, "keys": keys}
        return out

    return deliver

"""The run driver: resolve a skill, prepare its run, drive its steps, seal it.

A :class:`Session` opens a workspace for running (run store, audit log, tools, guards, the
signing key). :meth:`Session.run` executes one method and returns the ``proctor.run.v1``
envelope; receipts are written before the envelope is returned, so its ``receipt_id`` always
resolves.

What can go wrong and where it shows:

- the reference or a package file is invalid: raised (no run exists yet; exit code 2);
- once a skill and method resolve, a blocked preparation (inputs that fail the schema, a step
  kind this version cannot run, a policy set that refuses to load) seals a ``blocked`` run with
  its receipt, never echoing the rejected value;
- a refused call blocks its step and the run; a tool that fails fails them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import Refusal, RunEnvelope, TraceEntry
from proctor.contracts.skill import Method, ToolStep
from proctor.errors import ConfigError, ParseError, PolicyLoadError, ProctorError, UsageError
from proctor.parser.refs import resolve
from proctor.receipts.canonical import digest
from proctor.runtime.admission import Authority, CallOutcome, CallSpec, Governor
from proctor.runtime.skills import LoadedSkill, load_skill, package_authority_files
from proctor.runtime.store.base import RunRecord

if TYPE_CHECKING:
    from proctor.policy import GuardRegistry, PolicySet, Unrestricted
    from proctor.receipts.signing import Signer
    from proctor.runtime.audit import AuditLog
    from proctor.runtime.receipt_store import ReceiptStore
    from proctor.runtime.store.sqlite import SQLiteRunStore
    from proctor.runtime.tools.base import Tool
    from proctor.runtime.workspace import Workspace

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class _Blocked(Exception):
    """Preparation refused the run: it seals ``blocked`` with this code and message."""

    def __init__(self, code: str, message: str, seal_reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.seal_reason = seal_reason


@dataclass
class _StepResult:
    step_id: str
    started_at: datetime
    outcome: str = "completed"
    output: Any = None
    calls: list[CallOutcome] = field(default_factory=list)
    refusal: Refusal | None = None
    seal_reason: str | None = None
    ended_at: datetime | None = None


class Session:
    """A workspace opened for running skills.

    Args:
        workspace: the workspace.
        environ: the environment to read ``PROCTOR_*`` settings from (default ``os.environ``).
        clock: injected clock (receipt times; a fixed clock gives byte-identical receipts).
        signer: the signing key (default: the home's key, created on first use).
        run_ids: a factory of run ids (default: random UUID4 hex).
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Clock = _utc_now,
        signer: Signer | None = None,
        run_ids: Callable[[], str] | None = None,
    ) -> None:
        self.workspace = workspace
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.clock = clock
        self._signer = signer
        self._run_ids = run_ids or (lambda: uuid.uuid4().hex)
        self._store: SQLiteRunStore | None = None
        self._audit: AuditLog | None = None
        self._receipts: ReceiptStore | None = None
        self._tools: dict[str, Tool] | None = None
        self._policy: tuple[PolicySet | Unrestricted, GuardRegistry, bool] | None = None

    # -- parts, opened on first use --------------------------------------------------------

    @property
    def store(self) -> SQLiteRunStore:
        """The run store (``PROCTOR_DATABASE_PATH`` or ``.proctor/runs.sqlite``)."""
        if self._store is None:
            from proctor.runtime.store.sqlite import SQLiteRunStore

            named = self.environ.get("PROCTOR_DATABASE_PATH")
            path = Path(named) if named else self.workspace.state_dir / "runs.sqlite"
            self._store = SQLiteRunStore(path)
        return self._store

    @property
    def audit(self) -> AuditLog:
        """The audit log (``PROCTOR_AUDIT_LOG`` or ``.proctor/audit.jsonl``)."""
        if self._audit is None:
            from proctor.runtime.audit import AuditLog, audit_path

            self._audit = AuditLog(audit_path(self.workspace.root, self.environ))
        return self._audit

    @property
    def receipts(self) -> ReceiptStore:
        """The receipt store (``PROCTOR_RECEIPT_DIR`` or ``.proctor/receipts``)."""
        if self._receipts is None:
            from proctor.runtime.receipt_store import ReceiptStore

            named = self.environ.get("PROCTOR_RECEIPT_DIR")
            folder = Path(named) if named else self.workspace.state_dir / "receipts"
            self._receipts = ReceiptStore(folder)
        return self._receipts

    @property
    def signer(self) -> Signer:
        """The signing key."""
        if self._signer is None:
            from proctor.runtime.keys import load_signer

            self._signer = load_signer(self.environ).signer
        return self._signer

    @property
    def tools(self) -> dict[str, Tool]:
        """Every native tool by name."""
        if self._tools is None:
            from proctor.runtime.tools.registry import native_tools

            self._tools = dict(native_tools())
        return self._tools

    def policy(self) -> tuple[PolicySet | Unrestricted, GuardRegistry, bool]:
        """The loaded policy set (or UNRESTRICTED under the audited opt-out), the guard
        registry, and whether the run goes unguarded.

        Raises:
            PolicyLoadError: a policy file or rule is invalid.
            ConfigError: bad profile, drift from the shipped rules, or zero enforceable rules.
        """
        if self._policy is None:
            from proctor.policy import (
                UNRESTRICTED,
                GuardRegistry,
                allow_unguarded,
                check_profile,
                load_policy_set,
                policy_profile,
            )
            from proctor.policy.user_guards import load_user_guards

            profile = policy_profile(self.environ)
            registry = GuardRegistry.with_shipped()
            load_user_guards(self.workspace.root, registry)
            policy_set = load_policy_set(self.workspace.root, registry, self.tools)
            check_profile(policy_set, profile)
            unguarded = allow_unguarded(policy_set, self.environ)
            self._policy = (UNRESTRICTED if unguarded else policy_set, registry, unguarded)
        return self._policy

    def close(self) -> None:
        """Release the run store and the audit log."""
        if self._store is not None:
            self._store.close()
        if self._audit is not None:
            self._audit.close()

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        ref: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        cli_inputs: list[str] | None = None,
        authority: Authority | None = None,
        cwd: Path | None = None,
    ) -> RunEnvelope:
        """Run one method of a skill to its seal.

        Args:
            ref: ``PATH[#METHOD]`` or a catalog name.
            inputs: inputs as one JSON object (``--inputs``).
            cli_inputs: ``name=value`` pairs typed by the method's schema (``-i``); they
                override keys of ``inputs``.
            authority: what the host grants; default ``effects: allow`` (recorded as unset).
            cwd: where relative references start (default: the process's current folder).

        Raises:
            UsageError / ParseError: the reference or the package is invalid (no run exists).
            StoreError: the run store failed.
        """
        skill = load_skill(ref, cwd=cwd or Path.cwd(), workspace_root=self.workspace.root)
        if skill.package.profile is None:
            raise UsageError(
                f"skill {skill.package.name} has no run.yaml, so it has no method to run",
                code="no_methods",
            )
        from proctor.parser.skill import select_method

        method_name, method = select_method(skill.package.profile, skill.method)
        host_set = authority is not None
        authority = authority or Authority()
        run = _Run(self, skill, method_name, method, authority, host_set)
        return run.execute(inputs, cli_inputs)


class _Run:
    """One run's state while it is driven."""

    def __init__(
        self,
        session: Session,
        skill: LoadedSkill,
        method_name: str,
        method: Method,
        authority: Authority,
        host_set: bool,
    ) -> None:
        from proctor.runtime.sanitize import Sanitizer

        self.s = session
        self.skill = skill
        self.method_name = method_name
        self.method = method
        self.authority = authority
        self.host_set = host_set
        self.run_id = session._run_ids()
        self.sanitizer = Sanitizer()
        self.started_at = session.clock()
        self.steps: list[_StepResult] = []
        self.policy_digest: str | None = None
        self.inputs_digest: str | None = None

    @property
    def authority_json(self) -> dict[str, Any]:
        return {
            "effects": self.authority.effects,
            "max_calls": self.authority.max_calls,
            "set_by": "host" if self.host_set else "default (no host set an authority)",
        }

    def execute(
        self, inputs: Mapping[str, Any] | None, cli_inputs: list[str] | None
    ) -> RunEnvelope:
        s = self.s
        recovered = self._recover()
        s.store.create_run(
            RunRecord(
                run_id=self.run_id,
                skill=self.skill.package.name,
                method=self.method_name,
                data={
                    "package": self.skill.label,
                    "package_digest": self.skill.package_digest,
                    "authority": self.authority_json,
                },
            )
        )
        s.audit.emit(
            "run_started",
            run_id=self.run_id,
            step_index=None,
            skill=self.skill.package.name,
            method=self.method_name,
            package_digest=self.skill.package_digest,
            authority=self.authority_json,
            recovered_bundles=recovered,
        )
        try:
            governor, values = self._prepare(inputs, cli_inputs)
        except _Blocked as blocked:
            refusal = Refusal(code=blocked.code, message=self.sanitizer.text(blocked.message))
            return self._seal("blocked", blocked.seal_reason, None, refusal)
        return self._drive(governor, values)

    def _recover(self) -> list[str]:
        """Roll back any file bundle a crashed driver left half-applied."""
        from proctor.runtime.tools.fs_bundle import recover_bundles

        return recover_bundles(self.s.workspace, self.s.store)

    def _prepare(
        self, inputs: Mapping[str, Any] | None, cli_inputs: list[str] | None
    ) -> tuple[Governor, dict[str, Any]]:
        from proctor.parser.inputs import coerce_cli_inputs, validate_inputs
        from proctor.runtime.limits import max_receipts_from_env

        s = self.s
        for step in self.method.steps:
            if not isinstance(step, ToolStep):
                kind = type(step).__name__.removesuffix("Step").lower()
                raise _Blocked(
                    "step_kind_unsupported",
                    f"step '{step.id}' is a {kind} step, which this version of proctor cannot"
                    " run yet; no step of the run was executed",
                    "admission_refused",
                )
        try:
            values: dict[str, Any] = dict(inputs or {})
            if cli_inputs:
                values.update(coerce_cli_inputs(cli_inputs, self.method.inputs))
            validate_inputs(values, self.method.inputs)
            self.inputs_digest = digest(values)
        except (UsageError, ParseError) as exc:
            raise _Blocked(exc.code, exc.message, "inputs_invalid") from exc
        try:
            policies, guards, unguarded = s.policy()
            budget = _receipt_budget(max_receipts_from_env(s.environ))
        except (PolicyLoadError, ConfigError) as exc:
            raise _Blocked(exc.code, exc.message, "policy_refused") from exc
        if unguarded:
            s.audit.emit(
                "unguarded_mode_enabled",
                run_id=self.run_id,
                step_index=None,
                reason="no enforceable policy rule is loaded and PROCTOR_ALLOW_NO_POLICIES=1",
            )
            self.policy_digest = None
        else:
            self.policy_digest = getattr(policies, "digest", None)
        from proctor.policy import write_budget

        try:
            wb = write_budget(s.environ)
        except ConfigError as exc:
            raise _Blocked(exc.code, exc.message, "policy_refused") from exc
        # The run's own package files grant authority too: never written by the run.
        extra = package_authority_files(self.skill, s.workspace.root)
        workspace = s.workspace
        if extra - workspace.authority_files:
            from proctor.runtime.workspace import Workspace

            workspace = Workspace(workspace.root, extra_authority=extra)
        governor = Governor(
            run_id=self.run_id,
            workspace=workspace,
            store=s.store,
            tools=s.tools,
            policies=policies,
            guards=guards,
            audit=s.audit,
            sanitizer=self.sanitizer,
            authority=self.authority,
            receipt_budget=budget,
            directive_id=self.skill.package.name,
            write_budget=wb,
            clock=s.clock,
        )
        return governor, values

    def _drive(self, governor: Governor, inputs: dict[str, Any]) -> RunEnvelope:
        outputs: dict[str, Any] = {}
        for index, step in enumerate(self.method.steps):
            assert isinstance(step, ToolStep)
            result = _StepResult(step.id, self.s.clock())
            self.steps.append(result)
            try:
                if governor.receipt_budget is not None:
                    governor.receipt_budget.reserve(1)  # the step's own receipt
                args = resolve(step.inputs, inputs, outputs)
                key = None
                if step.idempotency_key is not None:
                    key = str(resolve(step.idempotency_key, inputs, outputs))
            except ProctorError as exc:
                result.outcome, result.seal_reason = "failed", "tool_failed"
                result.refusal = Refusal(code=exc.code, message=exc.message, step=step.id)
                result.ended_at = self.s.clock()
                return self._seal("failed", "child_failed", None, result.refusal)
            call = governor.call(
                CallSpec(
                    tool=step.tool,
                    args=args if isinstance(args, dict) else {},
                    allowance=frozenset({step.tool}),
                    step_id=step.id,
                    step_index=index,
                    reason=step.reason or "",
                    idempotency_key=key,
                )
            )
            result.calls.append(call)
            result.ended_at = self.s.clock()
            if not call.ok:
                error = call.error or {}
                refused = call.status == "refused"
                result.outcome = "blocked" if refused else "failed"
                result.seal_reason = _seal_reason_of(call)
                result.refusal = Refusal(
                    code=str(error.get("code", "failed")),
                    message=str(error.get("message", "the call failed")),
                    step=step.id,
                    tool=step.tool,
                    rule_id=(error.get("details") or {}).get("rule_id"),
                )
                return self._seal(result.outcome, "child_failed", None, result.refusal)
            result.output = call.result
            outputs[step.id] = call.result
        try:
            value = self._result(outputs)
        except ProctorError as exc:
            refusal = Refusal(code=exc.code, message=exc.message)
            return self._seal("failed", "tool_failed", None, refusal)
        return self._seal("completed", None, value, None)

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

    # -- sealing ---------------------------------------------------------------------------

    def _seal(
        self,
        outcome: str,
        seal_reason: str | None,
        result: Any,
        refusal: Refusal | None,
    ) -> RunEnvelope:
        s = self.s
        receipt_id = self._write_receipts(outcome, seal_reason, result)
        trace = [
            TraceEntry(
                step=step.step_id,
                tool=call.tool,
                call_id=call.call_id,
                outcome=call.status,
                code=call.code,
                message=None if call.error is None else str(call.error.get("message")),
                warnings=[
                    f"{v['rule_id']}: {v['message']}"
                    for v in call.verdicts
                    if v.get("effect") == "warned"
                ],
            )
            for step in self.steps
            for call in step.calls
        ]
        envelope = RunEnvelope(
            status="sealed",
            outcome=outcome,  # type: ignore[arg-type]
            run_id=self.run_id,
            receipt_id=receipt_id,
            skill=self.skill.package.name,
            method=self.method_name,
            result=result,
            refusal=refusal,
            trace=trace,
            notes=[] if self.host_set else ["no host set an authority: effects allow"],
        )
        doc = envelope.to_json()
        doc, _ = self.sanitizer.value(doc)
        s.store.update_run(
            self.run_id,
            status="sealed",
            outcome=outcome,
            receipt_id=receipt_id,
            data={"envelope": doc, "inputs_digest": self.inputs_digest},
        )
        s.audit.emit(
            "run_sealed",
            run_id=self.run_id,
            step_index=None,
            outcome=outcome,
            seal_reason=seal_reason,
            receipt_id=receipt_id,
            code=None if refusal is None else refusal.code,
        )
        return RunEnvelope.model_validate(doc)

    def _write_receipts(self, outcome: str, seal_reason: str | None, result: Any) -> str:
        from proctor.receipts.model import Subject, Verdict
        from proctor.receipts.writer import ReceiptWriter

        s = self.s
        writer = ReceiptWriter(s.receipts, s.signer, clock=s.clock)
        name, pkg = self.skill.package.name, self.skill.package_digest
        step_refs = []
        for step in self.steps:
            call_refs = []
            for call in step.calls:
                verdicts = [
                    Verdict(v["rule_id"], v["code"] or "denied", _enf(v))
                    for v in call.verdicts
                    if v.get("effect") in ("refused", "warned")
                ]
                call_refs.append(
                    writer.call(
                        Subject(name, pkg, self.method_name, step.step_id, call.tool),
                        outcome=_receipt_outcome(call.status),
                        seal_reason=None if call.ok else _seal_reason_of(call),
                        started_at=call.started_at or step.started_at,
                        ended_at=call.ended_at,
                        inputs_digest=call.args_digest or None,
                        outputs_digest=call.outputs_digest,
                        verdicts=verdicts,
                    )
                )
            step_refs.append(
                writer.step(
                    Subject(name, pkg, self.method_name, step.step_id),
                    outcome=step.outcome,
                    seal_reason=step.seal_reason,
                    started_at=step.started_at,
                    ended_at=step.ended_at,
                    children=call_refs,
                )
            )
        outputs_digest = digest(result) if outcome == "completed" else None
        root = writer.run(
            Subject(name, pkg, self.method_name),
            outcome=outcome,
            seal_reason=seal_reason,
            started_at=self.started_at,
            inputs_digest=self.inputs_digest,
            outputs_digest=outputs_digest,
            authority_digest=digest(self.authority_json),
            policy_digest=self.policy_digest,
            children=step_refs,
        )
        return root.receipt_id


def _enf(verdict: dict[str, Any]) -> str:
    return "block" if verdict.get("effect") == "refused" else "warn"


def _receipt_outcome(status: str) -> str:
    return {"completed": "completed", "failed": "failed", "refused": "blocked"}[status]


def _seal_reason_of(call: CallOutcome) -> str:
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


def _receipt_budget(limit: int) -> Any:
    from proctor.core.budget import ReceiptBudget

    # The run, and one step receipt per step, are reserved as the run goes; calls reserve one
    # each in admission. Reserve the run's own receipt up front.
    budget = ReceiptBudget(limit)
    budget.reserve(1)
    return budget


def narrow_outputs(value: Any, schema: dict[str, Any]) -> Any:
    """Keep only the declared properties of an object result, then validate it.

    Raises:
        ProctorError: code ``outputs_invalid`` naming the failing location.
    """
    from proctor.parser.inputs import validate_inputs

    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        if schema.get("additionalProperties", False) is not True:
            value = {k: v for k, v in value.items() if k in schema["properties"]}
    try:
        validate_inputs(value, schema)
    except UsageError as exc:
        raise ProctorError(
            exc.message.replace("inputs", "outputs", 1), code="outputs_invalid"
        ) from exc
    return value

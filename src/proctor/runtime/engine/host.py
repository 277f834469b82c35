"""What the run engine's parts share: the host a run is driven by, and what a step became.

The session (:mod:`.session`) builds a :class:`~proctor.runtime.engine.drive.RunDriver` for
each run it drives; the driver, the step kinds (:mod:`.kinds`) and sealing (:mod:`.sealing`)
use the session only through :class:`RunHost`, and the step kinds use the driver only through
:class:`StepRunner`. Both are protocols here, below every module that implements them, so the
engine's modules import downwards only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from proctor.contracts.envelope import Refusal
from proctor.contracts.values import dataclass, field
from proctor.errors import ProctorError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from proctor.contracts.envelope import RunEnvelope
    from proctor.contracts.skill import Method
    from proctor.core.authority import Authority
    from proctor.core.budget import ReceiptBudget
    from proctor.core.spend import SpendLedger
    from proctor.policy import GuardRegistry, PolicySet, Unrestricted
    from proctor.receipts.signing import Signer
    from proctor.runtime.admission.governor import CallOutcome, CallSpec, Governor
    from proctor.runtime.boundary.egress import EgressRoute
    from proctor.runtime.boundary.sandbox import SandboxMode
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.stand_ins import ProcessRoute
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.records.receipts import ReceiptStore
    from proctor.runtime.records.runs import RequestRecord, RunRecord, RunStore
    from proctor.runtime.skills import LoadedSkill
    from proctor.runtime.tools.base import Tool
    from proctor.runtime.tools.registry import ToolTable

__all__ = [
    "AgentDriver",
    "ChildCall",
    "Clock",
    "RunHost",
    "RunInterrupted",
    "StepDone",
    "StepPause",
    "StepRunner",
    "narrow_outputs",
    "step_failed",
]

Clock = Callable[[], datetime]


class RunInterrupted(ProctorError):
    """The driver was asked to stop: no new step started; the run waits for its next driver.

    ``proctor run``/``resume`` exit 143 (SIGTERM) or 130 (SIGINT) on it.
    """

    code = "run_stopped"
    exit_code = 143


class AgentDriver(Protocol):
    """A managed agent: works one turn, making every call through ``call``.

    ``turn`` is the request body of kind ``agent_turn`` (``address``, ``instructions``,
    ``inputs``, ``allowance``, ``output_schema``, ``ask``). ``call`` admits one
    :class:`~proctor.runtime.admission.governor.CallSpec` through the run's governor with the
    turn's allowance (the spec's own allowance and step are ignored). The return value is the
    turn's output, checked against the step's ``output`` schema.

    An agent whose ``prices`` (the provider's declared ``cost``) are not empty is also handed
    ``meter=`` (:class:`~proctor.runtime.engine.metering.ModelMeter`), on which it reserves each
    model request before sending it; one with none is refused ``price_unknown`` under a spend
    limit.
    """

    def drive_turn(
        self, turn: dict[str, Any], call: Callable[[CallSpec], CallOutcome]
    ) -> dict[str, Any]:
        """Work one turn and return its output.

        Raises:
            ProctorError: the turn could not be worked (the step fails with its code).
        """
        ...


@dataclass(frozen=True)
class ChildCall:
    """One child run a ``skill:`` step (or a turn's skill call) asks its session to drive.

    ``run_id`` is derived from the parent's run, step and position, so a driver that crashed
    finds the child it started. ``base`` is where a relative ``ref`` starts (the parent's
    package folder); ``authority`` is the parent's, already narrowed (the child's method
    narrows it further, never widens it); ``decisions`` are answers the root received for the
    child's requests, by the child's own address; ``serial`` tells the child to run its own
    fan-outs one at a time (it holds one of the tree's slots); ``close`` seals a paused child
    with that outcome instead of driving it.
    """

    run_id: str
    ref: str
    base: Path
    inputs: dict[str, Any]
    authority: dict[str, Any]
    depth: int
    stop: threading.Event | None = None
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    serial: bool = False
    close: str | None = None
    ledger: SpendLedger | None = None
    """The root's spend ledger: the whole tree spends from one limit."""
    receipts: ReceiptBudget | None = None
    """The root's receipt budget: the whole tree writes at most its limit of receipts."""
    parent_run_id: str | None = None
    """The run that starts the child: its record counts the child's receipts once it seals
    (the child's own record never names it)."""
    parent_step: str | None = None
    """The parent's step that starts the child, and its index in the parent's method: the
    child's ``run_started`` audit line names them so its trace hangs under that step."""
    parent_step_index: int | None = None
    parent_call_id: str | None = None
    """The parent's call that starts the child (a turn's skill call); ``None`` for a
    ``skill:`` step, whose children hang under the step itself."""
    reuse_max_age: int | None = None
    """``reuse: {max_age_seconds}``: an earlier sealed child with the same package digest,
    method and inputs, sealed at most this long ago, is reused instead of run."""


class RunHost(Protocol):
    """What a run's driver and its sealing use of the session that drives it."""

    workspace: Workspace
    environ: Mapping[str, str]
    clock: Clock
    agent_driver: AgentDriver | None
    egress_route: EgressRoute | None
    process_route: ProcessRoute | None
    stop_event: threading.Event
    sandbox_default: SandboxMode

    @property
    def store(self) -> RunStore: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def receipts(self) -> ReceiptStore: ...

    @property
    def signer(self) -> Signer: ...

    def load_key(self) -> Signer: ...

    @property
    def tools(self) -> ToolTable: ...

    def policy(
        self, real_root: str | None = ""
    ) -> tuple[PolicySet | Unrestricted, GuardRegistry, bool]: ...

    def _renew(self, run_id: str, *, before_step: bool = False) -> None: ...

    @property
    def holder(self) -> str: ...

    def _release_sealed(self, run_id: str) -> None: ...

    def drive_child(self, call: ChildCall) -> RunEnvelope:
        """Start (or go on with) one child run and drive it to its seal or its next pause."""
        ...


@dataclass
class StepDone:
    """A step that settles."""

    outcome: str
    output: Any = None
    refusal: Refusal | None = None
    seal_reason: str | None = None
    run_outcome: str = "completed"
    run_seal_reason: str | None = None
    used: list[str] = field(default_factory=list)
    already_done: str | None = None
    child_runs: list[dict[str, Any]] = field(default_factory=list)
    """The child runs a skill step committed (``run_id``, ``receipt_id``, ``size``, ``height``)."""
    spend_micro_usd: int | None = None
    """What the step's priced call actually cost (``None``: not a priced step)."""
    context_digests: list[str] = field(default_factory=list)
    """The SKILL.md digests an agent step was shown as context (``context.skills``)."""


@dataclass
class StepPause:
    """A step that waits on requests (an approval, an answer, an agent turn)."""

    requests: list[RequestRecord]


def step_failed(step_id: str, exc: ProctorError, tool: str | None = None) -> StepDone:
    """The settled form of a step that failed with ``exc``: it fails the run."""
    return StepDone(
        "failed",
        refusal=Refusal(code=exc.code, message=exc.message, step=step_id, tool=tool),
        seal_reason="tool_failed",
        run_outcome="failed",
        run_seal_reason="child_failed",
    )


class StepRunner(Protocol):
    """What a step kind (:mod:`.kinds`) uses of the run driving it."""

    s: RunHost
    run_id: str
    skill: LoadedSkill
    sanitizer: Sanitizer
    record: RunRecord
    method: Method
    authority: Authority
    stop: threading.Event | None
    serial: bool
    depth: int
    host_turn: bool
    """A host works the turn whose call runs now: a call may wait on a person (it answers
    pending and the run pauses); in a managed turn it cannot."""
    fresh: bool
    """This driver's start created the run (under its lease): no call of it is stored yet."""
    asked: bool
    """This driver recorded a request of the run (:func:`.pausing.open_request`)."""

    def governor(self) -> Governor:
        """The run's governor (built once per driver)."""
        ...

    def spend_ledger(self) -> SpendLedger:
        """The ledger this run's tree spends from (the root's)."""
        ...

    def step_authority(self, step: Any) -> Authority:
        """The run's authority narrowed by ``step``'s own ``effects`` and ``reach``."""
        ...

    def tree_receipts(self) -> ReceiptBudget:
        """The receipt budget this run's tree draws on (the root's)."""
        ...

    def open_request(self, address: str, body: dict[str, Any]) -> RequestRecord: ...

    def operation_tools(self) -> Mapping[str, Tool]: ...

    def directive_run(self) -> bool:
        """Whether the run is a directive's (decided once per driver)."""
        ...

    def turn_call_spec(self, turn: dict[str, Any], spec: CallSpec) -> CallOutcome: ...


def narrow_outputs(value: Any, schema: dict[str, Any]) -> Any:
    """Keep only the declared properties of an object result, then validate it.

    Raises:
        ProctorError: code ``outputs_invalid`` naming the failing location.
    """
    from proctor.parser.inputs import validate_inputs

    declared = isinstance(schema.get("properties"), dict)
    if isinstance(value, dict) and declared and schema.get("additionalProperties") is not True:
        value = {k: v for k, v in value.items() if k in schema["properties"]}
    try:
        validate_inputs(value, schema)
    except UsageError as exc:
        raise ProctorError(
            exc.message.replace("inputs", "outputs", 1), code="outputs_invalid"
        ) from exc
    return value


def run_refs(run: StepRunner) -> dict[str, Any]:
    """What a step's ``$run.`` references name: ``act``, the act the host stated when it
    started the run (recorded with it; ``None`` when it stated none)."""
    return {"act": run.record.data.get("act")}

"""Models of a skill package and its execution profile (``run.yaml``).

Every model is a strict frozen record (:mod:`proctor.contracts.strict`: no coercion, ``"1"`` is
not an int; unknown fields refused), so a held profile is the document as validated. Importing
them compiles no schema, which keeps ``proctor run``'s start short. Checks that need the whole
profile (references between steps, ``default_method`` naming a method) live in
:mod:`proctor.parser.skill`, which builds these models.

A step is one of several kinds, told apart by which key it carries: ``tool``, ``agent``,
``ask``, ``skill``, ``operation``, ``worker`` or ``wait``; a ``tool:`` that is a mapping
(``{command: ...}``, an inline process tool) is a :class:`ProcessStep`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from proctor.contracts.asking import ID_PATTERN, AskOption, AskQuestion, AskSpec, StepApproval
from proctor.contracts.strict import Choice, Record, Rule, field

__all__ = [
    "STEP_KINDS",
    "AgentCalls",
    "AgentContext",
    "AgentSpec",
    "AgentStep",
    "AskOption",
    "AskQuestion",
    "AskSpec",
    "AskStep",
    "Cost",
    "CredentialAuth",
    "CredentialDelivery",
    "CredentialRequirement",
    "Environment",
    "Method",
    "OperationResult",
    "OperationStep",
    "ProcessStep",
    "ProcessTool",
    "RunProfile",
    "Runner",
    "SkillPackage",
    "SkillReuse",
    "SkillStep",
    "Step",
    "StepApproval",
    "ToolStep",
    "WaitSpec",
    "WaitStep",
    "WorkerCalls",
    "WorkerLimits",
    "WorkerSpec",
    "WorkerStep",
]

STEP_ID_PATTERN = ID_PATTERN
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
STEP_KINDS = ("tool", "agent", "ask", "skill", "operation", "worker", "wait")
"""The keys that name a step's kind; a step carries exactly one of them."""
STEP_TAGS = (*STEP_KINDS, "process")
"""What a step is read as: its kind key, or ``process`` for a ``tool:`` that is a mapping."""
OUTPUT_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

JsonSchema = dict[str, Any]
StepInputs = dict[str, Any]
StepId = Annotated[str, Rule(pattern=STEP_ID_PATTERN)]
NonEmpty = Annotated[str, Rule(min_length=1)]
EnvName = Annotated[str, Rule(pattern=ENV_NAME_PATTERN)]


class _Model(Record):
    pass


class CredentialDelivery(_Model):
    """How a resolved secret reaches the tool: today, one environment variable."""

    env: EnvName


class CredentialAuth(_Model):
    """One accepted authentication mode of a credential and its delivery."""

    delivery: CredentialDelivery


class CredentialRequirement(_Model):
    """A named credential a method's steps may use: provider, audience, accepted modes."""

    provider: NonEmpty
    audience: NonEmpty | None = None
    auth: Annotated[dict[str, CredentialAuth], Rule(min_length=1)]


class Environment(_Model):
    """Environment variables the skill reads: ``required`` ones must be set."""

    required: list[EnvName] = field(default_factory=list)
    optional: list[EnvName] = field(default_factory=list)


class _StepBase(_Model):
    """Every step's id, its own ``effects``/``reach`` (narrowing all it does) and
    ``result_as`` (its whole result becomes ``{NAME: result}``)."""

    id: StepId
    effects: Literal["none", "ask", "allow"] | None = None
    reach: Literal["workspace", "inputs"] | None = None
    result_as: Annotated[str, Rule(pattern=OUTPUT_NAME_PATTERN)] | None = None


class Cost(_Model):
    """The declared price of a priced act, in micro-dollars per ``per``: ``call`` (or
    ``request``, the runx reference's name for it) is charged once the request may have left;
    ``success`` only when the provider answered as the step accepts (a completed call)."""

    usd_micro: Annotated[int, Rule(ge=0, le=2**53 - 1)]
    per: Literal["call", "request", "success", "1k_tokens_in", "1k_tokens_out"] = "call"


class ToolStep(_StepBase):
    """Call one tool with ``inputs`` (values may be references); ``cost`` prices an
    ``http.request`` step's call (see :mod:`proctor.core.spend`)."""

    tool: NonEmpty
    inputs: StepInputs = field(default_factory=dict)
    credential: NonEmpty | None = None
    idempotency_key: NonEmpty | None = None
    reason: str | None = None
    cost: Cost | None = None
    approvals: Annotated[int, Rule(ge=1, le=10)] = 1
    """Distinct people who must approve the step's change when the floor holds it."""
    expires_in: Annotated[int, Rule(ge=1, le=30 * 86400)] | None = None
    """Seconds the floor's approval request waits before it is declined."""


class AgentCalls(_Model):
    """What an agent turn may call; naming nothing offers nothing."""

    tools: list[NonEmpty] = field(default_factory=list)
    skills: list[NonEmpty] = field(default_factory=list)
    operations: list[NonEmpty] = field(default_factory=list)


class AgentContext(_Model):
    """Skills whose SKILL.md a turn reads as untrusted, advisory context (never authority)."""

    skills: Annotated[list[NonEmpty], Rule(min_length=1, max_length=8)]


class AgentSpec(_Model):
    """One agent turn: instructions, inputs, an allowance, and the output it must return;
    ``context`` names skills whose SKILL.md the turn is shown as advisory context."""

    instructions: NonEmpty
    inputs: StepInputs = field(default_factory=dict)
    calls: AgentCalls = field(default_factory=lambda: AgentCalls())
    context: AgentContext | None = None
    ask: bool = False
    output: JsonSchema | None = None


class AgentStep(_StepBase):
    """A turn where an agent chooses calls from an allowance."""

    agent: AgentSpec


class AskStep(_StepBase):
    """A person's decision: an approval or answers to questions."""

    ask: AskSpec


class SkillReuse(_Model):
    """Reuse an earlier sealed child of the same package digest, method and canonical inputs
    that sealed at most ``max_age_seconds`` ago, instead of running it again."""

    max_age_seconds: Annotated[int, Rule(ge=0)]


class SkillStep(_StepBase):
    """Call a child skill (``path#method``) as a child run.

    With ``for_each`` (a reference to a list) it runs one child per element, ``$item`` and
    ``$index`` naming the element and its position in ``inputs``; ``concurrency`` narrows how
    many run at once. The step's output is the child's result, or the list of results in order.
    """

    skill: NonEmpty
    inputs: StepInputs = field(default_factory=dict)
    for_each: NonEmpty | None = None
    concurrency: Annotated[int, Rule(ge=1)] | None = None
    reuse: SkillReuse | None = None


class OperationResult(_Model):
    """An operation step's result contract (``result: {required: [...]}``): each named field
    must be in the operation's result, else the step fails ``operation_result_incomplete``."""

    required: Annotated[
        list[Annotated[str, Rule(min_length=1, max_length=128)]], Rule(min_length=1)
    ]


class OperationStep(_StepBase):
    """A connector's declared provider call (``connector/op``) with a credential; ``approval``
    asks a person for each call (never weaker than the floor), ``result`` checks its result."""

    operation: NonEmpty
    inputs: StepInputs = field(default_factory=dict)
    credential: NonEmpty | None = None
    idempotency_key: NonEmpty | None = None
    reason: str | None = None
    approvals: Annotated[int, Rule(ge=1, le=10)] = 1
    """Distinct people who must approve the operation when the floor holds it."""
    expires_in: Annotated[int, Rule(ge=1, le=30 * 86400)] | None = None
    """Seconds the floor's approval request waits before it is declined."""
    approval: StepApproval | None = None
    result: OperationResult | None = None


class WorkerLimits(_Model):
    """The limits a worker function runs under: CPU time, memory (address space), wall time
    and the size of its JSON result."""

    cpu_seconds: Annotated[int, Rule(ge=1, le=600)] = 10
    memory_mb: Annotated[int, Rule(ge=64, le=4096)] = 512
    wall_seconds: Annotated[int, Rule(ge=1, le=3600)] = 60
    max_output_bytes: Annotated[int, Rule(ge=1, le=16 * 1024 * 1024)] = 1024 * 1024


class WorkerCalls(_Model):
    """The tools a worker function may call back through admission (``ctx.call``)."""

    tools: list[NonEmpty] = field(default_factory=list)


class WorkerSpec(_Model):
    """A Python function run in an isolated subprocess: ``def main(inputs, ctx) -> dict``.

    ``module`` is a ``.py`` file of the package; ``env`` the only variables it gets (declared,
    never secret); ``write`` lets it write the workspace (read-only otherwise); ``max_calls``
    bounds its ``ctx.call`` calls (at most 10,000).
    """

    module: NonEmpty
    function: Annotated[str, Rule(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
    env: dict[EnvName, str] = field(default_factory=dict)
    limits: WorkerLimits = field(default_factory=lambda: WorkerLimits())
    calls: WorkerCalls = field(default_factory=lambda: WorkerCalls())
    max_calls: Annotated[int, Rule(ge=0, le=10_000)] = 100
    write: bool = False


class WorkerStep(_StepBase):
    """Run a worker function of the package."""

    worker: WorkerSpec
    inputs: StepInputs = field(default_factory=dict)


class ProcessTool(_Model):
    """An inline process tool (the runx reference's ``tool: {command: ...}``): one program run
    with an exact argv, no shell, as a ``command.execute`` call of the step (same admission,
    floor and sandbox). ``command`` is the program; ``args`` follow it (each a string or a
    reference); ``cwd`` is a folder of the package (its root by default); the package's declared
    ``environment`` is given to it, a credential only through the step's ``credential:``."""

    command: Annotated[str, Rule(min_length=1, max_length=4096)]
    args: Annotated[
        list[Annotated[str, Rule(min_length=1, max_length=4096)]], Rule(max_length=255)
    ] = field(default_factory=list)
    cwd: Annotated[str, Rule(min_length=1, max_length=1024)] | None = None
    timeout_seconds: Annotated[int, Rule(ge=1, le=3600)] | None = None
    max_output_bytes: Annotated[int, Rule(ge=0, le=16 * 1024 * 1024)] | None = None


class ProcessStep(_StepBase):
    """Run an inline process tool; its output is the command's result (plus ``json``)."""

    tool: ProcessTool
    credential: NonEmpty | None = None
    reason: str | None = None
    approvals: Annotated[int, Rule(ge=1, le=10)] = 1
    expires_in: Annotated[int, Rule(ge=1, le=30 * 86400)] | None = None


class WaitSpec(_Model):
    """A timed wait: ``until`` (milliseconds since the epoch, an ISO 8601 time with its UTC
    offset, or a reference to either) or ``seconds`` after the step is first reached; exactly
    one of them."""

    until: Any = None
    seconds: Annotated[int, Rule(ge=0, le=366 * 86400)] | None = None

    def _check(self) -> None:
        if (self.until is None) == (self.seconds is None):
            raise ValueError("a wait needs exactly one of 'until' or 'seconds'")
        if isinstance(self.until, bool) or not isinstance(self.until, int | str | None):
            raise ValueError("until is milliseconds since the epoch, a time or a reference")


class WaitStep(_StepBase):
    """Wait until a time: a request of kind ``wait`` that a resume or a worker settles."""

    wait: WaitSpec


def _step_kind(value: Any) -> str | None:
    if isinstance(value, ProcessStep):
        return "process"
    if isinstance(value, Record):
        return next((kind for kind in STEP_KINDS if hasattr(value, kind)), None)
    if not isinstance(value, dict):
        return None
    present = [kind for kind in STEP_KINDS if kind in value]
    if present == ["tool"] and isinstance(value["tool"], dict):
        return "process"
    return present[0] if len(present) == 1 else None


_FirstKinds = ToolStep | AgentStep | AskStep | SkillStep | OperationStep | WorkerStep
Step = Annotated[
    _FirstKinds | WaitStep | ProcessStep,
    Choice(_step_kind, STEP_TAGS, "a step needs exactly one of: " + ", ".join(STEP_KINDS)),
]
"""A step of any kind, chosen by the one kind key it carries."""


class Method(_Model):
    """A named entry point: its inputs, steps and result."""

    description: NonEmpty | None = None
    steps: Annotated[list[Step], Rule(min_length=1)]
    inputs: JsonSchema = field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
    result_from: list[StepId] | None = None
    outputs: JsonSchema | None = None
    effects: Literal["none", "ask", "allow"] | None = None
    reach: Literal["workspace", "inputs"] | None = None


class Runner(_Model):
    """A runner profile of the runx reference (``runners: {NAME: {...}}``): ``type: graph``
    names the method of the same name, run by proctor's step engine; ``default: true`` makes it
    the default method; ``credential`` names the declared credential its steps reach the
    provider with (a step naming none is given it)."""

    type: NonEmpty
    default: bool = False
    credential: NonEmpty | None = None


class RunProfile(_Model):
    """A validated ``run.yaml``."""

    minimum_proctor: NonEmpty | None = None
    minimum_runx: NonEmpty | None = None
    default_method: NonEmpty | None = None
    methods: Annotated[dict[StepId, Method], Rule(min_length=1)]
    credentials: dict[str, CredentialRequirement] = field(default_factory=dict)
    environment: Environment = field(default_factory=lambda: Environment())
    runners: dict[StepId, Runner] = field(default_factory=dict)


class SkillPackage(_Model):
    """A skill package as read: its SKILL.md parts, its profile, and its file list.

    ``root`` is a label for the package folder (relative, never a host path); ``profile`` is
    ``None`` when the package has no ``run.yaml``; ``files`` are sorted relative paths.
    """

    root: str
    name: NonEmpty
    description: NonEmpty
    body: str
    frontmatter: dict[str, Any]
    profile: RunProfile | None
    files: tuple[str, ...]

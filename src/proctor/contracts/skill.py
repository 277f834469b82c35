"""Models of a skill package and its execution profile (``run.yaml``).

Every model is strict (no coercion: ``"1"`` is not an int), refuses unknown fields and is
frozen, so a held profile is the document as validated. Checks that need the whole profile
(references between steps, ``default_method`` naming a method) live in
:mod:`proctor.parser.skill`, which builds these models.

A step is one of several kinds, told apart by which key it carries: ``tool``, ``agent``,
``ask``, ``skill``, ``operation`` or ``worker``. All are modelled so later issues fit; the
runtime refuses kinds it cannot run yet.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

__all__ = [
    "STEP_KINDS",
    "AgentCalls",
    "AgentContext",
    "AgentSpec",
    "AgentStep",
    "AskQuestion",
    "AskSpec",
    "AskStep",
    "Cost",
    "CredentialAuth",
    "CredentialDelivery",
    "CredentialRequirement",
    "Environment",
    "Method",
    "OperationStep",
    "RunProfile",
    "SkillPackage",
    "SkillReuse",
    "SkillStep",
    "Step",
    "ToolStep",
    "WorkerCalls",
    "WorkerLimits",
    "WorkerSpec",
    "WorkerStep",
]

STEP_ID_PATTERN = r"^[a-z0-9_-]+$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
STEP_KINDS = ("tool", "agent", "ask", "skill", "operation", "worker")
"""The keys that name a step's kind; a step carries exactly one of them."""

JsonSchema = dict[str, Any]
StepInputs = dict[str, Any]
StepId = Annotated[str, Field(pattern=STEP_ID_PATTERN)]
NonEmpty = Annotated[str, Field(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class CredentialDelivery(_Model):
    """How a resolved secret reaches the tool: today, one environment variable."""

    env: Annotated[str, Field(pattern=ENV_NAME_PATTERN)]


class CredentialAuth(_Model):
    """One accepted authentication mode of a credential and its delivery."""

    delivery: CredentialDelivery


class CredentialRequirement(_Model):
    """A named credential a method's steps may use: provider, audience, accepted modes."""

    provider: NonEmpty
    audience: NonEmpty | None = None
    auth: Annotated[dict[str, CredentialAuth], Field(min_length=1)]


class Environment(_Model):
    """Environment variables the skill reads: ``required`` ones must be set."""

    required: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] = []
    optional: list[Annotated[str, Field(pattern=ENV_NAME_PATTERN)]] = []


class _StepBase(_Model):
    id: StepId


class Cost(_Model):
    """The declared price of a priced act, in micro-dollars per ``per``."""

    usd_micro: Annotated[int, Field(ge=0, le=2**53 - 1)]
    per: Literal["call", "1k_tokens_in", "1k_tokens_out"] = "call"


class ToolStep(_StepBase):
    """Call one tool with ``inputs`` (values may be references); ``cost`` prices an
    ``http.request`` step's call (see :mod:`proctor.core.spend`)."""

    tool: NonEmpty
    inputs: StepInputs = {}
    credential: NonEmpty | None = None
    idempotency_key: NonEmpty | None = None
    reason: str | None = None
    cost: Cost | None = None


class AgentCalls(_Model):
    """What an agent turn may call; naming nothing offers nothing."""

    tools: list[NonEmpty] = []
    skills: list[NonEmpty] = []
    operations: list[NonEmpty] = []


class AgentContext(_Model):
    """Skills whose SKILL.md a turn reads as untrusted, advisory context (never authority)."""

    skills: Annotated[list[NonEmpty], Field(min_length=1, max_length=8)]


class AgentSpec(_Model):
    """One agent turn: instructions, inputs, an allowance, and the output it must return;
    ``context`` names skills whose SKILL.md the turn is shown as advisory context."""

    instructions: NonEmpty
    inputs: StepInputs = {}
    calls: AgentCalls = AgentCalls()
    context: AgentContext | None = None
    ask: bool = False
    output: JsonSchema | None = None


class AgentStep(_StepBase):
    """A turn where an agent chooses calls from an allowance."""

    agent: AgentSpec


class AskQuestion(_Model):
    """One question put to a person: pick one of ``choices``, and/or write free text when
    ``free_text`` (a question with no choices always takes free text)."""

    id: StepId
    prompt: NonEmpty
    choices: list[NonEmpty] | None = None
    free_text: bool = False
    required: bool = True


class AskSpec(_Model):
    """Either an approval (``reason``) or questions for a person; exactly one of them."""

    reason: NonEmpty | None = None
    questions: Annotated[list[AskQuestion], Field(min_length=1, max_length=3)] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> AskSpec:
        if (self.reason is None) == (self.questions is None):
            raise ValueError("an ask step needs exactly one of 'reason' or 'questions'")
        return self


class AskStep(_StepBase):
    """A person's decision: an approval or answers to questions."""

    ask: AskSpec


class SkillReuse(_Model):
    """Reuse an earlier sealed child of the same package digest, method and canonical inputs
    that sealed at most ``max_age_seconds`` ago, instead of running it again."""

    max_age_seconds: Annotated[int, Field(ge=0)]


class SkillStep(_StepBase):
    """Call a child skill (``path#method``) as a child run.

    With ``for_each`` (a reference to a list) it runs one child per element, ``$item`` and
    ``$index`` naming the element and its position in ``inputs``; ``concurrency`` narrows how
    many run at once. The step's output is the child's result, or the list of results in order.
    """

    skill: NonEmpty
    inputs: StepInputs = {}
    for_each: NonEmpty | None = None
    concurrency: Annotated[int, Field(ge=1)] | None = None
    reuse: SkillReuse | None = None


class OperationStep(_StepBase):
    """A connector's declared provider call (``connector/op``) with a credential."""

    operation: NonEmpty
    inputs: StepInputs = {}
    credential: NonEmpty | None = None
    idempotency_key: NonEmpty | None = None
    reason: str | None = None


class WorkerLimits(_Model):
    """The limits a worker function runs under: CPU time, memory (address space), wall time
    and the size of its JSON result."""

    cpu_seconds: Annotated[int, Field(ge=1, le=600)] = 10
    memory_mb: Annotated[int, Field(ge=64, le=4096)] = 512
    wall_seconds: Annotated[int, Field(ge=1, le=3600)] = 60
    max_output_bytes: Annotated[int, Field(ge=1, le=16 * 1024 * 1024)] = 1024 * 1024


class WorkerCalls(_Model):
    """The tools a worker function may call back through admission (``ctx.call``)."""

    tools: list[NonEmpty] = []


class WorkerSpec(_Model):
    """A Python function run in an isolated subprocess: ``def main(inputs, ctx) -> dict``.

    ``module`` is a ``.py`` file of the package; ``env`` the only variables it gets (declared,
    never secret); ``write`` lets it write the workspace (read-only otherwise); ``max_calls``
    bounds its ``ctx.call`` calls (at most 10,000).
    """

    module: NonEmpty
    function: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
    env: dict[Annotated[str, Field(pattern=ENV_NAME_PATTERN)], str] = {}
    limits: WorkerLimits = WorkerLimits()
    calls: WorkerCalls = WorkerCalls()
    max_calls: Annotated[int, Field(ge=0, le=10_000)] = 100
    write: bool = False


class WorkerStep(_StepBase):
    """Run a worker function of the package."""

    worker: WorkerSpec
    inputs: StepInputs = {}


def _step_kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        return next((kind for kind in STEP_KINDS if hasattr(value, kind)), None)
    if not isinstance(value, dict):
        return None
    present = [kind for kind in STEP_KINDS if kind in value]
    return present[0] if len(present) == 1 else None


Step = Annotated[
    Annotated[ToolStep, Tag("tool")]
    | Annotated[AgentStep, Tag("agent")]
    | Annotated[AskStep, Tag("ask")]
    | Annotated[SkillStep, Tag("skill")]
    | Annotated[OperationStep, Tag("operation")]
    | Annotated[WorkerStep, Tag("worker")],
    Discriminator(
        _step_kind,
        custom_error_type="step_kind",
        custom_error_message="a step needs exactly one of: " + ", ".join(STEP_KINDS),
    ),
]
"""A step of any kind, chosen by the one kind key it carries."""


class Method(_Model):
    """A named entry point: its inputs, steps and result."""

    description: NonEmpty | None = None
    inputs: JsonSchema = Field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
    steps: Annotated[list[Step], Field(min_length=1)]
    result_from: list[StepId] | None = None
    outputs: JsonSchema | None = None
    effects: Literal["none", "ask", "allow"] | None = None
    reach: Literal["workspace", "inputs"] | None = None


class RunProfile(_Model):
    """A validated ``run.yaml``."""

    minimum_proctor: NonEmpty
    default_method: NonEmpty | None = None
    credentials: dict[str, CredentialRequirement] = {}
    environment: Environment = Environment()
    methods: Annotated[
        dict[Annotated[str, Field(pattern=STEP_ID_PATTERN)], Method], Field(min_length=1)
    ]


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

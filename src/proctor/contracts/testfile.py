"""A skill test (``tests/<name>.yaml`` in a package): what to run, what stands in for the
world, and what must come out.

Every model is strict, refuses unknown fields and is frozen. :mod:`proctor.parser.testfile`
builds them from YAML, naming ``file:line:column`` of a refused field; ``proctor.testing``
runs them. A test is one run of one method:

- ``setup``: ``files`` staged into the test's workspace, ``credentials`` by provider with
  fixture values, the host's ``authority``, ``receipts`` to seed;
- ``package``: ``fixtures/<dir>``, a fixture package of the package run instead of it;
- ``host``: the ``act`` it states for the run (``$run.act``), and what it answers, by request
  address: ``answers`` (agent turn outputs, question answers), ``turns`` (agent turns worked
  call by call), ``approvals`` (``true``/``false``), ``close``;
- ``providers``: ``http`` exchanges (matched on method, canonical URL and body identity), a
  ``model`` that serves scripted responses to managed agent turns, and ``mcp`` answers of
  upstream MCP tools (matched on tool and exact arguments; no upstream is ever started), and
  ``processes``, the results of local process tools (matched on tool and exact arguments; no
  process is started when any is declared);
- ``expect``: the checks (the oracle).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "HTTP_METHODS",
    "MODEL_DIALECTS",
    "CallExpect",
    "Expect",
    "FileExpect",
    "Host",
    "HttpExchange",
    "HttpRequestSpec",
    "HttpResponseSpec",
    "JsonBody",
    "McpExchange",
    "McpResult",
    "ModelProvider",
    "ProcessExchange",
    "Providers",
    "ReceiptExpect",
    "Setup",
    "SkillTest",
    "StepExpect",
    "TextBody",
    "Turn",
    "TurnCall",
    "ValueExpect",
]

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
MODEL_DIALECTS = ("chat_completions", "openai_responses", "anthropic_messages")

NonEmpty = Annotated[str, Field(min_length=1)]
Pointer = Annotated[str, Field(pattern=r"^(/([^~/]|~[01])*)*$")]
"""An RFC 6901 JSON pointer (``""`` is the whole document)."""
RelPath = Annotated[str, Field(min_length=1, max_length=1024)]
Address = Annotated[str, Field(min_length=1, max_length=512)]
FixturePackage = Annotated[
    str, Field(pattern=r"^fixtures(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}){1,8}$", max_length=1024)
]
"""``fixtures/<dir>``: a folder under the package's ``fixtures/``, every part a plain name (no
``.``/``..``, no leading dot, no backslash)."""
CallId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
RunOutcome = Literal["completed", "failed", "blocked", "declined", "superseded", "killed"]
StepOutcome = Literal["completed", "failed", "blocked", "declined", "not_run"]
"""How a step settled; ``not_run`` is a step the run never reached."""


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ValueExpect(_Model):
    """A value compared ``exact`` (equal, types included) or as a ``subset`` (objects may have
    more fields; arrays have the same length and order, their items compared as subsets).
    Exactly one of the two; ``exact: null`` expects a null value."""

    exact: Any = None
    subset: Any = None

    @model_validator(mode="after")
    def _one_of(self) -> ValueExpect:
        if len({"exact", "subset"} & self.model_fields_set) != 1:
            raise ValueError("give exactly one of exact or subset")
        return self

    @property
    def mode(self) -> Literal["exact", "subset"]:
        """Which comparison this is."""
        return "exact" if "exact" in self.model_fields_set else "subset"

    @property
    def value(self) -> Any:
        """The expected value."""
        return self.exact if self.mode == "exact" else self.subset


class CallExpect(_Model):
    """What one call of a worked turn must return: its ``status``, ``code`` and ``result``, or
    (the runx reference's form) its whole ``outcome`` (``{status, result, error}``) compared
    exact or as a subset."""

    status: Literal["completed", "failed", "refused"] | None = None
    code: NonEmpty | None = None
    result: ValueExpect | None = None
    outcome: ValueExpect | None = None


class TurnCall(_Model):
    """One call a worked turn makes, as an attached agent would (``Session.turn_call``).

    ``call_id`` defaults to the call's 1-based position in the turn, so a change it asks a
    person about waits at ``<step>/turn/<n>``."""

    tool: NonEmpty
    arguments: dict[str, Any] = {}
    reason: str = ""
    call_id: CallId | None = None
    expect: CallExpect | None = None

    @model_validator(mode="before")
    @classmethod
    def _runx_form(cls, data: Any) -> Any:
        """The runx reference's call form: ``input`` for ``arguments``, and ``expect: {exact |
        subset}`` comparing the call's whole outcome (``{status, result, error}``)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "input" in data:
            if "arguments" in data:
                raise ValueError("give arguments or input, not both")
            data["arguments"] = data.pop("input")
        want = data.get("expect")
        if isinstance(want, dict) and set(want) & {"exact", "subset"}:
            data["expect"] = {"outcome": want}
        return data


class Turn(_Model):
    """An agent turn worked call by call, then ended with ``output`` or ``failure``."""

    calls: list[TurnCall] = []
    output: Any = None
    failure: NonEmpty | None = None

    @model_validator(mode="after")
    def _one_end(self) -> Turn:
        if ("output" in self.model_fields_set) == (self.failure is not None):
            raise ValueError("a turn ends with output or failure, exactly one")
        return self


class Host(_Model):
    """What the host answers, by request address (``step``, ``step/turn/<call_id>``), and
    ``act``: the act the host states for the run (any JSON value), which its steps read as
    ``$run.act``."""

    act: Any = None
    answers: dict[Address, Any] = {}
    turns: dict[Address, Turn] = {}
    approvals: dict[Address, bool] = {}
    close: Literal["declined", "superseded"] | None = None

    @model_validator(mode="after")
    def _answered_or_worked(self) -> Host:
        both = sorted(set(self.answers) & set(self.turns))
        if both:
            raise ValueError(f"turn {both[0]!r} is in answers and turns: answer it or work it")
        return self


class JsonBody(_Model):
    """A request body that is one JSON value (``null`` included), compared structurally."""

    json_: Any = Field(alias="json")


class TextBody(_Model):
    """A request body compared as exact text (UTF-8)."""

    text: str


class HttpRequestSpec(_Model):
    """What an exchange answers: the exact method, the canonical final URL, the body identity
    (``none``: no body at all)."""

    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    url: Annotated[str, Field(min_length=1, max_length=8192)]
    body: Literal["none"] | JsonBody | TextBody = "none"

    @field_validator("url")
    @classmethod
    def _no_fragment(cls, url: str) -> str:
        if "#" in url:
            raise ValueError("an exchange URL has no fragment (a request never sends one)")
        return url


class HttpResponseSpec(_Model):
    """The bytes an exchange answers with."""

    status: Annotated[int, Field(ge=100, le=599)] = 200
    headers: dict[NonEmpty, str] = {}
    body: str = ""


class HttpExchange(_Model):
    """One declared HTTP exchange."""

    request: HttpRequestSpec
    response: HttpResponseSpec = HttpResponseSpec()


class ModelProvider(_Model):
    """The model a managed agent talks to: its scripted answers, in order, each a document
    of the provider's ``dialect`` exactly as its API answers."""

    dialect: Literal["chat_completions", "openai_responses", "anthropic_messages"]
    model: NonEmpty = "fixture-model"
    responses: Annotated[list[dict[str, Any]], Field(min_length=1, max_length=200)]


class McpResult(_Model):
    """What an upstream MCP tool answers: its content blocks, structured content, and
    whether it is a tool error."""

    content: Annotated[list[dict[str, Any]], Field(max_length=64)] = []
    structured_content: dict[str, Any] | None = None
    is_error: bool = False


class McpExchange(_Model):
    """One upstream MCP call a test answers: the tool (``SERVER/TOOL``) and its exact
    arguments."""

    tool: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}/[A-Za-z0-9_.-]{1,128}$")]
    arguments: dict[str, Any] = {}
    result: McpResult = McpResult()


PROCESS_ARGUMENTS_MAX = 64 * 1024
"""The most bytes a ``providers.processes`` entry's arguments take (canonical JSON)."""
PROCESS_RESULT_MAX = 2 * 1024 * 1024
"""The most bytes a ``providers.processes`` entry's result takes (canonical JSON)."""


class ProcessExchange(_Model):
    """One call of a local process tool a test answers (the runx reference's
    ``providers.processes``): the tool, its exact arguments and the result it returns."""

    tool: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$")]
    arguments: dict[str, Any] = {}
    result: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _runx_form(cls, data: Any) -> Any:
        """``input`` for ``arguments``, as the runx reference writes a call's arguments."""
        if isinstance(data, dict) and "input" in data:
            if "arguments" in data:
                raise ValueError("give arguments or input, not both")
            data = {("arguments" if k == "input" else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _bounded(self) -> ProcessExchange:
        for name, value, limit in (
            ("arguments", self.arguments, PROCESS_ARGUMENTS_MAX),
            ("result", self.result, PROCESS_RESULT_MAX),
        ):
            size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
            if size > limit:
                raise ValueError(f"a process entry's {name} take at most {limit} bytes")
        return self


class Providers(_Model):
    """What stands in for what the run reaches; anything else is refused."""

    http: list[HttpExchange] = []
    model: ModelProvider | None = None
    mcp: Annotated[list[McpExchange], Field(max_length=32)] = []
    processes: Annotated[list[ProcessExchange], Field(max_length=32)] = []


class Setup(_Model):
    """What the test's workspace holds before the run.

    ``files`` maps a workspace path to its text; ``credentials`` maps a provider to a fixture
    value (or ``{mode: value}`` for a credential with several auth modes); ``authority`` is the
    host's authority document (``proctor run --run-authority``); ``receipts`` names
    package-relative receipt files (``fixtures/...json``) seeded into the test's store;
    ``egress`` is the workspace's egress allow-list the run is checked against (what
    ``proctor.toml [egress] allow`` holds live): it widens the HTTP tools' check, whose requests
    the test answers in process, and never gives a process network."""

    files: dict[RelPath, str] = {}
    credentials: dict[NonEmpty, str | dict[NonEmpty, str]] = {}
    authority: dict[str, Any] | None = None
    receipts: list[RelPath] = []
    egress: list[NonEmpty] = []


class StepExpect(_Model):
    """A step's outcome and, for a refused or failed one, its refusal code."""

    outcome: StepOutcome | None = None
    code: NonEmpty | None = None


class FileExpect(_Model):
    """A workspace file after the run: its text, its digest, or that it does not exist."""

    content: str | None = None
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    exists: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> FileExpect:
        if not self.exists and (self.content is not None or self.digest is not None):
            raise ValueError("a file expected not to exist has no content or digest")
        if self.exists and self.content is None and self.digest is None:
            raise ValueError("give content, digest, or exists: false")
        return self


class ReceiptExpect(_Model):
    """What the run's sealed receipt must be: verified (always checked), of this ``schema``
    (``proctor.receipt.v1``; the runx reference's ``runx.receipt.v1`` names the same thing, the
    receipt of the runtime that ran the test), with ``child_receipt_count`` children of the
    root (its steps)."""

    schema_: Literal["proctor.receipt.v1", "runx.receipt.v1"] | None = Field(
        default=None, alias="schema"
    )
    child_receipt_count: Annotated[int, Field(ge=0)] | None = None
    outcome: RunOutcome | None = None


class Expect(_Model):
    """The checks a test's run must pass. ``status`` is required: a test says how it ends."""

    status: Literal["sealed", "needs_agent", "needs_approval", "needs_credential"]
    outcome: RunOutcome | None = None
    output: ValueExpect | None = None
    absent: list[Pointer] = []
    steps: dict[NonEmpty, StepOutcome | StepExpect] = {}
    step_outputs: dict[NonEmpty, ValueExpect] = {}
    requests: list[dict[str, Any]] | None = None
    http_request_counts: list[Annotated[int, Field(ge=0)]] | None = None
    files: dict[RelPath, FileExpect] = {}
    audit: list[NonEmpty | dict[str, Any]] = []
    receipt: Literal["verified"] | ReceiptExpect | None = None

    @field_validator("audit")
    @classmethod
    def _audit_events(cls, entries: list[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
        for entry in entries:
            if isinstance(entry, dict) and not isinstance(entry.get("event"), str):
                raise ValueError("an audit expectation names its event: {event: NAME, ...}")
        return entries


class SkillTest(_Model):
    """One test: a method run with stand-ins, and the checks its run must pass.

    ``method`` defaults to the package's default method; ``package`` (``fixtures/<dir>``)
    runs a fixture package of the package instead (one composing it with others), from where
    the fixtures are staged in the test's workspace."""

    description: str | None = None
    package: FixturePackage | None = None
    method: Annotated[str, Field(pattern=r"^[a-z0-9_-]+$")] | None = None
    inputs: dict[str, Any] = {}
    setup: Setup = Setup()
    host: Host = Host()
    providers: Providers = Providers()
    expect: Expect

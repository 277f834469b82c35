"""What a tool is: a name, a JSON Schema for its arguments, an effect class and a handler.

Tools never check their own authority: admission (``proctor.runtime.admission.governor``) runs
scope,
schema, containment and policy before a handler is called. A handler receives arguments that
already validated against its schema and paths that already passed containment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from proctor.contracts.json_strict import check_value
from proctor.contracts.values import dataclass, field
from proctor.errors import ParseError

# re-exported: how a tool declares the paths it touches
from proctor.runtime.boundary.workspace import Access as Access

if TYPE_CHECKING:
    import threading

    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.runs import RunStore

Effect = Literal["none", "read", "write", "network", "process"]
"""The effect class of a tool: what it can do to the world."""

CHANGING_EFFECTS: frozenset[str] = frozenset({"write", "network", "process"})


OPERATION_PREFIX = "operation:"
"""The name prefix of a connector operation's tool (``operation:<connector>/<operation>``)."""


class OutcomeUnknown(Exception):
    """A write was sent and its answer never came (it timed out after the request left): its
    claim stays unsettled on purpose, so the step reconciles it at once, by the write's
    declared readback when it has one, or by a person's answer, never by a guess."""


class CommandStopped(Exception):
    """A running command was stopped from outside (a cancelled call, Ctrl-C, a worker's
    SIGTERM) and its whole process tree killed and waited for: admission settles its call
    ``cancelled`` (:mod:`proctor.runtime.admission.cancelled`) and the driver stops the run."""


TAINT_EXTRA = "taint"
"""The ``ToolContext.extras`` key holding the run's taint set (the values delivered to it,
:class:`proctor.runtime.boundary.sanitize.TaintSet`): a read that returns bytes the result's
scrubbing cannot see (``artifact.read``'s base64 pages) checks them against it."""

PACKAGE_EXTRA = "package_identity"
"""The ``ToolContext.extras`` key holding the run's package identity
(:attr:`proctor.runtime.skills.LoadedSkill.identity`): what a tool scopes per-package keys by."""


@dataclass
class ToolContext:
    """What a handler may use: the workspace, the run store and the identity of the call.

    ``cancel`` is set when the call is cancelled; a read checks it in its loops and stops
    (:func:`check_cancel`). Effects never get it: an effect in flight runs to its end.
    """

    workspace: Workspace
    store: RunStore
    run_id: str
    call_id: str
    step_id: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    cancel: threading.Event | None = None


def check_cancel(ctx: ToolContext) -> None:
    """Stop a read whose call was cancelled.

    Raises:
        ToolFailed: ``call_cancelled``.
    """
    if ctx.cancel is not None and ctx.cancel.is_set():
        from proctor.errors import ToolFailed

        raise ToolFailed("the call was cancelled while it ran", code="call_cancelled")


Handler = Callable[[ToolContext, dict[str, Any]], dict[str, Any]]
PathsOf = Callable[[Mapping[str, Any]], list[tuple[str, Access]]]


def no_paths(_args: Mapping[str, Any]) -> list[tuple[str, Access]]:
    """The path extractor of a tool that touches no file."""
    return []


@dataclass(frozen=True)
class Tool:
    """A native tool.

    Attributes:
        name: dotted name, e.g. ``fs.read``.
        description: one sentence for people and models.
        schema: JSON Schema of the arguments (``type: object``, ``additionalProperties: false``).
        effect: effect class.
        handler: the implementation; returns a JSON-ready mapping.
        paths: returns every workspace path in the arguments with its access, for containment.
        output_schema: JSON Schema of the result, for docs and ``tool inspect``.
    """

    name: str
    description: str
    schema: dict[str, Any]
    effect: Effect
    handler: Handler
    paths: PathsOf = no_paths
    output_schema: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        """The tool's public description, as ``proctor tool inspect --json`` prints it."""
        return {
            "name": self.name,
            "description": self.description,
            "effect": self.effect,
            "input_schema": self.schema,
            "output_schema": self.output_schema,
        }


# keyed by name, kept while the schema is the very same object (held here, so its id cannot be
# taken by a newer schema after the old one is freed)
_VALIDATORS: dict[str, tuple[dict[str, Any], Callable[[Any], Any]]] = {}


def validate_args(tool: Tool, args: dict[str, Any]) -> str | None:
    """Validate ``args`` against the tool's schema (fills defaults in place).

    Returns ``None`` when they fit, else a message naming the failing location (never the
    value). Arguments nested deeper than 64, or holding an unpaired surrogate (text nothing
    can encode, from a host's Python call), never fit.
    """
    return validate_against(tool.name, tool.schema, args)


def validate_against(key: str, schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """Validate ``args`` against ``schema`` as :func:`validate_args` does (its compiled
    validator kept under ``key`` while ``schema`` is the same object). A schema that cannot be
    compiled (an upstream's, say) fits nothing: the message says so.
    """
    try:
        check_value(args, source="$")
    except ParseError as exc:
        return exc.message
    cached = _VALIDATORS.get(key)
    if cached is None or cached[0] is not schema:
        import fastjsonschema

        try:
            cached = (schema, fastjsonschema.compile(schema))
        except Exception as exc:  # fastjsonschema.JsonSchemaDefinitionException, and kin
            return f"the schema cannot be checked ({type(exc).__name__})"
        _VALIDATORS[key] = cached
    try:
        cached[1](args)
    except Exception as exc:  # fastjsonschema.JsonSchemaValueException
        name = str(getattr(exc, "name", "data"))
        rule = str(getattr(exc, "rule", "") or "schema")
        where = "$" + name[4:] if name.startswith("data") else name
        return f"{where} violates '{rule}'"
    return None

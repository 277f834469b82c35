"""The turn tools' declarations: their names, descriptions and input schemas, and the check
of a call's arguments against them.

The seam: :mod:`proctor.mcp.turns` says what each turn tool does; this module says what each
one takes, so the declarations a client lists and the check a call meets are one table.
"""

from __future__ import annotations

from typing import Any

from proctor.errors import UsageError

__all__ = ["PAGE_LIMIT", "TOOLS", "check_arguments"]

PAGE_LIMIT = 32_000
"""The most characters ``turn_read`` returns in one page."""

_RUN = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "The run id (needed when the server holds several).",
}
_TURN = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "The turn's address: the id of the step that asks it.",
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "turn_list": (
        "List the runs this server works and every request each waits on, one line each.",
        _schema({}, []),
    ),
    "turn_status": (
        "Read an agent turn: instructions and inputs whole, the calls it may make with their"
        " input schemas, its output schema, and an index of what turn_read can read.",
        _schema({"run": _RUN, "turn": _TURN}, ["turn"]),
    ),
    "turn_read": (
        "Read what a locator of a turn names (instructions, input:<name>, call:<call_id>),"
        " a page of at most 32,000 characters from offset, with next_offset when more is left.",
        _schema(
            {
                "run": _RUN,
                "turn": _TURN,
                "locator": {"type": "string", "minLength": 1, "maxLength": 1000},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT},
            },
            ["turn", "locator"],
        ),
    ),
    "turn_call": (
        "Make one call from the turn's allowance, admitted and recorded like any other call."
        " call_id is yours and unique in the turn: calling again with it returns the recorded"
        " call instead of running it twice. Under effects: ask a change answers needs_approval"
        " and waits on a person; once approved, call again with the same call_id.",
        _schema(
            {
                "run": _RUN,
                "turn": _TURN,
                "tool": {"type": "string", "minLength": 1, "maxLength": 200},
                "args": {"type": "object"},
                "call_id": {"type": "string", "minLength": 1, "maxLength": 128},
                "reason": {"type": "string", "maxLength": 2000},
            },
            ["turn", "tool", "args", "call_id"],
        ),
    ),
    "turn_complete": (
        "End the turn with its output (checked against the turn's output schema), or with"
        " failure: {reason} when the act cannot be done; the run then moves on.",
        _schema(
            {
                "run": _RUN,
                "turn": _TURN,
                "output": {},
                "failure": _schema({"reason": {"type": "string", "minLength": 1}}, ["reason"]),
            },
            ["turn"],
        ),
    ),
    "call_cancel": (
        "Cancel a turn call while it executes, by its address <turn>/<call_id>. It answers at"
        " once with how the call settles.",
        _schema(
            {"run": _RUN, "call": {"type": "string", "minLength": 1, "maxLength": 400}}, ["call"]
        ),
    ),
}

_validators: dict[str, Any] = {}


def check_arguments(
    name: str, arguments: Any, tools: dict[str, tuple[str, dict[str, Any]]] | None = None
) -> None:
    """Refuse arguments that do not fit tool ``name``'s input schema (from ``tools``: default
    the turn tools; the directive tools pass theirs).

    Raises:
        UsageError: ``arguments_invalid`` naming the argument and the rule, never a value.
    """
    import fastjsonschema

    validate = _validators.get(name)
    if validate is None:
        validate = _validators[name] = fastjsonschema.compile((tools or TOOLS)[name][1])
    try:
        validate(arguments)
    except fastjsonschema.JsonSchemaValueException as exc:
        where = ".".join(str(p) for p in exc.path[1:])
        if exc.rule == "required" and isinstance(arguments, dict):
            missing = [k for k in exc.rule_definition or [] if k not in arguments]
            problem = "needs " + ", ".join(missing)
        elif exc.rule == "additionalProperties":
            problem = "takes no other arguments (see its input schema)"
        else:
            problem = f"fails the input schema's rule {exc.rule or 'schema'!r}"
        raise UsageError(
            f"{name}: {where + ' ' if where else ''}{problem}", code="arguments_invalid"
        ) from None

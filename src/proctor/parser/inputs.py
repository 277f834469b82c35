"""A method's inputs from the command line: ``-i name=value`` pairs and ``--inputs`` documents.

Input values may be secrets, so no error here ever repeats a value or a document's content:
errors name the input, the rule or the position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proctor.contracts import json_strict
from proctor.errors import ParseError, UsageError
from proctor.parser.schemas import compile_schema

__all__ = [
    "MAX_INPUTS_BYTES",
    "check_cli_pairs",
    "coerce_cli_inputs",
    "drop_absent",
    "parse_inputs_document",
    "validate_inputs",
]

MAX_INPUTS_BYTES = 64 * 1024 * 1024
"""Largest ``--inputs`` document accepted; callers read at most one byte more."""

_JSON_TYPES = {"integer", "number", "boolean", "null", "array", "object"}


def _declared_types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {item for item in kind if isinstance(item, str)}
    return set()


def check_cli_pairs(pairs: list[str] | tuple[str, ...], *, with_document: bool = False) -> None:
    """Refuse ``-i`` pairs that cannot be inputs, before anything runs.

    Raises:
        UsageError: ``input_malformed`` for a pair without ``=`` or with an empty name (the
            pair is never shown: it may be a secret typed without its name);
            ``inputs_conflict`` when ``-i`` is given with ``--inputs`` (``with_document``).
    """
    if pairs and with_document:
        raise UsageError(
            "give inputs with -i NAME=VALUE or with --inputs FILE|-, not both",
            code="inputs_conflict",
        )
    for index, pair in enumerate(pairs):
        name, equals, _ = pair.partition("=")
        if not equals or not name:
            raise UsageError(
                f"input #{index + 1} must be NAME=VALUE (e.g. -i message=hello)",
                code="input_malformed",
            )


def drop_absent(values: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``values`` without the optional inputs given as ``null``: a ``null`` for an input that
    is not required and whose schema does not allow ``null`` means the input is absent."""
    properties = schema.get("properties")
    declared: dict[str, Any] = properties if isinstance(properties, dict) else {}
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    return {
        name: value
        for name, value in values.items()
        if value is not None
        or name in needed
        or name not in declared
        or "null" in _declared_types(declared[name])
    }


def coerce_cli_inputs(pairs: list[str], schema: dict[str, Any]) -> dict[str, Any]:
    """Turn ``name=value`` pairs into inputs typed by the method's input schema.

    A property declared only as ``string`` (or not typed, or not declared) keeps its value
    verbatim. A property whose type includes ``integer``, ``number``, ``boolean``, ``null``,
    ``array`` or ``object`` is read as JSON; if that fails and ``string`` is also allowed the
    text is kept.

    Raises:
        UsageError: ``input_malformed`` for a pair without ``=`` or with an empty name;
            ``input_repeated`` for a name given twice; ``input_undeclared`` for a name the
            schema does not declare under ``additionalProperties: false``;
            ``input_not_json`` when a typed value is not JSON; ``duplicate_key`` /
            ``too_deep`` when it is JSON no reader should guess at (a key repeated in one
            object, nesting deeper than 64). Messages name the input, never its value.
    """
    properties = schema.get("properties")
    declared: dict[str, Any] = properties if isinstance(properties, dict) else {}
    closed = schema.get("additionalProperties") is False
    out: dict[str, Any] = {}
    for index, pair in enumerate(pairs):
        name, equals, raw = pair.partition("=")
        if not equals or not name:
            # The whole pair may be a secret typed without its name; show neither.
            raise UsageError(f"input #{index + 1} must be NAME=VALUE", code="input_malformed")
        if name in out:
            raise UsageError(f"input {name!r} is given twice", code="input_repeated")
        if name not in declared and closed:
            known = ", ".join(sorted(declared)) or "none"
            raise UsageError(
                f"input {name!r} is not declared by this method (inputs: {known})",
                code="input_undeclared",
            )
        types = _declared_types(declared.get(name))
        if not types & _JSON_TYPES:
            out[name] = raw
            continue
        try:
            out[name] = json_strict.loads(raw, source=f"input {name!r}")
        except ParseError as exc:
            if "string" in types:
                out[name] = raw
                continue
            if exc.code in ("duplicate_key", "too_deep"):
                raise UsageError(f"input {name!r}: {exc.message}", code=exc.code) from None
            expected = " or ".join(sorted(types))
            raise UsageError(
                f"input {name!r} must be JSON of type {expected}", code="input_not_json"
            ) from None
    return out


def parse_inputs_document(data: bytes, *, source: str) -> dict[str, Any]:
    """Read an ``--inputs`` document: exactly one JSON object, at most 64 MiB.

    Raises:
        UsageError: ``inputs_too_large`` over :data:`MAX_INPUTS_BYTES`; ``inputs_not_utf8``;
            ``inputs_not_json`` (with line and column only, NaN and Infinity included);
            ``duplicate_key`` (a key repeated in one object); ``too_deep`` (nesting deeper
            than 64, refused before any parse); ``inputs_not_object``. Content is never
            echoed.
    """
    if len(data) > MAX_INPUTS_BYTES:
        raise UsageError(
            f"{source}: inputs document is larger than {MAX_INPUTS_BYTES // (1024 * 1024)} MiB",
            code="inputs_too_large",
        )
    try:
        value = json_strict.loads(data, source=source)
    except ParseError as exc:
        # The shared reader's codes, under the names this command has always used for the
        # plain failures; a repeated key and too deep a nesting keep the shared codes.
        code = {"not_utf8": "inputs_not_utf8", "not_json": "inputs_not_json"}.get(
            exc.code, exc.code
        )
        raise UsageError(exc.message, code=code) from None
    if not isinstance(value, dict):
        raise UsageError(
            f"{source}: inputs document must be one JSON object", code="inputs_not_object"
        )
    return value


_BY_OBJECT: dict[int, tuple[dict[str, Any], str, Callable[[Any], Any]]] = {}
_BY_OBJECT_MAX = 256


def _validator(schema: dict[str, Any]) -> Callable[[Any], Any]:
    """The compiled validator of ``schema`` (compiled once per schema). A parsed package's
    schema is one object for as long as the package is unchanged: it is kept by that object
    (held, so its id is never another's) and the text it had, so a schema that was changed in
    place, or a new object, is checked and looked up again."""
    held = _BY_OBJECT.get(id(schema))
    if held is not None and held[0] is schema:
        text = repr(schema)
        if text == held[1]:
            return held[2]
    validator = compile_schema(schema, what="the method's input schema")
    if len(_BY_OBJECT) >= _BY_OBJECT_MAX:
        _BY_OBJECT.clear()
    _BY_OBJECT[id(schema)] = (schema, repr(schema), validator)
    return validator


def validate_inputs(inputs: dict[str, Any], schema: dict[str, Any]) -> None:
    """Check the final inputs against the method's input schema (compiled once per schema).

    Raises:
        UsageError: ``too_deep`` for a value nested deeper than 64 (checked without recursion,
            before any recursive walk); ``inputs_invalid`` naming the failing path and rule,
            never the value.
        ParseError: ``schema_invalid`` when the schema itself cannot be compiled.
    """
    import fastjsonschema

    validator = _validator(schema)
    try:
        json_strict.check_value(inputs, source="the inputs")
    except ParseError as exc:
        raise UsageError(exc.message, code=exc.code) from None
    try:
        validator(inputs)
    except fastjsonschema.JsonSchemaValueException as exc:
        path = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in exc.path[1:]
        ).lstrip(".")
        where = f"input {path!r}" if path else "the inputs object"
        rule = exc.rule or "schema"
        expected = ""
        if rule == "type":
            expected = f": must be {exc.rule_definition}"
        elif rule == "required":
            expected = f": required {sorted(exc.rule_definition or [])}"
        raise UsageError(
            f"{where} fails the schema rule {rule!r}{expected}",
            code="inputs_invalid",
            details={"path": path, "rule": rule},
        ) from None

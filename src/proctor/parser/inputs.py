"""A method's inputs from the command line: ``-i name=value`` pairs and ``--inputs`` documents.

Input values may be secrets, so no error here ever repeats a value or a document's content:
errors name the input, the rule or the position.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from proctor.errors import ParseError, UsageError

__all__ = ["MAX_INPUTS_BYTES", "coerce_cli_inputs", "parse_inputs_document", "validate_inputs"]

MAX_INPUTS_BYTES = 64 * 1024 * 1024
"""Largest ``--inputs`` document accepted; callers read at most one byte more."""

_JSON_TYPES = {"integer", "number", "boolean", "null", "array", "object"}
_CACHE_LIMIT = 256
_validators: dict[str, Callable[[Any], Any]] = {}


def _declared_types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {item for item in kind if isinstance(item, str)}
    return set()


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey
        out[key] = value
    return out


class _DuplicateKey(Exception):
    pass


def _loads(text: str) -> Any:
    """Strict JSON: no NaN/Infinity, no repeated keys. Raises ValueError/_DuplicateKey."""
    return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_no_duplicates)


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
            ``input_not_json`` when a typed value is not JSON. Messages name the input,
            never its value.
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
            out[name] = _loads(raw)
        except (ValueError, _DuplicateKey, RecursionError):
            if "string" in types:
                out[name] = raw
                continue
            expected = " or ".join(sorted(types))
            raise UsageError(
                f"input {name!r} must be JSON of type {expected}", code="input_not_json"
            ) from None
    return out


def parse_inputs_document(data: bytes, *, source: str) -> dict[str, Any]:
    """Read an ``--inputs`` document: exactly one JSON object, at most 64 MiB.

    Raises:
        UsageError: ``inputs_too_large`` over :data:`MAX_INPUTS_BYTES`; ``inputs_not_utf8``;
            ``inputs_not_json`` (with line and column only); ``inputs_duplicate_key``;
            ``inputs_too_deep``; ``inputs_not_object``. Content is never echoed.
    """
    if len(data) > MAX_INPUTS_BYTES:
        raise UsageError(
            f"{source}: inputs document is larger than {MAX_INPUTS_BYTES // (1024 * 1024)} MiB",
            code="inputs_too_large",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source}: inputs document is not UTF-8 (byte {exc.start})", code="inputs_not_utf8"
        ) from None
    try:
        value = _loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{source}:{exc.lineno}:{exc.colno}: inputs document is not JSON ({exc.msg})",
            code="inputs_not_json",
        ) from None
    except _DuplicateKey:
        raise UsageError(
            f"{source}: inputs document repeats a key in one object",
            code="inputs_duplicate_key",
        ) from None
    except ValueError:
        raise UsageError(
            f"{source}: inputs document holds NaN or Infinity, which JSON does not allow",
            code="inputs_not_json",
        ) from None
    except RecursionError:
        raise UsageError(
            f"{source}: inputs document is nested too deeply", code="inputs_too_deep"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(
            f"{source}: inputs document must be one JSON object", code="inputs_not_object"
        )
    return value


def _validator(schema: dict[str, Any]) -> Callable[[Any], Any]:
    import fastjsonschema  # compiled lazily: it is not needed to start the CLI

    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    validator = _validators.get(digest)
    if validator is None:
        try:
            validator = fastjsonschema.compile(schema)
        except fastjsonschema.JsonSchemaDefinitionException as exc:
            raise ParseError(
                f"the method's input schema is not a valid JSON Schema: {exc}",
                code="schema_invalid",
            ) from None
        if len(_validators) >= _CACHE_LIMIT:
            _validators.pop(next(iter(_validators)))
        _validators[digest] = validator
    return validator


def validate_inputs(inputs: dict[str, Any], schema: dict[str, Any]) -> None:
    """Check the final inputs against the method's input schema (compiled once per schema).

    Raises:
        UsageError: ``inputs_invalid`` naming the failing path and rule, never the value.
        ParseError: ``schema_invalid`` when the schema itself cannot be compiled.
    """
    import fastjsonschema

    validator = _validator(schema)
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

"""JSON Schemas that documents declare (a method's inputs and outputs, an agent turn's output).

A schema is checked against the JSON Schema draft-07 meta-schema before it is compiled, so a
malformed one (``properties:`` left empty, ``required: name``) is a :class:`ParseError` where it
is declared, when the package is read, and never a crash of the validator generated from it
later, in the middle of a run. The meta-schema below is draft-07's own, less its ``$id``,
``$schema`` and URI ``format`` annotations (so compiling it never resolves anything remote);
``tests/parser/test_schemas.py`` pins it to the published one.

A schema that passed the check is compiled once per process: validators are kept by the
schema's canonical text (the most recent 512), so a package parsed again, a method's inputs
validated on every run and an agent turn's output share one compile.

The validator of the meta-schema is generated code of about 100 KB that took Python some 70 ms
to compile at every start: it ships compiled, as :mod:`proctor.parser._draft07_meta` (made by
:func:`meta_module_source`, pinned by that test), and is compiled here only when the installed
fastjsonschema is another version than the one that generated it.

A schema is data from a package, so it may not reach outside itself: a ``$ref`` must point
inside the schema (``#...``) and ``$id`` (which moves where references resolve) is refused.
Nor may a ``$ref`` lead back to a schema that validates the same value (``{$ref: '#'}``, or a
loop through ``allOf``, ``anyOf``, ``not`` and the like) without first descending into a
property or an item: the validator generated from it would call itself without end.
fastjsonschema would otherwise fetch any other reference, over the network or from a file,
while the package is being read.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from proctor.contracts.json_strict import check_value
from proctor.errors import ParseError

__all__ = ["META_SCHEMA", "compile_schema", "schema_problem"]

_SELF = {"$ref": "#"}
_NON_NEGATIVE = {"$ref": "#/definitions/nonNegativeInteger"}
_NON_NEGATIVE_0 = {"$ref": "#/definitions/nonNegativeIntegerDefault0"}
_SCHEMA_ARRAY = {"$ref": "#/definitions/schemaArray"}
_SCHEMA_MAP = {"type": "object", "additionalProperties": _SELF, "default": {}}

META_SCHEMA: dict[str, Any] = {
    "title": "Core schema meta-schema",
    "definitions": {
        "schemaArray": {"type": "array", "minItems": 1, "items": _SELF},
        "nonNegativeInteger": {"type": "integer", "minimum": 0},
        "nonNegativeIntegerDefault0": {"allOf": [_NON_NEGATIVE, {"default": 0}]},
        "simpleTypes": {
            "enum": ["array", "boolean", "integer", "null", "number", "object", "string"]
        },
        "stringArray": {
            "type": "array",
            "items": {"type": "string"},
            "uniqueItems": True,
            "default": [],
        },
    },
    "type": ["object", "boolean"],
    "properties": {
        "$id": {"type": "string"},
        "$schema": {"type": "string"},
        "$ref": {"type": "string"},
        "$comment": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "default": True,
        "readOnly": {"type": "boolean", "default": False},
        "examples": {"type": "array", "items": True},
        "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "maximum": {"type": "number"},
        "exclusiveMaximum": {"type": "number"},
        "minimum": {"type": "number"},
        "exclusiveMinimum": {"type": "number"},
        "maxLength": _NON_NEGATIVE,
        "minLength": _NON_NEGATIVE_0,
        "pattern": {"type": "string", "format": "regex"},
        "additionalItems": _SELF,
        "items": {"anyOf": [_SELF, _SCHEMA_ARRAY], "default": True},
        "maxItems": _NON_NEGATIVE,
        "minItems": _NON_NEGATIVE_0,
        "uniqueItems": {"type": "boolean", "default": False},
        "contains": _SELF,
        "maxProperties": _NON_NEGATIVE,
        "minProperties": _NON_NEGATIVE_0,
        "required": {"$ref": "#/definitions/stringArray"},
        "additionalProperties": _SELF,
        "definitions": _SCHEMA_MAP,
        "properties": _SCHEMA_MAP,
        "patternProperties": {**_SCHEMA_MAP, "propertyNames": {"format": "regex"}},
        "dependencies": {
            "type": "object",
            "additionalProperties": {"anyOf": [_SELF, {"$ref": "#/definitions/stringArray"}]},
        },
        "propertyNames": _SELF,
        "const": True,
        "enum": {"type": "array", "items": True},
        "type": {
            "anyOf": [
                {"$ref": "#/definitions/simpleTypes"},
                {
                    "type": "array",
                    "items": {"$ref": "#/definitions/simpleTypes"},
                    "minItems": 1,
                    "uniqueItems": True,
                },
            ]
        },
        "format": {"type": "string"},
        "contentMediaType": {"type": "string"},
        "contentEncoding": {"type": "string"},
        "if": _SELF,
        "then": _SELF,
        "else": _SELF,
        "allOf": _SCHEMA_ARRAY,
        "anyOf": _SCHEMA_ARRAY,
        "oneOf": _SCHEMA_ARRAY,
        "not": _SELF,
    },
    "default": True,
}

_meta: list[Callable[[Any], Any]] = []
_COMPILED_LIMIT = 512
_compiled: OrderedDict[str, Callable[[Any], Any]] = OrderedDict()
_compiled_lock = threading.Lock()


def _key(schema: Any) -> str:
    # callers bound the depth first (check_value), so the recursive dumps cannot overflow
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _cached(key: str) -> Callable[[Any], Any] | None:
    with _compiled_lock:
        validator = _compiled.get(key)
        if validator is not None:
            _compiled.move_to_end(key)
        return validator


_MODULE_HEAD = (
    "# Generated by proctor.parser.schemas.meta_module_source(): the draft-07 meta-schema's\n"
    "# validator, as fastjsonschema writes it. Do not edit; tests/parser/test_schemas.py pins it.\n"
    "# ruff: noqa\n"
    "# type: ignore\n"
    "from decimal import Decimal  # compile() provides it; compile_to_code() leaves it out\n"
)


def meta_module_source() -> str:
    """The source of :mod:`proctor.parser._draft07_meta` for the installed fastjsonschema."""
    import fastjsonschema

    # use_default=False: the meta-schema's defaults must not be written into the schema
    return _MODULE_HEAD + fastjsonschema.compile_to_code(META_SCHEMA, use_default=False)


def _meta_validator() -> Callable[[Any], Any]:
    import fastjsonschema  # loaded lazily: it is not needed to start the CLI

    if not _meta:
        import importlib

        shipped: Any = importlib.import_module("proctor.parser._draft07_meta")
        if shipped.VERSION == fastjsonschema.VERSION:
            _meta.append(shipped.validate)
        else:
            _meta.append(fastjsonschema.compile(META_SCHEMA, use_default=False))
    return _meta[0]


def _reaches_outside(
    schema: Any, path: tuple[str | int, ...] = ()
) -> tuple[tuple[str | int, ...], str] | None:
    """Where ``schema`` names something outside itself (a ``$ref`` not starting ``#``, or an
    ``$id``), as ``(where, rule)``."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return (*path, "$ref"), "must point inside the schema ('#/...'): nothing is fetched"
        if isinstance(schema.get("$id"), str):
            return (*path, "$id"), "is not accepted: a schema's references resolve inside it"
        for key, value in schema.items():
            found = _reaches_outside(value, (*path, key))
            if found is not None:
                return found
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found = _reaches_outside(value, (*path, index))
            if found is not None:
                return found
    return None


# Keywords whose subschemas apply to the same value as the schema holding them (the rest
# descend into a property or an item first, so a reference loop through them always ends).
_SAME_VALUE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_ONE = ("not", "if", "then", "else")


def _pointer(schema: Any, ref: str) -> tuple[str | int, ...] | None:
    """The path a local ``$ref`` (``#``, ``#/a/b``) names inside ``schema``, else ``None``."""
    from urllib.parse import unquote

    if not ref.startswith("#"):
        return None
    fragment = unquote(ref[1:])
    if fragment == "":
        return ()
    if not fragment.startswith("/"):
        return None
    path: list[str | int] = []
    node = schema
    for raw in fragment[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            path.append(int(part))
            node = node[int(part)]
        else:
            return None
    return tuple(path)


def _at(schema: Any, path: tuple[str | int, ...]) -> Any:
    node = schema
    for part in path:
        node = node[part]
    return node


def _same_value(schema: Any, path: tuple[str | int, ...]) -> list[tuple[str | int, ...]]:
    """The subschemas that validate the same value as the one at ``path`` (its ``$ref``
    target, its ``allOf``/``anyOf``/``oneOf`` entries, ``not``/``if``/``then``/``else`` and
    ``dependencies`` given as schemas)."""
    node = _at(schema, path)
    if not isinstance(node, dict):
        return []
    out: list[tuple[str | int, ...]] = []
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _pointer(schema, ref)
        if target is not None:
            out.append(target)
    for key in _SAME_VALUE_LISTS:
        if isinstance(node.get(key), list):
            out.extend((*path, key, index) for index in range(len(node[key])))
    out.extend((*path, key) for key in _SAME_VALUE_ONE if key in node)
    dependencies = node.get("dependencies")
    if isinstance(dependencies, dict):
        out.extend(
            (*path, "dependencies", name)
            for name, value in dependencies.items()
            if isinstance(value, dict)
        )
    return out


def _reference_loop(schema: Any) -> tuple[str | int, ...] | None:
    """Where a ``$ref`` leads back to a schema applied to the same value without descending
    into it (``{$ref: '#'}``, or through ``allOf`` and the like): the generated validator
    would call itself until Python's stack runs out. Found without recursion."""
    state: dict[tuple[str | int, ...], int] = {}  # 1 on the current path, 2 finished
    for start in [(), *_all_paths(schema)]:
        if start in state:
            continue
        stack = [(start, iter(_same_value(schema, start)))]
        state[start] = 1
        while stack:
            path, successors = stack[-1]
            following = next(successors, None)
            if following is None:
                state[path] = 2
                stack.pop()
            elif state.get(following) == 1:
                return path
            elif following not in state:
                state[following] = 1
                stack.append((following, iter(_same_value(schema, following))))
    return None


def _all_paths(schema: Any) -> list[tuple[str | int, ...]]:
    """Every path of a mapping inside ``schema`` (the depth is bounded by then)."""
    out: list[tuple[str | int, ...]] = []
    pending: list[tuple[tuple[str | int, ...], Any]] = [((), schema)]
    while pending:
        path, node = pending.pop()
        if isinstance(node, dict):
            if path:
                out.append(path)
            pending.extend(((*path, key), value) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend(((*path, index), value) for index, value in enumerate(node))
    return out


def _refuse_remote(uri: str) -> Any:
    raise ValueError("a schema's references resolve inside it; nothing is fetched")


# Belt and braces: were a remote reference to get past _reaches_outside, fastjsonschema calls
# these instead of fetching it (for the schemes it would otherwise open itself).
_NO_FETCH = {scheme: _refuse_remote for scheme in ("http", "https", "file", "ftp", "data")}


def schema_problem(
    schema: Any, *, compile: bool = False
) -> tuple[tuple[str | int, ...], str] | None:
    """Why ``schema`` is not a usable draft-07 JSON Schema, as ``(where, rule)``; else ``None``.

    ``where`` is the path of keys and indexes inside the schema, empty at its top. With
    ``compile``, a schema without a problem is also compiled and kept, as
    :func:`compile_schema` does, without checking it a second time.

    Raises:
        ParseError: (only with ``compile``) as :func:`compile_schema`, when the schema passes
            the checks but cannot be compiled.
    """
    problem, key = _problem(schema)
    if compile and problem is None:
        _compile(schema, key, "the schema")
    return problem


def _problem(schema: Any) -> tuple[tuple[tuple[str | int, ...], str] | None, str]:
    """The problem of ``schema`` (as :func:`schema_problem`) and its cache key ("" when the
    schema nests too deep to have one)."""
    import fastjsonschema

    try:
        check_value(schema, source="the schema")
    except ParseError:
        return ((), "nests deeper than 64 levels"), ""
    outside = _reaches_outside(schema)
    if outside is not None:
        return outside, ""
    key = _key(schema)  # the depth is bounded now, so the recursive dumps cannot overflow
    if _cached(key) is not None:
        return None, key  # it passed this check when it was compiled
    loop = _reference_loop(schema)
    if loop is not None:
        rule = "leads back to itself without descending into the value: validating never ends"
        return (loop, rule), key
    try:
        _meta_validator()(schema)
    except fastjsonschema.JsonSchemaValueException as exc:
        # exc.path is ["data", key, ...] and the message starts with exc.name ("data.x"): the
        # rest names the meta-schema's rule ("must be object"), never a value of the schema.
        tail = str(exc.message).removeprefix(str(exc.name)).strip()
        return (tuple(exc.path[1:]), tail or "breaks the meta-schema"), key
    return None, key


def compile_schema(schema: Any, *, what: str = "the schema") -> Callable[[Any], Any]:
    """Check ``schema`` against the draft-07 meta-schema, then compile it into a validator
    (once per process for each distinct schema; a refused schema is never kept).

    Raises:
        ParseError: ``schema_invalid`` naming where in the schema the rule broke.
    """
    problem, key = _problem(schema)
    if problem is not None:
        path, rule = problem
        where = ".".join(str(part) for part in path)
        raise ParseError(
            f"{what} is not a valid JSON Schema: {where or 'it'} {rule}",
            code="schema_invalid",
            details={"path": where},
        )
    return _compile(schema, key, what)


def _compile(schema: Any, key: str, what: str) -> Callable[[Any], Any]:
    """The validator of ``schema``, which :func:`_problem` passed (``key`` is its cache key):
    the one held, else compiled and kept."""
    import fastjsonschema

    held = _cached(key)
    if held is not None:
        return held
    try:
        compiled: Callable[[Any], Any] = fastjsonschema.compile(schema, handlers=_NO_FETCH)
    # fastjsonschema fails with whatever Python raises on a shape it did not expect, and its
    # regex compiles raise re.error: every exception of the compile is a schema it cannot use.
    except Exception as exc:
        raise ParseError(
            f"{what} is not a valid JSON Schema ({type(exc).__name__})", code="schema_invalid"
        ) from None
    with _compiled_lock:
        _compiled[key] = compiled
        while len(_compiled) > _COMPILED_LIMIT:
            _compiled.popitem(last=False)
    return compiled

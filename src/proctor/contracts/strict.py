"""Strict, frozen records validated from JSON-like data, without importing a model library.

The documents ``proctor run`` reads and writes on every start (``run.yaml``'s profile, the run
envelope, the resume document, connector manifests) are records deriving from :class:`Record`:
slotted classes whose annotated fields are set by keyword, frozen unless declared otherwise.
:meth:`Record.model_validate` checks a mapping against the class's annotations; the checker is
built the first time a class is validated and cached, so importing a contract costs a class
definition, not a schema compilation. What it enforces, the same for every record:

- strict types: a ``str`` is a ``str``, an ``int`` is an ``int`` and never a ``bool``, a ``bool``
  is a ``bool``, a list is a ``list``, a mapping is a ``dict`` with ``str`` keys; ``Any`` takes any
  value as read;
- no unknown keys (``extra_forbidden``), every field without a default present (``missing``);
- the rules of :class:`Rule` given with ``Annotated``: pattern, length and bounds;
- ``Literal`` values, optional (``X | None``) fields, nested records, ``dict[K, V]`` with checked
  keys, and unions of records told apart by a :class:`Choice` function;
- a record's own invariants, from its ``_check`` hook, which runs in ``__post_init__`` so a record
  built any other way holds them too.

The first failure raises :class:`StrictError` naming where (``loc``, the path of keys and indexes
into the data), what kind of failure (``kind``) and a message that never quotes the value.
:func:`json_schema` describes a record class as a JSON Schema (draft 2020-12 subset), for
documents that publish one (the MCP output schema of a run).
"""

from __future__ import annotations

import json
import operator
import re
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar, Union

__all__ = ["Choice", "Record", "Rule", "StrictError", "field", "json_schema"]

Loc = tuple[int | str, ...]
R = TypeVar("R", bound="Record")
_MAX_SAFE = 2**63


class StrictError(ValueError):
    """A value that does not fit its record: ``loc`` (where), ``kind`` (``missing``,
    ``extra_forbidden``, ``type``, ``value``, ``choice``) and a message without the value.

    ``from_validator`` is true when the message is a record's own check's (``_check``,
    ``_check_data``) rather than this module's fixed wording: such a message is shown as data
    the error quotes, so a check that ever names a value still has it withheld when the
    value looks secret.
    """

    def __init__(self, loc: Loc, kind: str, message: str, *, from_validator: bool = False) -> None:
        super().__init__(message)
        self.loc = loc
        self.kind = kind
        self.message = message
        self.from_validator = from_validator


class Rule:
    """Constraints on a field's value, given as ``Annotated[str, Rule(pattern=...)]``; ``alias``
    is the key the field is read from and written to when it differs from its name."""

    __slots__ = ("alias", "ge", "le", "max_length", "min_length", "pattern")

    def __init__(
        self,
        *,
        pattern: str | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        ge: int | None = None,
        le: int | None = None,
        alias: str | None = None,
    ) -> None:
        self.pattern = pattern
        self.min_length = min_length
        self.max_length = max_length
        self.ge = ge
        self.le = le
        self.alias = alias


class Choice:
    """How a union of records picks its member: ``pick(value)`` returns a tag of ``tags`` (one
    per member, in order) or ``None``, refused with ``message``."""

    __slots__ = ("message", "pick", "tags")

    def __init__(
        self, pick: Callable[[Any], str | None], tags: tuple[str, ...], message: str
    ) -> None:
        self.pick = pick
        self.tags = tags
        self.message = message


Check = Callable[[Any, Loc], Any]


_MISSING: Any = object()
_put = object.__setattr__  # a field's slot, set past a frozen record's own __setattr__
_CHECKERS: dict[type, _Fields] = {}


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made fresh for each record (a list, a mapping, a record)."""
    return _Factory(default_factory)


@typing.dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
class _RecordType(type):
    """Builds a record class: its annotated names become slots, their class values defaults.

    No code is generated per class (what makes ``dataclasses`` cost a millisecond a class):
    one ``__init__`` serves every record, reading the field list this sets.
    """

    def __new__(
        mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any], *, frozen: bool = True
    ) -> _RecordType:
        own = [
            key
            for key, hint in ns.get("__annotations__", {}).items()
            if not str(hint).startswith(("ClassVar", "typing.ClassVar"))
        ]
        defaults = {key: ns.pop(key) for key in own if key in ns}
        ns["__slots__"] = tuple(own)
        cls = super().__new__(mcs, name, bases, ns)
        fields: list[str] = []
        inherited: dict[str, Any] = {}
        for base in reversed(cls.__mro__[1:]):
            for key in getattr(base, "_record_own", ()):
                if key not in fields:
                    fields.append(key)
            inherited.update(getattr(base, "_record_own_defaults", {}))
        fields.extend(key for key in own if key not in fields)
        type.__setattr__(cls, "_record_own", tuple(own))
        type.__setattr__(cls, "_record_own_defaults", defaults)
        type.__setattr__(cls, "_record_fields", tuple(fields))
        type.__setattr__(cls, "_record_defaults", {**inherited, **defaults})
        type.__setattr__(cls, "_record_frozen", frozen)
        # whether a record of the class has invariants of its own to check once built
        record: Any = globals().get("Record")  # None while Record itself is made
        checked = record is not None and typing.cast(Any, cls)._check is not record._check
        type.__setattr__(cls, "_record_checked", checked)
        return cls

    def __init__(
        cls, name: str, bases: tuple[type, ...], ns: dict[str, Any], *, frozen: bool = True
    ) -> None:
        super().__init__(name, bases, ns)


class Record(metaclass=_RecordType):
    """Base of a strict record: annotate its fields in the class body (values are defaults,
    :func:`field` makes a fresh one per record). Frozen unless declared ``frozen=False``;
    built by keyword only."""

    _record_fields: ClassVar[tuple[str, ...]]
    _record_defaults: ClassVar[dict[str, Any]]
    _record_frozen: ClassVar[bool]
    _record_checked: ClassVar[bool]

    def __init__(self, **values: Any) -> None:
        cls = type(self)
        pop, put = values.pop, _put
        for name in cls._record_fields:
            value = pop(name, _MISSING)
            if value is _MISSING:
                value = cls._record_defaults.get(name, _MISSING)
                if value is _MISSING:
                    raise TypeError(f"{cls.__name__} needs {name}")
                if type(value) is _Factory:
                    value = value.make()
            put(self, name, value)
        if values:
            raise TypeError(f"{cls.__name__} has no field {next(iter(values))}")
        if not cls._record_checked:  # no _check of its own: nothing to hold
            return
        try:
            self._check()
        except ValueError as exc:
            if isinstance(exc, StrictError):
                raise
            raise StrictError((), "value", str(exc), from_validator=True) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self)._record_frozen:
            raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__}: cannot delete {name}")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in type(self)._record_fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        if not type(self)._record_frozen:
            raise TypeError(f"unhashable record: {type(self).__name__}")
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self)._record_fields)
        return f"{type(self).__name__}({parts})"

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in type(self)._record_fields}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def _check(self) -> None:
        """A record's own invariants across fields; raise ``ValueError`` to refuse."""

    @classmethod
    def _check_data(cls, data: dict[Any, Any]) -> None:
        """Invariants of the data as given (which keys are present, where a value may be
        ``None``) that the built record cannot tell; raise ``ValueError`` to refuse."""

    @classmethod
    def model_validate(cls: type[R], data: Any) -> R:
        """The record ``data`` describes, checked strictly.

        Raises:
            StrictError: the first value that does not fit, with its path.
        """
        return typing.cast(R, _fields(cls).build(data, ()))

    def model_dump(self, *, mode: str = "json", exclude_none: bool = False) -> dict[str, Any]:
        """The record as plain data (nested records as mappings, tuples as lists), keyed by
        alias; ``exclude_none`` leaves out the fields of records (at any depth) that are
        ``None``. ``mode`` is accepted for callers written for models of either kind."""
        out: dict[str, Any] = {}
        fields = _fields(type(self))
        leaves = _LEAVES
        for key, value in zip(fields.order, fields.values(self), strict=True):
            if type(value) in leaves:  # most values, dumped as they are
                if value is None and exclude_none:
                    continue
                out[key] = value
            else:
                out[key] = _dump(value, exclude_none)
        return out

    def model_dump_json(self, *, exclude_none: bool = False) -> str:
        """:meth:`model_dump` as compact JSON text (UTF-8 kept as is)."""
        return json.dumps(
            self.model_dump(exclude_none=exclude_none), ensure_ascii=False, separators=(",", ":")
        )

    def model_copy(self: R, *, update: dict[str, Any]) -> R:
        """A copy with the fields in ``update`` replaced (invariants checked again)."""
        return type(self)(**{**self.__getstate__(), **update})


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _dump(value: Any, exclude_none: bool) -> Any:
    kind = type(value)
    if kind in _LEAVES:  # most values: a dump is a walk of plain JSON
        return value
    if kind is dict:
        return {key: _dump(item, exclude_none) for key, item in value.items()}
    if kind is list:
        return [_dump(item, exclude_none) for item in value]
    if isinstance(value, Record):
        return value.model_dump(exclude_none=exclude_none)
    if isinstance(value, list | tuple):
        return [_dump(item, exclude_none) for item in value]
    if isinstance(value, dict):
        return {key: _dump(item, exclude_none) for key, item in value.items()}
    return value


class _Spec:
    __slots__ = ("check", "key", "name", "required")

    def __init__(self, name: str, key: str, check: Check, required: bool) -> None:
        self.name = name
        self.key = key
        self.check = check
        self.required = required


class _Fields:
    __slots__ = ("cls", "keys", "order", "specs", "values")

    def __init__(self, cls: type[Record], specs: list[_Spec], keys: frozenset[str]) -> None:
        self.cls = cls
        self.specs = specs
        self.keys = keys
        self.order = tuple(spec.key for spec in specs)
        """The keys of a dump, in the fields' order."""
        names = [spec.name for spec in specs]
        self.values: Callable[[Any], tuple[Any, ...]] = (
            operator.attrgetter(*names)
            if len(names) > 1
            else lambda record: tuple(getattr(record, name) for name in names)
        )
        """A record's field values, in the fields' order (one call for them all)."""

    def build(self, data: Any, loc: Loc) -> Any:
        if isinstance(data, self.cls):
            return data
        if not isinstance(data, dict):
            raise StrictError(loc, "type", "Input should be a valid dictionary or object")
        try:
            self.cls._check_data(data)
        except ValueError as exc:
            raise StrictError(loc, "value", str(exc), from_validator=True) from None
        values: dict[str, Any] = {}
        for spec in self.specs:
            if spec.key in data:
                values[spec.name] = spec.check(data[spec.key], (*loc, spec.key))
            elif spec.required:
                raise StrictError((*loc, spec.key), "missing", "Field required")
        for key in data:
            if key not in self.keys:
                where = key if isinstance(key, str) else str(key)
                raise StrictError(
                    (*loc, where), "extra_forbidden", "Extra inputs are not permitted"
                )
        try:
            return self.cls(**values)
        except StrictError as exc:
            raise StrictError(
                (*loc, *exc.loc), exc.kind, exc.message, from_validator=exc.from_validator
            ) from None


def _fields(cls: type[Record]) -> _Fields:
    found = _CHECKERS.get(cls)
    if found is None:
        found = _compile(cls)
        _CHECKERS[cls] = found
    return found


def _compile(cls: type[Record]) -> _Fields:
    hints = typing.get_type_hints(cls, include_extras=True)
    specs: list[_Spec] = []
    for name in cls._record_fields:
        hint = hints[name]
        rule = _rule_of(hint)
        key = rule.alias if rule is not None and rule.alias else name
        required = name not in cls._record_defaults
        specs.append(_Spec(name, key, _checker(hint), required))
    return _Fields(cls, specs, frozenset(s.key for s in specs))


def _rule_of(hint: Any) -> Rule | None:
    if typing.get_origin(hint) is typing.Annotated:
        return next((m for m in hint.__metadata__ if isinstance(m, Rule)), None)
    return None


def _checker(hint: Any) -> Check:
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(hint)
        choice = next((m for m in meta if isinstance(m, Choice)), None)
        if choice is not None:
            return _union_checker(typing.get_args(base), choice)
        inner = _checker(base)
        rule = next((m for m in meta if isinstance(m, Rule)), None)
        return inner if rule is None else _ruled(inner, rule)
    if hint is Any:
        return lambda value, loc: value
    if origin in (Union, types.UnionType):
        members = typing.get_args(hint)
        rest = [m for m in members if m is not type(None)]
        if len(rest) == 1 and len(members) == 2:
            check = _checker(rest[0])
            return lambda value, loc: None if value is None else check(value, loc)
        raise TypeError(f"unsupported union {hint!r}: give it a Choice")
    if origin is Literal:
        allowed = typing.get_args(hint)
        text = " or ".join(", ".join(repr(a) for a in allowed).rsplit(", ", 1))
        return lambda value, loc: _literal(value, loc, allowed, text)
    if origin is list:
        (item,) = typing.get_args(hint)
        return _list_checker(_checker(item), tuple_out=False)
    if origin is tuple:
        item, _ellipsis = typing.get_args(hint)
        return _list_checker(_checker(item), tuple_out=True)
    if origin is dict:
        key, item = typing.get_args(hint)
        return _dict_checker(_checker(key), _checker(item))
    if isinstance(hint, type) and issubclass(hint, Record):
        return lambda value, loc: _fields(hint).build(value, loc)
    simple = _SIMPLE.get(hint)
    if simple is not None:
        return simple
    raise TypeError(f"unsupported annotation {hint!r}")


def _literal(value: Any, loc: Loc, allowed: tuple[Any, ...], text: str) -> Any:
    for option in allowed:
        if type(value) is type(option) and value == option:
            return value
    raise StrictError(loc, "value", f"Input should be {text}")


def _str(value: Any, loc: Loc) -> str:
    if type(value) is not str:
        raise StrictError(loc, "type", "Input should be a valid string")
    return value


def _int(value: Any, loc: Loc) -> int:
    if type(value) is not int:
        raise StrictError(loc, "type", "Input should be a valid integer")
    if not -_MAX_SAFE <= value < _MAX_SAFE:
        raise StrictError(loc, "value", "Input should be a 64-bit integer")
    return value


def _bool(value: Any, loc: Loc) -> bool:
    if type(value) is not bool:
        raise StrictError(loc, "type", "Input should be a valid boolean")
    return value


_SIMPLE: dict[Any, Check] = {str: _str, int: _int, bool: _bool}


def _list_checker(item: Check, *, tuple_out: bool) -> Check:
    def check(value: Any, loc: Loc) -> Any:
        if type(value) is not list and not (tuple_out and type(value) is tuple):
            raise StrictError(loc, "type", "Input should be a valid list")
        out = [item(element, (*loc, index)) for index, element in enumerate(value)]
        return tuple(out) if tuple_out else out

    return check


def _dict_checker(key: Check, item: Check) -> Check:
    def check(value: Any, loc: Loc) -> dict[Any, Any]:
        if type(value) is not dict:
            raise StrictError(loc, "type", "Input should be a valid dictionary")
        out: dict[Any, Any] = {}
        for name, element in value.items():
            where = (*loc, name if isinstance(name, str) else str(name))
            out[key(name, where)] = item(element, where)
        return out

    return check


def _ruled(inner: Check, rule: Rule) -> Check:
    pattern = None if rule.pattern is None else re.compile(_end_anchored(rule.pattern))

    def check(value: Any, loc: Loc) -> Any:
        value = inner(value, loc)
        if value is None:
            return None
        if isinstance(value, str):
            what, unit = "String", "character"
        elif isinstance(value, list | tuple | dict):
            what, unit = ("Dictionary" if isinstance(value, dict) else "List"), "item"
        else:
            what = unit = ""
        if what:
            size = len(value)
            if rule.min_length is not None and size < rule.min_length:
                raise StrictError(
                    loc, "value", f"{what} should have at least {_n(rule.min_length, unit)}"
                )
            if rule.max_length is not None and size > rule.max_length:
                raise StrictError(
                    loc, "value", f"{what} should have at most {_n(rule.max_length, unit)}"
                )
        if pattern is not None and isinstance(value, str) and not pattern.search(value):
            raise StrictError(loc, "value", f"String should match pattern '{rule.pattern}'")
        if isinstance(value, int) and not isinstance(value, bool):
            if rule.ge is not None and value < rule.ge:
                raise StrictError(
                    loc, "value", f"Input should be greater than or equal to {rule.ge}"
                )
            if rule.le is not None and value > rule.le:
                raise StrictError(loc, "value", f"Input should be less than or equal to {rule.le}")
        return value

    return check


def _end_anchored(pattern: str) -> str:
    # A pattern's closing ``$`` means the end of the text: Python's ``$`` also matches before a
    # final newline, which would let ``"name\n"`` pass as a name.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + "\\Z"
    return pattern


def _n(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def _union_checker(members: tuple[Any, ...], choice: Choice) -> Check:
    by_tag: dict[str, Check] = {}

    def check(value: Any, loc: Loc) -> Any:
        if not by_tag:
            for name, member in zip(choice.tags, members, strict=True):
                by_tag[name] = _checker(member)
        tag = choice.pick(value)
        if tag is None or tag not in by_tag:
            raise StrictError(loc, "choice", choice.message)
        return by_tag[tag](value, (*loc, tag))

    return check


def json_schema(cls: type[Record]) -> dict[str, Any]:
    """A JSON Schema of ``cls``: nested records inline, every key of a record listed, optional
    fields as ``anyOf`` with ``null``, unknown keys refused."""
    return _schema_of_record(cls)


def _schema_of_record(cls: type[Record]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name in cls._record_fields:
        rule = _rule_of(hints[name])
        key = rule.alias if rule is not None and rule.alias else name
        schema = _schema_of(hints[name])
        default = cls._record_defaults.get(name, _MISSING)
        if default is not _MISSING and isinstance(default, str | int | bool | None):
            schema = {**schema, "default": default}
        properties[key] = schema
        if default is _MISSING:
            required.append(key)
    out: dict[str, Any] = {
        "title": cls.__name__,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        out["required"] = required
    return out


def _schema_of(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(hint)
        schema = _schema_of(base)
        for m in meta:
            if isinstance(m, Rule):
                extra = {
                    "pattern": m.pattern,
                    "minLength" if base is str else "minItems": m.min_length,
                    "maxLength" if base is str else "maxItems": m.max_length,
                    "minimum": m.ge,
                    "maximum": m.le,
                }
                schema.update({k: v for k, v in extra.items() if v is not None})
        return schema
    if hint is Any:
        return {}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema_of(m) for m in typing.get_args(hint)]}
    if hint is type(None):
        return {"type": "null"}
    if origin is Literal:
        return {"enum": list(typing.get_args(hint))}
    if origin in (list, tuple):
        return {"type": "array", "items": _schema_of(typing.get_args(hint)[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(typing.get_args(hint)[1])}
    if isinstance(hint, type) and issubclass(hint, Record):
        return _schema_of_record(hint)
    names = {str: "string", int: "integer", bool: "boolean", float: "number"}
    if hint in names:
        return {"type": names[hint]}
    raise TypeError(f"unsupported annotation {hint!r}")

"""Value classes: the part of :mod:`dataclasses` proctor uses, at a fraction of its start-up cost.

The standard decorator compiles five or six methods per class from source text when the class is
defined (about 0.5 ms a class on our machines) and imports :mod:`inspect` with :mod:`ast` and
:mod:`dis`; a ``proctor run`` defines some fifty classes it may never build. :func:`dataclass`
here keeps the same declarations (annotated fields, :func:`field` for a default, a factory or a
field left out of ``repr`` or comparison; ``frozen`` and ``slots``) and the same behaviour for
what proctor does with them:

- ``__init__`` takes the fields in order, positionally or by keyword, with their defaults; the
  first values of a class are built by a stand-in that binds the arguments itself, and only a
  class built more often than that has its ``__init__`` compiled from source (never when it is
  defined);
- ``__eq__`` compares two values of the same class field by field (``NotImplemented`` for any
  other class); ``__repr__`` shows ``Name(field=value, ...)``;
- a frozen class refuses to set or delete a field after ``__init__``
  (:class:`FrozenInstanceError`, an ``AttributeError``) and hashes by its compared fields; a class
  that is not frozen is unhashable, unless it defines ``__hash__`` itself;
- a method the class body defines itself (``__init__``, ``__repr__``, ``__eq__``) is kept;
- :func:`replace` and :func:`asdict` work as their namesakes do, and the standard module's own
  ``fields``, ``asdict``, ``astuple``, ``replace`` and ``is_dataclass`` accept these values too
  (their ``__dataclass_fields__`` is made the first time something reads it).

Refused when the class is defined (``TypeError`` or ``ValueError``, as the standard decorator
does): a field without a default after one with a default, a mutable default (a ``list``,
``dict`` or ``set``: use ``default_factory``), both a default and a factory, a frozen class
deriving from one that is not or the reverse, a frozen class defining ``__setattr__`` or
``__delattr__``, and ``InitVar`` or ``KW_ONLY`` annotations (proctor declares none).
"""

from __future__ import annotations

import builtins
from _thread import get_ident
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, dataclass_transform, overload

__all__ = ["Field", "FrozenInstanceError", "asdict", "dataclass", "field", "fields", "replace"]

T = TypeVar("T")
_FIELDS = "__value_fields__"
_PARAMS = "__value_frozen__"


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
_FACTORY: Any = type("_Factory", (), {"__slots__": (), "__repr__": lambda self: "<factory>"})()


class FrozenInstanceError(AttributeError):
    """A field of a frozen value set or deleted after it was built."""


class Field:
    """One field of a value class: its name, default or factory, and whether ``repr`` shows it
    and ``==`` and ``hash`` read it."""

    __slots__ = ("compare", "default", "default_factory", "init", "name", "repr")

    def __init__(
        self,
        default: Any,
        default_factory: Any,
        repr: bool,
        compare: bool,
        init: bool = True,
        name: str = "",
    ) -> None:
        self.name = name
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.init = init

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r})"


def field(
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    repr: bool = True,
    compare: bool = True,
    init: bool = True,
) -> Any:
    """A field's declaration beyond its annotation: its default, or the factory called for a
    fresh default per value; ``repr=False`` leaves it out of ``repr``, ``compare=False`` out of
    ``==`` and ``hash``, ``init=False`` out of ``__init__``'s parameters (it starts at its
    default).

    Raises:
        ValueError: both a default and a factory given.
    """
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, repr, compare, init)


@overload
def dataclass(cls: type[T], /) -> type[T]: ...
@overload
def dataclass(*, frozen: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field, Field))
def dataclass(
    cls: type[T] | None = None, /, *, frozen: bool = False, slots: bool = False
) -> type[T] | Callable[[type[T]], type[T]]:
    """Make ``cls`` a value class (see the module docstring); used bare or with options."""

    def wrap(target: type[T]) -> type[T]:
        return _process(target, frozen, slots)

    return wrap if cls is None else wrap(cls)


def fields(value: Any) -> tuple[Field, ...]:
    """The fields of a value class or of a value, in ``__init__`` order.

    Raises:
        TypeError: not a value class or value.
    """
    found = getattr(value, _FIELDS, None)
    if found is None:
        raise TypeError("must be called with a value class or a value of one")
    return found  # type: ignore[no-any-return]


def is_value(value: Any) -> bool:
    """Whether ``value`` is a value (an instance of a value class, not the class)."""
    return not isinstance(value, type) and hasattr(type(value), _FIELDS)


def _replace(value: T, /, **changes: Any) -> T:
    """A new value of the same class, with ``changes`` in place of those fields.

    Raises:
        TypeError: ``value`` is not a value, or a change names no field.
    """
    for each in fields(type(value)):
        if each.name not in changes:
            changes[each.name] = getattr(value, each.name)
    return type(value)(**changes)


if TYPE_CHECKING:
    # The type checker reads replace() as the standard one, whose changes it checks against
    # the class's fields (names and types); at run time it is the function above.
    from dataclasses import replace as replace
else:
    replace = _replace


def asdict(value: Any) -> dict[str, Any]:
    """The fields of ``value`` as a ``dict``, nested values, lists, tuples and mappings converted
    the same way and every other leaf deep-copied.

    Raises:
        TypeError: ``value`` is not a value.
    """
    if not is_value(value):
        raise TypeError("asdict() should be called on value instances")
    return _as_plain(value)  # type: ignore[no-any-return]


_PLAIN = (str, int, float, bool, bytes, type(None))


def _as_plain(obj: Any) -> Any:
    if type(obj) in _PLAIN:
        return obj
    if is_value(obj):
        return {f.name: _as_plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_as_plain(item) for item in obj])
    if isinstance(obj, list | tuple):
        return type(obj)(_as_plain(item) for item in obj)
    if isinstance(obj, dict):
        return type(obj)((_as_plain(k), _as_plain(v)) for k, v in obj.items())
    import copy

    return copy.deepcopy(obj)


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar", "t.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


def _own_fields(cls: type) -> list[Field]:
    out: list[Field] = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if _is_classvar(annotation):
            continue
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if "InitVar" in text or "KW_ONLY" in text:
            raise TypeError(f"{cls.__name__}.{name}: InitVar and KW_ONLY are not supported")
        declared = cls.__dict__.get(name, MISSING)
        if isinstance(declared, Field):
            declared.name = name
            each = declared
        else:
            each = Field(declared, MISSING, True, True, True, name)
        if each.default is not MISSING and type(each.default).__hash__ is None:
            raise ValueError(
                f"mutable default {type(each.default)} for field {name} is not allowed: "
                "use default_factory"
            )
        out.append(each)
    return out


def _process(cls: type[T], frozen: bool, slots: bool) -> type[T]:
    collected: dict[str, Field] = {}
    bases_frozen: set[bool] = set()
    for base in cls.__mro__[-1:0:-1]:
        inherited = base.__dict__.get(_FIELDS)
        if inherited is not None:
            bases_frozen.add(base.__dict__[_PARAMS])
            collected.update((f.name, f) for f in inherited)
    if bases_frozen and bases_frozen != {frozen}:
        raise TypeError(
            "cannot inherit non-frozen dataclass from a frozen one"
            if not frozen
            else "cannot inherit frozen dataclass from a non-frozen one"
        )
    own = _own_fields(cls)
    collected.update((f.name, f) for f in own)
    ordered = tuple(collected.values())
    seen_default = False
    for each in ordered:
        if not each.init:
            continue
        has_default = each.default is not MISSING or each.default_factory is not MISSING
        if seen_default and not has_default:
            raise TypeError(f"non-default argument {each.name!r} follows default argument")
        seen_default = seen_default or has_default
    for each in own:
        if slots or each.default is MISSING:
            if each.name in cls.__dict__:
                delattr(cls, each.name)  # a slot's default, or a Field, lives in __init__
        else:
            setattr(cls, each.name, each.default)  # a Field's plain default, as a class value
    if frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in cls.__dict__:
                raise TypeError(f"cannot overwrite attribute {name} in class {cls.__name__}")
    explicit_hash = "__hash__" in cls.__dict__ and not (
        cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__
    )
    if slots:
        cls = _with_slots(cls, ordered)
    _put(cls, _FIELDS, ordered)
    _put(cls, _PARAMS, frozen)
    _put(cls, "__dataclass_fields__", _StandardFields())
    if "__match_args__" not in cls.__dict__:
        _put(cls, "__match_args__", tuple(f.name for f in ordered if f.init))
    _methods(cls, ordered, frozen, explicit_hash)
    return cls


def _with_slots(cls: type[T], ordered: tuple[Field, ...]) -> type[T]:
    """``cls`` made again with a slot per field it adds (the standard decorator does the same)."""
    body = dict(cls.__dict__)
    inherited = {name for base in cls.__mro__[1:-1] for name in getattr(base, "__slots__", ())}
    body["__slots__"] = tuple(f.name for f in ordered if f.name not in inherited)
    for name in (*body["__slots__"], "__dict__", "__weakref__"):
        body.pop(name, None)
    maker: Any = type(cls)
    made: type[T] = maker(cls.__name__, cls.__bases__, body)
    made.__qualname__ = cls.__qualname__
    return made


class _StandardFields:
    """A value class's ``__dataclass_fields__``: the standard module's fields, made the first
    time it is read (by ``dataclasses.fields``, ``asdict``, ``astuple``, ``replace`` or
    ``is_dataclass``; the standard module is imported then, by whoever asks). Each value class
    holds its own, so a subclass never answers with its base's fields."""

    def __get__(self, value: Any, owner: type) -> dict[str, Any]:
        import dataclasses

        notes: dict[str, Any] = {}
        for klass in reversed(owner.__mro__):
            notes.update(klass.__dict__.get("__annotations__", {}))  # noqa: RUF063
        made: dict[str, Any] = {}
        make: Any = dataclasses.field
        for each in owner.__dict__[_FIELDS]:
            missing = dataclasses.MISSING
            standard = make(
                default=missing if each.default is MISSING else each.default,
                default_factory=(
                    missing if each.default_factory is MISSING else each.default_factory
                ),
                init=each.init,
                repr=each.repr,
                compare=each.compare,
            )
            standard.name, standard.type = each.name, notes.get(each.name, Any)
            standard._field_type = dataclasses._FIELD  # type: ignore[attr-defined]
            made[each.name] = standard
        _put(owner, "__dataclass_fields__", made)
        return made


def _put(cls: type, name: str, value: Any) -> None:
    type.__setattr__(cls, name, value)


def _methods(cls: type, ordered: tuple[Field, ...], frozen: bool, explicit_hash: bool) -> None:
    compared = tuple(f.name for f in ordered if f.compare)
    key = _getter(compared)
    if "__init__" not in cls.__dict__:
        _put(cls, "__init__", _lazy_init(cls))
    if "__repr__" not in cls.__dict__:
        _put(cls, "__repr__", _repr_of(tuple(f.name for f in ordered if f.repr)))

        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return key(self) == key(other)
            return NotImplemented

        _put(cls, "__eq__", __eq__)
    if not explicit_hash:
        if frozen:

            def __hash__(self: Any) -> int:
                return hash(key(self))

            _put(cls, "__hash__", __hash__)
        else:
            _put(cls, "__hash__", None)
    if frozen:
        _freeze(cls, frozenset(f.name for f in ordered))


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function from a value to the tuple of those fields (always a tuple)."""
    if not names:
        return lambda value: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda value: (one(value),)
    return attrgetter(*names)


_IN_REPR: set[tuple[int, int]] = set()  # (thread, value) pairs whose repr is being made


def _repr_of(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        key = (get_ident(), id(self))
        if key in _IN_REPR:
            return "..."
        _IN_REPR.add(key)
        try:
            shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        finally:
            _IN_REPR.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _freeze(cls: Any, names: frozenset[str]) -> None:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    _put(cls, "__setattr__", __setattr__)
    _put(cls, "__delattr__", __delattr__)
    if "__slots__" in cls.__dict__ and "__setstate__" not in cls.__dict__:
        _put(cls, "__getstate__", _slots_getstate)
        _put(cls, "__setstate__", _slots_setstate)


def _slots_getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in fields(self)]


def _slots_setstate(self: Any, state: list[Any]) -> None:
    for each, value in zip(fields(self), state, strict=True):
        object.__setattr__(self, each.name, value)


#: How many values of a class its stand-in ``__init__`` builds itself before the compiled one
#: takes its place. Compiling costs about 150 µs a class, some hundred builds by the stand-in
#: (about 1.5 µs a build against 0.7 µs compiled); a ``proctor run`` builds most of its classes
#: fewer than ten times, a served call a few over and over.
BUILDS_BEFORE_COMPILE = 16
_UNSET: Any = _Missing()


def _lazy_init(cls: type) -> Callable[..., None]:
    """A stand-in ``__init__`` for ``cls``: it binds the arguments itself for the class's first
    :data:`BUILDS_BEFORE_COMPILE` values, then compiles the real one and puts it in its place.

    The stand-in does what the compiled ``__init__`` does, in the same order (fields set in
    declaration order, each factory called at its field, then ``__post_init__``). Arguments it
    cannot bind (too many, a keyword that names no parameter or one given positionally too, a
    required field missing) go to the compiled ``__init__`` at once, which raises the
    ``TypeError`` Python words for that call, before any field is set.
    """
    plan: _Plan | None = None
    builds = 0

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal plan, builds
        builds += 1
        if builds <= BUILDS_BEFORE_COMPILE:
            if plan is None:
                plan = _Plan(cls)
            if plan.build(self, args, kwargs):
                return
        real = _compile_init(cls)
        type.__setattr__(cls, "__init__", real)
        real(self, *args, **kwargs)

    return __init__


class _Plan:
    """How the stand-in ``__init__`` builds a value of one class (see :func:`_lazy_init`)."""

    __slots__ = ("index", "params", "post_init", "required", "setter", "steps")

    def __init__(self, cls: type) -> None:
        ordered: tuple[Field, ...] = cls.__dict__[_FIELDS]
        params = [f for f in ordered if f.init]
        self.params = len(params)
        self.index = {f.name: at for at, f in enumerate(params)}
        self.required = tuple(
            at
            for at, f in enumerate(params)
            if f.default is MISSING and f.default_factory is MISSING
        )
        #: per field set, in order: its name, its parameter's position (None: not a
        #: parameter), its default and its factory (MISSING when it has none)
        self.steps = tuple(
            (f.name, self.index[f.name] if f.init else None, f.default, f.default_factory)
            for f in ordered
            if f.init or f.default is not MISSING or f.default_factory is not MISSING
        )
        self.setter: Callable[[Any, str, Any], None] = (
            object.__setattr__ if cls.__dict__[_PARAMS] else setattr
        )
        self.post_init = hasattr(cls, "__post_init__")

    def build(self, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Set the fields of ``value`` from these arguments, as the compiled ``__init__``
        would; False, with nothing set, when they do not bind."""
        given = len(args)
        if given > self.params:
            return False
        bound = [*args, *((_UNSET,) * (self.params - given))]
        index = self.index
        for name, item in kwargs.items():
            at = index.get(name)
            if at is None or at < given:
                return False
            bound[at] = item
        for at in self.required:
            if bound[at] is _UNSET:
                return False
        put = self.setter
        for name, at, default, factory in self.steps:
            if at is None:
                item = default if factory is MISSING else factory()
            else:
                item = bound[at]
                if factory is not MISSING:
                    if item is _UNSET or item is _FACTORY:
                        item = factory()
                elif item is _UNSET:
                    item = default
            put(value, name, item)
        if self.post_init:
            value.__post_init__()
        return True


def _compile_init(cls: type) -> Callable[..., None]:
    """``cls.__init__`` compiled from source, as the standard decorator writes it."""
    ordered: tuple[Field, ...] = cls.__dict__[_FIELDS]
    frozen: bool = cls.__dict__[_PARAMS]
    scope: dict[str, Any] = {"__builtins__": builtins, "__value_set__": object.__setattr__}
    params, lines = ["__value_self__"], []
    for each in ordered:
        name = each.name
        if not each.init:
            if each.default_factory is not MISSING:
                scope[f"__value_factory_{name}__"] = each.default_factory
                value = f"__value_factory_{name}__()"
            elif each.default is not MISSING:
                scope[f"__value_default_{name}__"] = each.default
                value = f"__value_default_{name}__"
            else:
                continue
        elif each.default_factory is not MISSING:
            scope[f"__value_factory_{name}__"] = each.default_factory
            scope["__value_has_factory__"] = _FACTORY
            params.append(f"{name}=__value_has_factory__")
            value = f"__value_factory_{name}__() if {name} is __value_has_factory__ else {name}"
        else:
            if each.default is not MISSING:
                scope[f"__value_default_{name}__"] = each.default
                params.append(f"{name}=__value_default_{name}__")
            else:
                params.append(name)
            value = name
        if frozen:
            lines.append(f"    __value_set__(__value_self__, {name!r}, {value})")
        else:
            lines.append(f"    __value_self__.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        lines.append("    __value_self__.__post_init__()")
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(lines) or "    pass") + "\n"
    exec(compile(source, f"<{cls.__qualname__}.__init__>", "exec"), scope)
    made: Callable[..., None] = scope["__init__"]
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    return made

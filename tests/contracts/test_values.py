"""proctor's value classes behave as the standard dataclasses do, for what proctor uses.

Each parity test declares the same class twice, once with :mod:`dataclasses` and once with
:mod:`proctor.contracts.values`, and compares what they do; the refusals are checked one by one.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.contracts import values
from proctor.contracts.values import FrozenInstanceError, asdict, dataclass, field, replace


def _both(frozen: bool, slots: bool, spec: list[tuple[str, str]]) -> tuple[type, type]:
    """The class ``Value`` declared by ``spec`` ((name, "none" | "default" | "factory")) with
    the standard decorator and with ours."""
    made = []
    for decorate, make_field in (
        (dataclasses.dataclass(frozen=frozen, slots=slots), dataclasses.field),
        (dataclass(frozen=frozen, slots=slots), field),
    ):
        body: dict[str, Any] = {"__annotations__": {}, "__module__": __name__}
        for index, (name, kind) in enumerate(spec):
            body["__annotations__"][name] = "Any"
            if kind == "default":
                body[name] = index
            elif kind == "factory":
                body[name] = make_field(default_factory=list)
        made.append(decorate(type("Value", (), body)))
    return made[0], made[1]


_NAMES = st.sampled_from(["a", "b", "c", "name", "self_", "value", "x1", "z"])
_SPECS = st.lists(
    st.tuples(_NAMES, st.sampled_from(["none", "default", "factory"])),
    max_size=5,
    unique_by=lambda item: item[0],
).map(lambda spec: sorted(spec, key=lambda item: item[1] != "none"))
_LEAVES = st.one_of(st.integers(), st.text(max_size=4), st.none(), st.booleans())


@settings(max_examples=150, deadline=None)
@given(
    spec=_SPECS,
    frozen=st.booleans(),
    slots=st.booleans(),
    data=st.data(),
)
def test_same_behaviour_as_the_standard_decorator(
    spec: list[tuple[str, str]], frozen: bool, slots: bool, data: st.DataObject
) -> None:
    theirs, ours = _both(frozen, slots, spec)
    if data.draw(st.booleans(), label="compiled __init__"):
        for _ in range(values.BUILDS_BEFORE_COMPILE + 1):
            ours(*[0 for _, kind in spec if kind == "none"])
        assert ours.__dict__["__init__"].__qualname__.endswith("Value.__init__")
    required = [name for name, kind in spec if kind == "none"]
    given_values = {name: data.draw(_LEAVES) for name in required}
    optional = [name for name, kind in spec if kind != "none"]
    for name in data.draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []:
        given_values[name] = data.draw(_LEAVES)
    left, right = theirs(**given_values), ours(**given_values)
    assert repr(left) == repr(right)
    assert asdict(right) == dataclasses.asdict(left)
    twin = ours(**given_values)
    assert right == twin
    assert (right != twin) is False
    assert (right == left) is False  # another class: never equal
    if frozen:
        assert _hash_or_error(right) == _hash_or_error(left) == _hash_or_error(twin)
        for name, _ in spec:
            with pytest.raises(FrozenInstanceError):
                setattr(right, name, 1)
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(left, name, 1)
    else:
        with pytest.raises(TypeError):
            hash(right)
    assert hasattr(right, "__dict__") is hasattr(left, "__dict__")
    if spec:
        name = spec[-1][0]
        changed = replace(right, **{name: "changed"})
        assert repr(changed) == repr(dataclasses.replace(left, **{name: "changed"}))
        assert getattr(right, name) == given_values.get(name, getattr(twin, name))
    # positional construction, in field order
    positional = [given_values.get(name, getattr(right, name)) for name, _ in spec]
    assert repr(ours(*positional)) == repr(theirs(*positional))
    assert copy.deepcopy(right) == right and copy.copy(right) == right
    assert ours.__match_args__ == theirs.__match_args__  # type: ignore[attr-defined]
    # The standard module's own functions read our values as they read its dataclasses.
    assert dataclasses.is_dataclass(right) and dataclasses.is_dataclass(ours)
    assert dataclasses.asdict(right) == dataclasses.asdict(left)
    assert dataclasses.astuple(right) == dataclasses.astuple(left)
    mine, theirs_fields = dataclasses.fields(ours), dataclasses.fields(theirs)
    assert [(f.name, f.type, f.init, f.repr, f.compare) for f in mine] == [
        (f.name, f.type, f.init, f.repr, f.compare) for f in theirs_fields
    ]
    assert [f.default for f in mine] == [f.default for f in theirs_fields]
    assert [f.default_factory for f in mine] == [f.default_factory for f in theirs_fields]
    if spec:
        standard = dataclasses.replace(right, **{spec[0][0]: "swapped"})
        assert repr(standard) == repr(dataclasses.replace(left, **{spec[0][0]: "swapped"}))


def _hash_or_error(value: Any) -> int | str:
    try:
        return hash(value)
    except TypeError as exc:
        return str(exc)


@dataclass(frozen=True, slots=True)
class Pickled:
    a: int
    b: tuple[str, ...] = ()


@dataclass(frozen=True)
class PickledPlain:
    a: int
    b: list[int] = field(default_factory=list)


@pytest.mark.parametrize("value", [Pickled(1, ("x",)), PickledPlain(2, [3])])
def test_frozen_values_pickle_and_copy(value: Any) -> None:
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) == value


def test_factories_give_a_fresh_value_and_class_defaults_stay_visible() -> None:
    @dataclass
    class Box:
        size: int = 3
        items: list[int] = field(default_factory=list)
        note: str = field(default="n", repr=False)

    one, two = Box(), Box()
    one.items.append(1)
    assert two.items == [] and Box.size == 3 and Box.note == "n"
    assert not hasattr(Box, "items")
    assert repr(one).endswith("<locals>.Box(size=3, items=[1])")


def test_compare_false_and_init_false_fields() -> None:
    @dataclass(frozen=True)
    class Tagged:
        key: str
        seen: int = field(default=0, compare=False)
        cache: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    assert Tagged("k", 1) == Tagged("k", 2) and hash(Tagged("k", 1)) == hash(Tagged("k", 2))
    assert Tagged("k").cache == {} and Tagged("k").cache is not Tagged("k").cache
    with pytest.raises(TypeError):
        Tagged("k", 1, {})  # type: ignore[call-arg]
    assert Tagged.__match_args__ == ("key", "seen")  # type: ignore[attr-defined]


def test_the_init_is_compiled_only_for_a_class_built_often() -> None:
    @dataclass(frozen=True, slots=True)
    class Late:
        a: int
        b: int = 2

    stand_in = Late.__dict__["__init__"]
    assert stand_in.__qualname__.startswith("_lazy_init")
    assert Late(1).b == 2 and Late(b=5, a=1).b == 5
    assert Late.__dict__["__init__"] is stand_in  # built by the stand-in, nothing compiled
    for n in range(values.BUILDS_BEFORE_COMPILE):
        assert Late(n).a == n
    assert Late.__dict__["__init__"] is not stand_in
    assert Late.__dict__["__init__"].__qualname__.endswith("Late.__init__")
    assert Late(7, 8) == Late(a=7, b=8)


_MISCALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((1, 2, 3), {}),
    ((1,), {"c": 3}),
    ((1,), {"a": 2}),
    ((), {"b": 1}),
    ((), {"__value_self__": 1, "a": 1}),
]


@pytest.mark.parametrize(("args", "kwargs"), _MISCALLS)
def test_a_call_that_does_not_bind_raises_what_the_compiled_init_raises(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    def declare() -> Any:
        @dataclass(frozen=True, slots=True)
        class Late:
            a: int
            b: int = 2

        return Late

    fresh, warm = declare(), declare()
    for _ in range(values.BUILDS_BEFORE_COMPILE + 1):
        warm(1)
    assert warm.__dict__["__init__"].__qualname__.endswith("Late.__init__")  # compiled
    with pytest.raises(TypeError) as by_stand_in:
        fresh(*args, **kwargs)
    with pytest.raises(TypeError) as by_compiled:
        warm(*args, **kwargs)
    assert str(by_stand_in.value) == str(by_compiled.value)
    # the miscall compiled the real __init__ at once; the class builds as before
    assert fresh(1, b=3) == fresh(a=1, b=3) and fresh(1).b == 2


def test_the_stand_in_sets_fields_in_order_calls_factories_and_post_init() -> None:
    calls: list[str] = []

    def factory(name: str) -> Any:
        def make() -> list[str]:
            calls.append(name)
            return [name]

        return make

    def declare() -> Any:
        @dataclass
        class Ordered:
            a: int
            b: list[str] = field(default_factory=factory("b"))
            c: list[str] = field(default_factory=factory("c"), init=False)
            d: int = field(default=4, init=False)
            e: list[str] = field(default_factory=factory("e"))

            def __setattr__(self, name: str, value: Any) -> None:
                calls.append(f"set {name}")
                object.__setattr__(self, name, value)

            def __post_init__(self) -> None:
                calls.append("post")

        return Ordered

    made = []
    for warm in (False, True):
        cls = declare()
        if warm:
            for _ in range(values.BUILDS_BEFORE_COMPILE + 1):
                cls(0)
        calls.clear()
        value = cls(1, e=["given"])
        made.append((list(calls), (value.a, value.b, value.c, value.d, value.e)))
    assert made[0] == made[1]
    assert made[0][0] == ["set a", "b", "set b", "c", "set c", "set d", "set e", "post"]


def test_a_subclass_answers_the_standard_module_with_its_own_fields() -> None:
    @dataclass(frozen=True)
    class Base:
        a: int

    @dataclass(frozen=True)
    class Child(Base):
        b: str = "x"

    assert [f.name for f in dataclasses.fields(Base)] == ["a"]  # the base is asked first
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]
    assert dataclasses.asdict(Child(1)) == {"a": 1, "b": "x"}
    assert not dataclasses.is_dataclass(object())


def test_inheritance_keeps_field_order_and_the_frozen_rule() -> None:
    @dataclass(frozen=True)
    class Base:
        a: int
        b: int = 1

    @dataclass(frozen=True)
    class Child(Base):
        c: int = 2
        b: int = 5

    assert repr(Child(0)) == (
        "test_inheritance_keeps_field_order_and_the_frozen_rule.<locals>.Child(a=0, b=5, c=2)"
    )
    assert Child(0, 1, 2) != Base(0, 1)
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclass
        class Thawed(Base):
            d: int = 0

    @dataclass
    class Open:
        a: int

    with pytest.raises(TypeError, match="frozen dataclass from a non-frozen"):

        @dataclass(frozen=True)
        class Frozen(Open):
            b: int = 0


def test_a_subclass_of_a_frozen_value_may_not_add_attributes() -> None:
    @dataclass(frozen=True)
    class Base:
        a: int

    class Plain(Base):
        pass

    with pytest.raises(FrozenInstanceError):
        Plain(1).a = 2  # type: ignore[misc]
    extra = Plain(1)
    extra.other = 3  # type: ignore[attr-defined]  # not a field: allowed, as the standard one
    assert extra.other == 3  # type: ignore[attr-defined]
    with pytest.raises(FrozenInstanceError):
        del Base(1).a  # type: ignore[misc]


def test_the_class_body_s_own_methods_are_kept() -> None:
    @dataclass
    class Own:
        a: int
        b: ClassVar[int] = 9

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own" and Own(1) == object() and hash(Own(1)) == 7
    assert [f.name for f in values.fields(Own)] == ["a"]  # a ClassVar is no field


def test_unhashable_when_eq_is_defined_without_hash_and_not_frozen() -> None:
    @dataclass(frozen=True)
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq)

    assert hash(OwnEq(1)) == hash((1,))  # frozen: hashed by its fields as the standard one


@pytest.mark.parametrize(
    ("declare", "error"),
    [
        ("a: int = 0\n    b: int", TypeError),
        ("a: list = []", ValueError),
        ("a: int = field(default=1, default_factory=int)", ValueError),
        ("a: InitVar[int]", TypeError),
    ],
)
def test_declarations_refused_when_the_class_is_defined(declare: str, error: type) -> None:
    source = f"class Bad:\n    {declare}\n"
    scope: dict[str, Any] = {"field": field}
    with pytest.raises(error):
        exec(source, scope)  # a bad field() is refused in the class body
        dataclass(scope["Bad"])


def test_a_frozen_class_may_not_define_setattr() -> None:
    class Bad:
        a: int

        def __setattr__(self, name: str, value: Any) -> None:
            pass

    with pytest.raises(TypeError, match="__setattr__"):
        dataclass(frozen=True)(Bad)


def test_asdict_recurses_and_copies_leaves() -> None:
    @dataclass(frozen=True)
    class Inner:
        tags: tuple[str, ...]
        extra: Any = None

    @dataclass
    class Outer:
        inner: Inner
        many: list[Inner]
        keyed: dict[str, Inner]

    marker = {1, 2}
    outer = Outer(Inner(("a",), marker), [Inner(("b",))], {"k": Inner(())})
    plain = asdict(outer)
    assert plain == {
        "inner": {"tags": ("a",), "extra": {1, 2}},
        "many": [{"tags": ("b",), "extra": None}],
        "keyed": {"k": {"tags": (), "extra": None}},
    }
    assert plain["inner"]["extra"] is not marker
    with pytest.raises(TypeError):
        asdict(Outer)
    with pytest.raises(TypeError):
        replace(object())
    assert values.is_value(outer) and not values.is_value(Outer)


def test_replace_refuses_an_unknown_field() -> None:
    @dataclass(frozen=True)
    class One:
        a: int

    with pytest.raises(TypeError):
        replace(One(1), b=2)


def test_a_recursive_value_repr_ends() -> None:
    @dataclass
    class Node:
        child: Any = None

    node = Node()
    node.child = node
    assert repr(node).endswith("(child=...)")

"""The strict records behind run.yaml, the envelope and the resume document."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.contracts.envelope import RunEnvelope, run_envelope_schema
from proctor.contracts.skill import RunProfile, ToolStep, WorkerSpec
from proctor.contracts.strict import Record, Rule, StrictError, field

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


class Inner(Record):
    n: Annotated[int, Rule(ge=0, le=9)]


class Outer(Record):
    name: Annotated[str, Rule(pattern=r"^[a-z]+$")]
    kind: Literal["a", "b"] = "a"
    inner: Inner | None = None
    tags: Annotated[list[str], Rule(min_length=1)] = field(default_factory=lambda: ["x"])
    extra: dict[str, Any] = field(default_factory=dict)


def test_a_valid_mapping_builds_the_record() -> None:
    got = Outer.model_validate({"name": "ok", "inner": {"n": 3}, "tags": ["t"]})
    assert got == Outer(name="ok", inner=Inner(n=3), tags=["t"])
    assert got.model_dump() == {
        "name": "ok",
        "kind": "a",
        "inner": {"n": 3},
        "tags": ["t"],
        "extra": {},
    }


@pytest.mark.parametrize(
    ("data", "loc", "kind"),
    [
        ({}, ("name",), "missing"),
        ({"name": "ok", "bogus": 1}, ("bogus",), "extra_forbidden"),
        ({"name": "ok\n"}, ("name",), "value"),  # a closing $ is the end of the text
        ({"name": 1}, ("name",), "type"),
        ({"name": "ok", "kind": "c"}, ("kind",), "value"),
        ({"name": "ok", "inner": {"n": True}}, ("inner", "n"), "type"),  # a bool is not an int
        ({"name": "ok", "inner": {"n": 10}}, ("inner", "n"), "value"),
        ({"name": "ok", "tags": []}, ("tags",), "value"),
        ({"name": "ok", "tags": ("t",)}, ("tags",), "type"),
        ({"name": "ok", "extra": {1: 2}}, ("extra", "1"), "type"),
        ([], (), "type"),
    ],
)
def test_refusals_name_where_and_what(data: Any, loc: tuple[Any, ...], kind: str) -> None:
    with pytest.raises(StrictError) as caught:
        Outer.model_validate(data)
    assert (caught.value.loc, caught.value.kind) == (loc, kind)


def test_records_are_frozen_and_defaults_are_fresh() -> None:
    one, two = Outer(name="a"), Outer(name="b")
    assert one.tags is not two.tags
    with pytest.raises(AttributeError):
        one.name = "c"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Outer(name="a", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Outer()  # type: ignore[call-arg]
    assert hash(Inner(n=1)) == hash(Inner(n=1))
    assert pickle.loads(pickle.dumps(one)) == one
    assert copy.deepcopy(one) == one
    assert one.model_copy(update={"name": "z"}).name == "z"


def test_a_step_is_chosen_by_its_one_kind_key() -> None:
    base = {"minimum_proctor": "0.1.0", "methods": {"m": {"steps": [{"id": "s", "tool": "echo"}]}}}
    profile = RunProfile.model_validate(base)
    assert isinstance(profile.methods["m"].steps[0], ToolStep)
    both = copy.deepcopy(base)
    both["methods"]["m"]["steps"][0]["ask"] = {"reason": "x"}
    with pytest.raises(StrictError) as caught:
        RunProfile.model_validate(both)
    assert caught.value.kind == "choice"
    assert caught.value.loc == ("methods", "m", "steps", 0)


def test_nested_defaults_hold_their_bounds() -> None:
    spec = WorkerSpec.model_validate({"module": "w.py", "function": "main"})
    assert spec.limits.cpu_seconds == 10
    with pytest.raises(StrictError):
        WorkerSpec.model_validate(
            {"module": "w.py", "function": "main", "limits": {"cpu_seconds": 0}}
        )


def test_the_envelope_round_trips_and_publishes_its_schema() -> None:
    env = RunEnvelope(status="sealed", outcome="completed", run_id="r", result={"a": (1, 2)})
    doc = env.to_json()
    assert next(iter(doc)) == "schema"
    assert doc["result"] == {"a": [1, 2]}
    assert "spend_micro_usd" not in doc
    assert RunEnvelope.model_validate(doc).to_json() == doc
    schema = run_envelope_schema()
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert {"status", "run_id"} <= set(schema["required"])
    assert schema["properties"]["schema"]["enum"] == ["proctor.run.v1"]


@given(json_values)
def test_any_json_is_a_profile_or_a_strict_error(data: Any) -> None:
    try:
        RunProfile.model_validate(data)
    except StrictError as exc:
        assert exc.message and "Traceback" not in exc.message


def test_a_record_dumps_as_json_text() -> None:
    env = RunEnvelope(status="sealed", outcome="completed", run_id="r", result={"é": None})
    assert json.loads(env.model_dump_json()) == env.model_dump()
    assert '"é"' in env.model_dump_json()
    assert "refusal" not in json.loads(env.model_dump_json(exclude_none=True))


class _Span(Record):
    start: int
    end: int

    def _check(self) -> None:
        if self.end < self.start:
            raise ValueError("a span ends after it starts")


class _Named(_Span):
    name: str = ""


class _Words:
    def _check(self) -> None:
        raise ValueError("a mixin's check holds too")


class _Mixed(_Words, Record):
    word: str


class _Plain(Record):
    word: str


def test_own_and_inherited_checks_run_and_a_record_without_one_is_built_whole() -> None:
    for made in (lambda: _Span(start=2, end=1), lambda: _Named(start=2, end=1, name="x")):
        with pytest.raises(StrictError):
            made()
    with pytest.raises(StrictError):
        _Mixed(word="x")
    assert _Named(start=1, end=2).model_dump() == {"start": 1, "end": 2, "name": ""}
    assert _Plain(word="x").model_dump() == {"word": "x"} and not _Plain._record_checked
    with pytest.raises(TypeError):
        _Plain()
    with pytest.raises(TypeError):
        _Plain(word="x", other=1)

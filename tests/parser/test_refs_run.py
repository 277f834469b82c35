"""``$run.act``: the act the host stated for the run, read by a step like an input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ProctorError
from proctor.parser.refs import Ref, collect_refs, parse_ref_string, resolve

ACT = {"who": "ops", "ticket": {"id": 7}, "tags": ["a", "b"]}


def test_run_act_parses_with_nested_fields() -> None:
    assert parse_ref_string("$run.act") == Ref("run", "act", (), "$run.act")
    assert parse_ref_string("$run.act.ticket.id") == Ref(
        "run", "act", ("ticket", "id"), "$run.act.ticket.id"
    )


def test_run_act_resolves_keeping_types() -> None:
    template = {"a": "$run.act", "b": "$run.act.ticket.id", "c": ["$run.act.tags/1"]}
    assert resolve(template, {}, {}, run={"act": ACT}) == {"a": ACT, "b": 7, "c": ["b"]}


def test_no_act_stated_is_null_and_a_field_of_it_is_unresolved() -> None:
    assert resolve("$run.act", {}, {}, run={"act": None}) is None
    with pytest.raises(ProctorError) as caught:
        resolve("$run.act.who", {}, {}, run={"act": None})
    assert caught.value.code == "unresolved_reference"


def test_without_a_run_context_a_run_reference_is_unresolved() -> None:
    """A resolver that was handed no run (a connector template) never invents an act."""
    with pytest.raises(ProctorError) as caught:
        resolve("$run.act", {}, {})
    assert caught.value.code == "unresolved_reference"


@pytest.mark.parametrize("text", ["$run.other", "$run.acts", "$run", "$run.", "$runs.act"])
def test_other_run_fields_are_refused(text: str) -> None:
    with pytest.raises(ProctorError) as caught:
        parse_ref_string(text)
    assert caught.value.code == "invalid_reference"


def test_an_embedded_run_reference_is_refused() -> None:
    with pytest.raises(ProctorError) as caught:
        collect_refs({"text": "acting for $run.act.who"})
    assert caught.value.code == "reference_embedded"


@given(st.text(alphabet="$run.act/~012xy", max_size=24))
def test_parsing_run_strings_never_crashes(text: str) -> None:
    try:
        parsed = parse_ref_string("$run." + text)
    except ProctorError as exc:
        assert exc.code == "invalid_reference"
        return
    assert isinstance(parsed, Ref) and parsed.root == "run" and parsed.name == "act"

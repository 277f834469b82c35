"""Proctor's own words in an error message are not data: the sanitizer keeps a
``<secret-named path>: <proctor's words>`` message whole (``credentials: Input should be a valid
dictionary``), while a value the message quotes from a document is still withheld, and credential
shapes and delivered secrets are replaced wherever they are."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from proctor.errors import Message, ParseError, Quoted
from proctor.parser.skill import parse_run_yaml
from proctor.parser.testfile import parse_test_file
from proctor.runtime.boundary.sanitize import TaintSet, scrub_text

TOKEN = "ghp_" + "a" * 36


def _shown(exc: ParseError) -> str:
    return scrub_text(exc.message, own=exc.own)


def test_a_secret_named_path_before_proctors_words_is_kept() -> None:
    said = Message(Quoted("credentials.tracker.auth.api_key"), ": ", "Input should be a string")
    assert scrub_text(said.text, own=said.own) == said.text
    # the same text with nothing known about it is still read as an assignment
    assert scrub_text(said.text) != said.text


def test_a_quoted_value_after_a_secret_name_is_still_withheld() -> None:
    said = Message(Quoted("api_key"), ": ", Quoted("'hunter2hunter2'"), " is not allowed")
    out = scrub_text(said.text, own=said.own)
    assert "hunter2" not in out and out.endswith(" is not allowed")
    inside = Message("turn ", Quoted("'password=hunter2hunter2'"), " is in answers")
    assert "hunter2" not in scrub_text(inside.text, own=inside.own)


def test_shapes_and_tainted_values_are_replaced_in_own_words_too() -> None:
    said = Message(Quoted("token"), ": ", f"Bearer {TOKEN}")
    assert TOKEN not in scrub_text(said.text, own=said.own)
    taint = TaintSet(["sup3rs3cretvalue"])
    said = Message(Quoted("x/sup3rs3cretvalue"), ": ", "Input should be a string")
    assert "sup3rs3cret" not in scrub_text(said.text, taint, own=said.own)


@settings(max_examples=100, deadline=None)
@given(
    name=st.sampled_from(["password", "api_key", "credentials", "clientSecret", "auth_token"]),
    value=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=10, max_size=20),
    quote=st.sampled_from(["", "'", '"']),
)
def test_a_value_in_quoted_data_is_withheld_whatever_words_surround_it(
    name: str, value: str, quote: str
) -> None:
    # a value that is part of the surrounding words (``credential`` in ``credentials``) shows
    # in them whatever happens to the value itself
    assume(value not in f"field {name}:  refused")
    said = Message("field ", Quoted(name), ": ", Quoted(f"{quote}{value}{quote}"), " refused")
    assert value not in scrub_text(said.text, own=said.own)


def test_a_message_inside_another_keeps_its_own_words() -> None:
    inner = Message(Quoted("credentials"), ": ", "Input should be a valid dictionary")
    outer = Message(Quoted("run.yaml"), ":2:1: ", inner)
    assert outer.text == "run.yaml:2:1: credentials: Input should be a valid dictionary"
    own = [outer.text[a:b] for a, b in outer.own]
    assert own == [":2:1: ", ": ", "Input should be a valid dictionary"]


def test_run_yaml_error_under_credentials_is_shown_whole() -> None:
    text = (
        "minimum_proctor: 0.1.0\ncredentials: [1]\n"
        "methods: {m: {steps: [{id: a, tool: echo, inputs: {text: hi}}]}}\n"
    )
    with pytest.raises(ParseError) as caught:
        parse_run_yaml(text, "skills/x/run.yaml")
    assert caught.value.code == "run_yaml_invalid"
    assert _shown(caught.value) == (
        "skills/x/run.yaml:2:1: credentials: Input should be a valid dictionary"
    )


def test_a_file_with_a_secret_name_keeps_its_position() -> None:
    exc = ParseError("a test file is a mapping", file="tests/password-reset.yaml", line=1, column=1)
    assert _shown(exc) == "tests/password-reset.yaml:1:1: a test file is a mapping"
    # a plain message after the position is still data throughout
    exc = ParseError("api_key: hunter2hunter2", file="x.yaml", line=3)
    assert "hunter2" not in _shown(exc)


def test_test_file_error_under_a_secret_named_field_is_shown_whole() -> None:
    text = "method: m\ninputs: {}\nexpect: {status: sealed, outcome: 3}\n"
    with pytest.raises(ParseError) as caught:
        parse_test_file(text, "tests/secrets.yaml")
    assert caught.value.code == "test_invalid"
    assert "REDACTED" not in _shown(caught.value), _shown(caught.value)
    assert _shown(caught.value).startswith("tests/secrets.yaml:3:")


def test_a_records_own_check_that_names_a_value_keeps_it_withheld() -> None:
    from proctor.contracts.strict import StrictError
    from proctor.parser.skill import invalid_at

    # The strict checker's fixed wording is proctor's; a record's _check message is data, so
    # a check that ever quoted a value under a secret name would still have it withheld.
    checked = StrictError(("steps", 0), "value", "token: hunter2hunter2", from_validator=True)
    said = invalid_at("methods.main.steps[0]", checked)
    assert "hunter2" not in scrub_text(said.text, own=said.own)
    fixed = StrictError(("credentials",), "type", "Input should be a valid dictionary")
    said = invalid_at("credentials", fixed)
    assert scrub_text(said.text, own=said.own) == "credentials: Input should be a valid dictionary"

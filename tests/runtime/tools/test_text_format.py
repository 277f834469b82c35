"""Text from values: a string embedding a reference is refused when the profile loads, pointing
to ``text.format``; ``text.format`` builds the text from a template and named values, and its
template reaches nothing but its values."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ProctorError, ToolFailed
from proctor.parser.skill import parse_run_yaml
from proctor.runtime.tools.text import format_text
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

EMBEDDED = """\
minimum_proctor: 0.1.0
methods:
  main:
    inputs: {type: object, properties: {name: {type: string}}}
    steps:
      - id: greet
        tool: echo
        inputs: {text: "Hello, $input.name!"}
"""

FORMATTED = """\
minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {name: {type: string}, n: {type: integer}}
      required: [name, n]
    steps:
      - id: greet
        tool: text.format
        inputs:
          template: "Hello, {name}! {n} notes {{braces}} and costs $5"
          values: {name: $input.name, n: $input.n}
    result_from: [greet]
"""


def test_an_embedded_reference_is_refused_at_load_pointing_to_text_format() -> None:
    with pytest.raises(ProctorError) as caught:
        parse_run_yaml(EMBEDDED, source="run.yaml")
    assert caught.value.code == "reference_embedded"
    assert "text.format" in caught.value.message and "$input.name" in caught.value.message


def test_text_format_builds_the_text_in_a_run(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "fmt", FORMATTED)
    env = session(root).run("fmt", inputs={"name": "Ada", "n": 3})
    assert env.outcome == "completed", env.refusal
    assert env.result == {"text": "Hello, Ada! 3 notes {braces} and costs $5"}


@pytest.mark.parametrize(
    ("template", "code"),
    [
        ("{missing}", "format_value_missing"),
        ("{0.__class__}", "format_template_invalid"),
        ("{a.b}", "format_template_invalid"),
        ("lone { brace", "format_template_invalid"),
        ("{a!r}", "format_template_invalid"),
    ],
)
def test_templates_reach_only_their_values(template: str, code: str) -> None:
    with pytest.raises(ToolFailed) as caught:
        format_text(template, {"a": "x"})
    assert caught.value.code == code


@given(
    st.text(max_size=200),
    st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.text(max_size=20), max_size=4),
)
def test_any_template_is_text_or_a_tool_failure(template: str, values: dict[str, str]) -> None:
    try:
        out = format_text(template, values)
    except ToolFailed as exc:
        assert exc.code.startswith("format_")
    else:
        assert isinstance(out, str)

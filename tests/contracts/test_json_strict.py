"""The strict JSON reader: its depth scan agrees with the real nesting whatever the strings hold,
it is linear on hostile layouts, and its refusals name no content."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.contracts.json_strict import MAX_DEPTH, loads, open_depth, raw_decode_object
from proctor.errors import ParseError
from tests.fuzzing import FUZZ

TRICKY = st.text(alphabet=st.sampled_from(list('[]{}"\\ab/\n\u00e9')), max_size=8)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@st.composite
def nested(draw: st.DrawFn) -> Any:
    value: Any = draw(st.one_of(TRICKY, st.integers(), st.none()))
    for _ in range(draw(st.integers(min_value=0, max_value=80))):
        siblings = draw(st.lists(TRICKY, max_size=2))
        if draw(st.booleans()):
            value = [*siblings, value]
        else:
            value = {draw(TRICKY): value, **{f"k{i}": s for i, s in enumerate(siblings)}}
    return value


@FUZZ
@given(nested())
def test_the_depth_scan_agrees_with_the_nesting(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=bool(len(str(value)) % 2))
    if _depth(value) > MAX_DEPTH:
        with pytest.raises(ParseError) as refused:
            loads(text)
        assert refused.value.code == "too_deep"
    else:
        assert loads(text) == value


@FUZZ
@given(nested(), st.integers(min_value=0, max_value=200))
def test_open_depth_counts_open_brackets_of_a_prefix(value: Any, cut: int) -> None:
    text = json.dumps(value)
    prefix = text[: min(cut, len(text))]
    assert open_depth(text) == 0
    assert open_depth(prefix) >= 0


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"a":' * 100_000,
        '"' + '\\"' * 200_000,
        '"\\' * 200_000,
        '["' + "[" * 200_000,
        "[" * 64 + '"' + "]" * 200_000,
    ],
)
def test_hostile_layouts_are_refused_quickly_and_cleanly(text: str) -> None:
    # a separate process with a deadline: no wall-clock assertion, only that it returns
    code = (
        "import sys\n"
        "from proctor.contracts.json_strict import loads\n"
        "from proctor.errors import ParseError\n"
        "try:\n    loads(sys.stdin.read())\nexcept ParseError as e:\n    print(e.code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("too_deep", "not_json")


def test_refusals_never_echo_content() -> None:
    secret = "hunter2-" + "x" * 20
    for text in (f'{{"k": "{secret}", "k": 1}}', f'{{"k": {secret}}}', f'["{secret}"' + "[" * 70):
        with pytest.raises(ParseError) as refused:
            loads(text, source="doc")
        assert secret not in refused.value.message


def test_an_object_in_prose() -> None:
    assert raw_decode_object('The answer: {"a": [1, "}"]} and more {') == {"a": [1, "}"]}
    assert raw_decode_object("no object here") is None
    with pytest.raises(ParseError):
        raw_decode_object('he said "{" then {"a": 1, "a": 2}')

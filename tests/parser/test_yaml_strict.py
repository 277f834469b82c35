"""The strict YAML subset: what it refuses (with position and code) and what it loads."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ParseError
from proctor.parser.yaml_strict import MAX_DEPTH, load_yaml, load_yaml_with_positions

REFUSED = [
    ("a: &x 1\n", "yaml_anchor", 1, 4),
    ("a: 1\nb: *x\n", "yaml_alias", 2, 4),
    ("base: {a: 1}\nother:\n  <<: {b: 2}\n", "yaml_merge_key", 3, 3),
    ("'<<': 1\n", "yaml_merge_key", 1, 1),
    ("a: !!str 1\n", "yaml_tag", 1, 4),
    ("a: !custom x\n", "yaml_tag", 1, 4),
    ("a: !!binary aGk=\n", "yaml_tag", 1, 4),
    ("a: !!set {x}\n", "yaml_tag", 1, 4),
    ("a: ! x\n", "yaml_tag", 1, 4),
    ("a: 1\n---\nb: 2\n", "yaml_multiple_documents", 2, 1),
    ("%YAML 1.1\n---\na: 1\n", "yaml_directive", 1, 1),
    ("a: 1\nb: 2\na: 3\n", "yaml_duplicate_key", 3, 1),
    ("x:\n  y:\n    - {k: 1, k: 2}\n", "yaml_duplicate_key", 3, 14),
    ("a: 1\n'a': 2\n", "yaml_duplicate_key", 2, 1),
    ("1: a\n", "yaml_key_type", 1, 1),
    ("true: a\n", "yaml_key_type", 1, 1),
    ("~: a\n", "yaml_key_type", 1, 1),
    ("? [a]\n: b\n", "yaml_key_type", 1, 3),
    ("a: [1, 2\n", "yaml_syntax", 2, 1),
    ("a: b: c\n", "yaml_syntax", 1, 5),
    ("a: \x07\n", "yaml_syntax", 1, 4),
    ("a: 09\n", "yaml_ambiguous_scalar", 1, 4),
    ("a: 010\n", "yaml_ambiguous_scalar", 1, 4),
    ("a: 1e3\n", "yaml_ambiguous_scalar", 1, 4),
    ("a: 0o17\n", "yaml_ambiguous_scalar", 1, 4),
    ("a: .inf\n", "yaml_number", 1, 4),
    ("a: .nan\n", "yaml_number", 1, 4),
    ("a: [b, c]#x\n", "yaml_syntax", 1, 10),
    ("key: [a,\nb]\n", "yaml_syntax", 2, 1),
    ("- [-]\n", "yaml_syntax", 1, 4),
]


@pytest.mark.parametrize(("text", "code", "line", "column"), REFUSED)
def test_refused_with_code_and_position(text: str, code: str, line: int, column: int) -> None:
    with pytest.raises(ParseError) as caught:
        load_yaml(text, source="skills/x/run.yaml")
    error = caught.value
    assert error.code == code
    assert (error.line, error.column) == (line, column)
    assert str(error).startswith(f"skills/x/run.yaml:{line}:{column}: ")


def test_plain_scalars_follow_the_json_compatible_core_schema() -> None:
    text = (
        "n: ~\nn2: null\ne:\nt: true\nf: FALSE\ni: -12\nh: 0x1F\nfl: 2.5\nexp: 1.5e+3\n"
        "yes_: yes\noff_: off\ndate: 2024-01-31\ntime: 12:30\nund: 1_000\nq: '1'\n"
        "block: |\n  line\n"
    )
    assert load_yaml(text, source="s") == {
        "n": None,
        "n2": None,
        "e": None,
        "t": True,
        "f": False,
        "i": -12,
        "h": 31,
        "fl": 2.5,
        "exp": 1500.0,
        "yes_": "yes",
        "off_": "off",
        "date": "2024-01-31",
        "time": "12:30",
        "und": "1_000",
        "q": "1",
        "block": "line\n",
    }


def test_empty_document_is_none_and_single_marked_document_loads() -> None:
    assert load_yaml("", source="s") is None
    assert load_yaml("---\na: 1\n...\n", source="s") == {"a": 1}


def test_positions_name_keys_and_items() -> None:
    value, positions = load_yaml_with_positions("a:\n  b: [x, y]\n  c:\n    - z\n", source="s")
    assert value == {"a": {"b": ["x", "y"], "c": ["z"]}}
    assert positions[("a", "b")] == (2, 3)
    assert positions[("a", "b", 1)] == (2, 10)
    assert positions[("a", "c", 0)] == (4, 7)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(ParseError) as caught:
        load_yaml("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), source="s")
    assert caught.value.code == "yaml_too_deep"


def test_pure_loader_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    import proctor.parser._yaml_events as module

    text = "a: [1, {b: c}]\nd: |\n  x\n"
    fast = load_yaml(text, source="s")
    monkeypatch.setattr(module, "_Loader", yaml.SafeLoader)
    assert load_yaml(text, source="s") == fast
    with pytest.raises(ParseError) as caught:
        load_yaml("a: &x 1\n", source="s")
    assert caught.value.code == "yaml_anchor"


_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x85\u2028\u2029")
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    # PyYAML's emitter writes NEL/LS/PS raw inside quoted scalars, where YAML folds them to
    # a space: safe_load itself does not round-trip them, so they are left out here.
    | _text
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_safe_dump_round_trip(value: object) -> None:
    """What safe_dump writes loads back equal, unless a plain scalar is version-ambiguous."""
    text = yaml.safe_dump({"v": value}, allow_unicode=True)
    try:
        loaded = load_yaml(text, source="s")
    except ParseError as error:
        # safe_dump writes YAML 1.1: a string like "09" or "1e5" goes out unquoted, and
        # YAML 1.2 would read a number. Refusing is the only honest answer.
        assert error.code == "yaml_ambiguous_scalar", (error.code, text)
        return
    assert _same(loaded, {"v": value}), text


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b

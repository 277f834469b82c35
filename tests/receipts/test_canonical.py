"""Canonical JSON: byte-for-byte against the JCS reference corpus, and the fast route proven
identical to rfc8785 by property tests."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import UsageError
from proctor.receipts.canonical import _fast_ok, canonical, digest, digest_bytes, is_digest
from tests.corpora import corpus_dir


def _cases() -> list[str]:
    try:
        root = corpus_dir("jcs-cyberphone")
    except pytest.skip.Exception:
        return []
    return sorted(p.name for p in (root / "testdata" / "input").glob("*.json"))


def test_corpus_is_present() -> None:
    root = corpus_dir("jcs-cyberphone")
    assert len(list((root / "testdata" / "input").glob("*.json"))) >= 5


@pytest.mark.parametrize("name", _cases())
def test_cyberphone_output_byte_for_byte(name: str) -> None:
    root = corpus_dir("jcs-cyberphone") / "testdata"
    value = json.loads((root / "input" / name).read_bytes())
    expected = (root / "output" / name).read_bytes()
    assert canonical(value) == expected
    hexed = (root / "outhex" / name.replace(".json", ".txt")).read_text().split()
    assert canonical(value) == bytes(int(h, 16) for h in hexed)


def test_digest_forms() -> None:
    assert digest({"b": 1, "a": [True, None]}) == digest_bytes(b'{"a":[true,null],"b":1}')
    assert digest_bytes(b"") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert is_digest(digest("x"))
    assert not is_digest("sha256:" + "A" * 64)
    assert not is_digest("sha256:" + "a" * 63)
    assert not is_digest(None)


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), 2**53, -(2**53), {1: "x"}, "\ud800", {"k": {1, 2}}]
)
def test_unrepresentable_values_are_refused(bad: Any) -> None:
    with pytest.raises(UsageError) as info:
        canonical(bad)
    assert info.value.code == "not_canonicalizable"


def test_fast_route_edges_match() -> None:
    tricky = {
        "\x7f": "\x00\x1f\x7f\u2028\ud7ff\ue000\U0001f600",
        "b": ['\b\f\n\r\t"\\/', 2**53 - 1, -(2**53) + 1, 0, True, False, None],
        "a": {},
        "c": [],
    }
    assert _fast_ok(tricky)
    assert canonical(tricky) == rfc8785.dumps(tricky)
    # non-ASCII keys sort by UTF-16 unit in JCS: the fast route must step aside
    keyed = {"\ue000": 1, "\U0001f600": 2}
    assert not _fast_ok(keyed)
    assert canonical(keyed) == rfc8785.dumps(keyed)
    assert list(json.loads(canonical(keyed))) == ["\U0001f600", "\ue000"]


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)
ascii_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(alphabet=st.characters(max_codepoint=127)), inner, max_size=5)
    ),
    max_leaves=30,
)


def _reference(value: Any) -> bytes | None:
    try:
        return bytes(rfc8785.dumps(value))
    except rfc8785.CanonicalizationError:
        return None


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_canonical_equals_rfc8785_or_both_refuse(value: Any) -> None:
    expected = _reference(value)
    if expected is None:
        with pytest.raises(UsageError):
            canonical(value)
    else:
        assert canonical(value) == expected


@settings(max_examples=400, deadline=None)
@given(ascii_values)
def test_fast_route_is_byte_identical(value: Any) -> None:
    assert _fast_ok(value)
    expected = _reference(value)
    if expected is None:  # a lone surrogate in a string value
        with pytest.raises(UsageError):
            canonical(value)
    else:
        assert canonical(value) == expected


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_canonical_is_a_fixed_point(value: Any) -> None:
    try:
        once = canonical(value)
    except UsageError:
        return

    # JCS numbers are IEEE doubles: a float such as 2.0**53 prints as an integer that is only
    # representable as a double again, so integers past the safe range are read back as floats
    def number(text: str) -> int | float:
        n = int(text)
        return n if abs(n) <= 2**53 - 1 else float(n)

    assert canonical(json.loads(once, parse_int=number)) == once

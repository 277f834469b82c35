"""The sanitizer's plain copy (no taint) gives exactly the walk's answer, and never lets a
secret through: random documents of secrets, secret-shaped strings, secret names and values
the walk converts, compared with the walk itself."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from proctor.runtime.boundary import sanitize
from proctor.runtime.boundary.sanitize import TaintSet, scrub_fields, scrub_value
from tests.runtime.boundary.test_sanitize import SAMPLES

SECRETS = [
    "ghp_" + "k" * 36,
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "sk-ant-api03-" + "x" * 40,
    "password=hunter22hunter22",
    'api_key: "zzzzzzzzzz"',
    "Bearer abcdefgh12345678",
    *SAMPLES.values(),
]
PLAIN = ["completed", "s0", "echo", "s0/1", "sha256:" + "0" * 64, "0" * 32, "hello world"]
NAMES = ["password", "api_key", "token", "PWD", "pwd", "secret_name", "max_tokens", "x y"]

strings = st.one_of(
    st.sampled_from(SECRETS + PLAIN),
    st.text(max_size=24),
    st.text("abcdefghijklmnopqrstuvwxyz_-:=/ .", max_size=80),
    st.tuples(st.sampled_from(PLAIN), st.sampled_from(SECRETS)).map(" ".join),
)
keys = st.one_of(st.sampled_from(NAMES + PLAIN + SECRETS), st.text(max_size=12))
leaves = st.one_of(
    strings,
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
)
documents = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=5),
        st.dictionaries(st.integers(), inner, max_size=2),
        st.tuples(inner, inner),
        st.frozensets(st.sampled_from(PLAIN), max_size=2),
    ),
    max_leaves=20,
)

# mostly plain documents (the copy's case), a secret or an odd value now and then
plain_keys = st.sampled_from(["status", "run_id", "trace", "a_long_snake_case_key", "x", "s0/1"])
plain_leaves = st.one_of(
    st.sampled_from(PLAIN), st.none(), st.integers(), st.text("abc -", max_size=30), leaves
)
plain_documents = st.recursive(
    plain_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(plain_keys | keys, inner, max_size=5)
    ),
    max_leaves=20,
)


def _walked(value: Any, taint: TaintSet | None = None) -> tuple[Any, list[str]]:
    """scrub_value by the walk alone (what it answered before the plain copy)."""
    walker = sanitize._Walker(taint)
    safe = walker.walk(value, "$")
    return safe, sorted({sanitize._render(path) for path in walker.redacted})


def _text(value: Any) -> str:
    def default(item: Any) -> Any:
        return sorted(item, key=repr) if isinstance(item, frozenset) else repr(item)

    return json.dumps(value, sort_keys=True, default=default)


def _same(a: Any, b: Any) -> bool:
    """Equal, float NaN included, and of the same JSON types throughout."""
    return _text(a) == _text(b)


@settings(max_examples=400, deadline=None)
@given(
    doc=st.one_of(
        st.dictionaries(plain_keys, plain_documents, max_size=6),
        st.dictionaries(keys, documents, max_size=6),
        st.lists(documents, max_size=4),
    )
)
@example(doc={"notes": ["x " + SECRETS[0]]})
@example(doc={"a": [{"b": {"password": "hunter2"}}]})
@example(doc={"a": (1, 2), "b": float("nan")})
def test_the_plain_copy_is_the_walks_answer(doc: Any) -> None:
    before = copy.deepcopy(doc)
    expected = _walked(doc)
    for _ in range(2):  # the first pass learns the plain keys, the second takes the copy
        got = scrub_value(doc)
        assert _same(got, expected), (got, expected)
        if type(doc) is dict:
            assert _same(scrub_fields(doc), expected)
    assert _same(doc, before)  # never changed
    text = _text(got[0])
    for secret in SECRETS:
        assert secret not in text or secret not in _text(doc)


def test_an_envelope_takes_the_plain_copy_and_a_secret_in_it_does_not() -> None:
    doc = {
        "schema": "proctor.run.v1",
        "status": "sealed",
        "run_id": "0cf4635208fe41a2bf3bb5e820a96cce",
        "receipt_id": "sha256:" + "9e" * 32,
        "result": {"text": "hello", "n": 1.5, "ok": True},
        "trace": [{"step": "s0", "tool": "echo", "warnings": [], "code": None}],
        "notes": ["no host set an authority: effects allow, reach workspace; (see --authority)"],
    }
    scrub_value(doc)  # learns the keys
    copied = sanitize._plain_copy(doc, 0)
    assert copied == doc and copied is not doc
    assert copied["trace"][0]["warnings"] is not doc["trace"][0]["warnings"]
    assert copied["result"] is not doc["result"]
    for secret in SECRETS:
        leaky = {**doc, "result": {"text": f"see {secret}"}}
        assert sanitize._plain_copy(leaky, 0) is sanitize._WALK
        safe, paths = scrub_value(leaky)
        assert paths == ["$.result.text"] and secret not in json.dumps(safe), secret
    # a tainted value is replaced whatever the memo holds: the copy is taken without taint only
    taint = TaintSet(["hello world, a tainted value"])
    assert scrub_value({"text": "hello world, a tainted value"}) == (
        {"text": "hello world, a tainted value"},
        [],
    )
    assert scrub_value({"text": "hello world, a tainted value"}, taint)[1] == ["$.text"]


def test_a_cycle_or_a_deep_document_is_walked() -> None:
    loop: list[Any] = ["x"]
    loop.append(loop)
    assert sanitize._plain_copy(loop, 0) is sanitize._WALK
    assert scrub_value({"a": loop})[0] == {"a": ["x", "[CYCLE]"]}
    deep: Any = "end"
    for _ in range(sanitize._PLAIN_DEPTH + 2):
        deep = [deep]
    assert sanitize._plain_copy(deep, 0) is sanitize._WALK
    assert scrub_value(deep)[0] == deep


def test_non_finite_floats_and_tuples_are_converted_as_the_walk_converts_them() -> None:
    safe, paths = scrub_value({"a": float("inf"), "b": (1, "x"), "c": 1.5})
    assert safe == {"a": "inf", "b": [1, "x"], "c": 1.5} and paths == []
    assert math.isfinite(safe["c"])

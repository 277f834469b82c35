"""The reusable compact encoders write exactly what ``json.dumps`` with the same options does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.receipts.jsontext import compact_encoder, reusable_encoder

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities included: json.dumps writes them, and so must this
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@pytest.mark.parametrize("sort_keys", [True, False])
@settings(max_examples=300, deadline=None)
@given(value=values)
def test_same_text_as_json_dumps(sort_keys: bool, value: Any) -> None:
    expected = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False)
    assert compact_encoder(sort_keys=sort_keys)(value) == expected


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
@settings(max_examples=300, deadline=None)
@given(value=values)
def test_ascii_text_as_json_dumps(separators: tuple[str, str], value: Any) -> None:
    # what an HTTP reply is written with (proctor.mcp.exchange): every character past ASCII
    # escaped, as json.dumps's default does
    expected = json.dumps(value, separators=separators)
    assert reusable_encoder(sort_keys=False, separators=separators, ascii=True)(value) == expected


def test_reused_encoder_keeps_no_state_between_values() -> None:
    encode = compact_encoder(sort_keys=True)
    with pytest.raises(TypeError):
        encode({"b": [1, object()]})
    assert encode({"b": [1, 2], "a": "x"}) == '{"a":"x","b":[1,2]}'

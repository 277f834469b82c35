"""Strategies shared by the entry-point fuzz tests (one per entry point, under tests/<layer>/).

Each fuzz test feeds an entry point three kinds of input: a valid document with one subtree
replaced by an arbitrary value (the shapes a careless or hostile author writes), the valid text
with bytes spliced in, and arbitrary text. It asserts only that nothing but a
:class:`~proctor.errors.ProctorError` escapes. Budgets are bounded (``FUZZ``) so CI pays a few
seconds per entry point.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from proctor.errors import ProctorError

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["", "block", "warn", "fail_open", "echo", "fs.read", "$input.x", "object"]),
)
VALUES: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with one to three subtrees replaced by arbitrary values (or a key dropped)."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        if not path:
            doc = draw(VALUES)
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(VALUES)
    return doc


def spliced(text: str) -> st.SearchStrategy[str]:
    """``text`` with a few characters inserted, deleted or replaced at random places."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        out = text
        for _ in range(draw(st.integers(min_value=1, max_value=4))):
            at = draw(st.integers(min_value=0, max_value=len(out)))
            cut = draw(st.integers(min_value=0, max_value=3))
            piece = draw(
                st.text(alphabet=st.sampled_from(list(":-[]{},\"'#&*!|>\n \t\\0a")), max_size=4)
            )
            out = out[:at] + piece + out[at + cut :]
        return out

    return build()


def as_yaml(value: Any) -> str:
    """A value as YAML text: JSON is YAML's flow style, which the strict loader reads."""
    return json.dumps(value, ensure_ascii=False)


def only_proctor_errors(fn: Callable[[], Any]) -> None:
    """Run ``fn``; a :class:`ProctorError` is an accepted refusal, anything else fails."""
    try:
        fn()
    except ProctorError as exc:
        assert exc.code and isinstance(exc.code, str)
        assert "Traceback" not in exc.message

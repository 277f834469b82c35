"""A guard's arity is read from its code when it is a plain function, and agrees with what
:func:`inspect.signature` makes of it (the judge for everything else)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import pytest

from proctor.policy.loader import _plain_function_arity, guard_arity_problem


def one(ctx: Any) -> bool:
    return True


def one_and_default(ctx: Any, extra: int = 0) -> bool:
    return True


def two(ctx: Any, other: Any) -> bool:
    return True


def none() -> bool:
    return True


def star(*args: Any) -> bool:
    return True


def one_star(ctx: Any, *rest: Any, **named: Any) -> bool:
    return True


def keyword_only(ctx: Any, *, needed: int) -> bool:
    return True


def keyword_only_default(ctx: Any, *, given: int = 1) -> bool:
    return True


def positional_only(ctx: Any, /) -> bool:
    return True


def all_defaults(ctx: Any = None) -> bool:
    return True


@functools.wraps(two)
def wrapped_two(ctx: Any) -> bool:
    return True


PLAIN = [one, one_and_default, two, none, star, one_star, keyword_only, keyword_only_default]
PLAIN += [positional_only, all_defaults, lambda ctx: True, lambda: True]


def _by_inspect(guard: Any) -> tuple[int, bool]:
    params = list(inspect.signature(guard).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return (
        sum(1 for p in positional if p.default is p.empty),
        any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params),
    )


@pytest.mark.parametrize("guard", PLAIN, ids=lambda g: g.__name__)
def test_the_code_reading_agrees_with_inspect(guard: Any) -> None:
    assert _plain_function_arity(guard) == _by_inspect(guard)


def test_the_verdicts() -> None:
    assert guard_arity_problem(one) is None
    assert guard_arity_problem(one_and_default) is None
    assert guard_arity_problem(positional_only) is None
    assert "requires 2" in (guard_arity_problem(two) or "")
    assert "requires 0" in (guard_arity_problem(none) or "")
    assert "requires 0" in (guard_arity_problem(all_defaults) or "")
    assert "keyword-only" in (guard_arity_problem(keyword_only) or "")


def test_anything_but_a_plain_function_goes_to_inspect() -> None:
    class Callable:
        def __call__(self, ctx: Any) -> bool:
            return True

    for guard in (wrapped_two, functools.partial(two, 1), Callable(), Callable().__call__, len):
        assert _plain_function_arity(guard) is None
    assert "requires 2" in (guard_arity_problem(wrapped_two) or "")  # follows __wrapped__
    assert guard_arity_problem(functools.partial(two, 1)) is None
    assert guard_arity_problem(Callable()) is None
    assert guard_arity_problem(len) is None

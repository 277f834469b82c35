"""The package identity shape: what a person may type as one, fuzzed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proctor.core.package_identity import IDENTITY_KINDS, is_identity
from tests.fuzzing import FUZZ


def test_the_kinds_and_their_bounds() -> None:
    for good in ("core:weather", "registry:acme/summ", "local:.", "local:outside/0f3a"):
        assert is_identity(good)
    for bad in ("summ", "core:", "local:", "Local:x", " local:x", "local:a\u202eb", "local:a\nb",
                "local:" + "a" * 1019):  # fmt: skip
        assert not is_identity(bad)
    assert is_identity("local:" + "a" * 1018)  # 1,024 characters


@FUZZ
@given(st.sampled_from([*IDENTITY_KINDS, ""]), st.text(max_size=40))
def test_any_text_is_judged_without_an_error(kind: str, rest: str) -> None:
    text = kind + rest
    assert is_identity(text) == (bool(kind) and bool(rest) and text.isprintable())

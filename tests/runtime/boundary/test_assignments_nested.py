"""Secret-named assignments in text: one inside another's value, values past the pattern's
4,096 characters, unclosed quotes, and lines of many assignments (each read a bounded number
of times), plus a tainted value ending in base64 padding before a joined line break."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.runtime.boundary.sanitize import TaintSet, scrub_text
from tests.fuzzing import FUZZ

HIDDEN = "hunter22hunter22"
FIELD = "[REDACTED:secret_field]"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"config: password={HIDDEN}", "config: password="),
        (f"x: password={HIDDEN} and more", "x: password="),
        (f"a=b=c=password={HIDDEN} rest", "a=b=c=password="),
        (f'"config": "password={HIDDEN}"', '"config": "password='),
        (f"note: token={HIDDEN}; db: password: {HIDDEN}", "note: token="),
    ],
)
def test_an_assignment_inside_the_value_of_another_is_found(text: str, kept: str) -> None:
    # the outer name is not secret; its value is itself a secret name's assignment
    out = scrub_text(text, None)
    assert HIDDEN not in out
    assert out.startswith(kept + FIELD)


@pytest.mark.parametrize(
    "text",
    [
        'password="' + "y" * 5000 + '" after',  # a quoted value longer than the pattern takes
        "password=" + "y" * 6000 + " after",
        'password="' + "y" * 30 + " unclosed",  # no closing quote on the line
        'password="it\'s"',
    ],
)
def test_long_and_unclosed_values_are_replaced_whole(text: str) -> None:
    out = scrub_text(text, None)
    assert "yy" not in out and "it" not in out.split(FIELD)[1][:2]
    assert FIELD in out


def test_a_line_of_many_assignments_is_scrubbed_whole() -> None:
    line = f"a=password={HIDDEN} " * 20_000  # nested and plain, all on one line
    out = scrub_text(line, None)
    assert HIDDEN not in out
    assert out.count(FIELD) == 20_000


def test_an_allowlisted_line_keeps_its_assignments_and_others_do_not() -> None:
    text = f"password={HIDDEN} # pragma: allowlist secret\nconfig: password={HIDDEN}"
    first, second = scrub_text(text, None).split("\n")
    assert first == f"password={HIDDEN} # pragma: allowlist secret"
    assert second == f"config: password={FIELD}"


@FUZZ
@given(
    st.lists(st.sampled_from(["a", "config", "x.y", "note"]), max_size=4),
    st.sampled_from(["=", ": ", ":=", "=>", " = "]),
    st.sampled_from(["password", "api_key", "token", "client_secret"]),
    st.text(alphabet="abcdefXYZ0123456789", min_size=12, max_size=40),
)
def test_a_secret_behind_any_chain_of_plain_names_is_replaced(
    outer: list[str], op: str, name: str, value: str
) -> None:
    text = "".join(f"{n}{op}" for n in outer) + f"{name}{op}{value}"
    assert value not in scrub_text(text, None)


@pytest.mark.parametrize(
    "text", ["000000\\\n0=\n", "000000\\\n0=\nmore", "000\\\n0000=\r\n", "x 000000\\\n0= y=\n"]
)
def test_a_tainted_value_ending_in_padding_before_a_joined_break_is_replaced(text: str) -> None:
    # hypothesis found it: joining both kinds of continuation ate the value's own "=" as a
    # quoted-printable soft break
    out = TaintSet(["0000000="]).scrub(text)
    assert "[REDACTED:tainted]" in out
    assert "0=" not in out

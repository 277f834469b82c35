"""A delivered secret handed back changed is still caught: reversed, base32, HTML/XML character
references (decimal, hex, named, mixed), split by whitespace or line breaks, wrapped in chunks,
cut by line continuations (a backslash or a quoted-printable "=" before a line break).

The attack is a command given the credential that prints it back in every such form. Each form
must be absent from the call's result, the run store, the audit log and the receipts; the text
around it is kept.
"""

from __future__ import annotations

import base64
import html
import itertools
import json
import secrets
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.boundary.echoes import joined, normal, normal_map
from proctor.runtime.boundary.sanitize import TaintSet, marker
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from tests.fuzzing import FUZZ
from tests.receipt_files import all_bytes
from tests.runtime.driver_support import (
    _OPEN,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
)

TAINTED = marker("tainted")


def echoes(secret: str) -> dict[str, str]:
    """Every changed form of ``secret`` a careless or hostile tool might print."""
    raw = secret.encode()
    b32 = base64.b32encode(raw).decode()
    rot13 = str.maketrans(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
    )
    return {
        "reversed": secret[::-1],
        "rot13": secret.translate(rot13),
        "rot47": "".join(
            chr(33 + (ord(c) - 33 + 47) % 94) if "!" <= c <= "~" else c for c in secret
        ),
        "rot13_spaced": " ".join(secret.translate(rot13)),
        "base32": b32,
        "base32_lower": b32.lower().rstrip("="),
        "base32_offset": base64.b32encode(b"xyz" + raw).decode()[5:],
        "decimal": "".join(f"&#{ord(c)};" for c in secret),
        "hex": "".join(f"&#x{ord(c):x};" for c in secret),
        "hex_upper_padded": "".join(f"&#X{ord(c):04X};" for c in secret),
        "mixed": "".join(
            (f"&#{ord(c)};", f"&#x{ord(c):x};", c)[i % 3] for i, c in enumerate(secret)
        ),
        "named": html.escape(secret, quote=True),
        "spaced": " ".join(secret),
        "one_per_line": "\n".join(secret),
        "crlf_chunks": "\r\n".join(textwrap.wrap(secret, 5)),
        "tabbed": "\t".join(secret[i : i + 3] for i in range(0, len(secret), 3)),
        "base64_wrapped": "\n".join(textwrap.wrap(base64.b64encode(raw).decode(), 8)),
        "reversed_spaced": " ".join(secret[::-1]),
        "entities_split": "\n".join(f"&#{ord(c)};" for c in secret),
        # lines joined by a continuation mark: a shell's backslash, a quoted-printable "="
        "backslash_joined": "\\\n".join(secret[i : i + 6] for i in range(0, len(secret), 6)),
        "soft_breaks": "=\r\n".join(secret[i : i + 7] for i in range(0, len(secret), 7)),
    }


SECRET = "tr0ub4dor&3<horse>staple"


@pytest.mark.parametrize("form", sorted(echoes(SECRET)))
def test_each_form_is_replaced_and_the_text_around_it_kept(form: str) -> None:
    taint = TaintSet([SECRET])
    echoed = echoes(SECRET)[form]
    out = taint.scrub(f"before: {echoed} :after")
    assert echoed not in out
    assert out.startswith("before: ") and out.endswith(" :after"), out
    assert TAINTED in out


@pytest.mark.parametrize(
    ("secret", "text"),
    [
        # the value's own "=" ends a line after a quoted-printable soft break: joining every
        # "=" + line break (as a decoder does) eats it, reading the marks as text misses the
        # first break (found by hypothesis, below)
        ("00000000=", "0000000=\r\n0=\n"),
        ("key=value=", "say key=\nvalue=\n and more"),
        # the same with a shell's backslash continuation and a backslash of the value's own
        ("abc\\defgh", "before abc\\\ndefg\\\nh after"),
        ("abc\\defgh", "abc\\\r\nde&#102;g\\\nh;"),
        # a value holding a character reference of its own: the normal view decodes it (and
        # what is left is too short to match), so it is also looked for as it is across gaps
        ("0000&#0;", "0000&#\\\n0;"),  # a continuation inside it
        ("0000&#0;", "0000&\r\n#0;"),  # a line break inside it
        ("0000&#0;", "".join(f"&#{ord(c)};" for c in "0000&#0;")),  # each character a reference
        # the text around a value makes it a reference's digits or name, which the normal view
        # decodes away: the text is also read with its references as they are
        ("12345678", "x &#12345678; y"),
        ("00000000", "&#000000\\\n00;"),  # and joined by a continuation
        ("12345678", "&#1234\n5678;"),  # and split by a line break
        ("abcdefgh", "x &abcdefgh; y"),
    ],
)
def test_a_value_its_own_views_rewrite_is_caught(secret: str, text: str) -> None:
    out = TaintSet([secret]).scrub(text)
    assert TAINTED in out
    assert secret not in normal(joined(out)) and secret not in normal(out), out


def test_short_values_stay_whole_string_only() -> None:
    taint = TaintSet(["hunter2"])
    assert taint.scrub("hunter2") == TAINTED
    assert taint.scrub("h u n t e r 2 and 2retnuh") == "h u n t e r 2 and 2retnuh"


def test_ordinary_text_is_left_alone() -> None:
    taint = TaintSet([SECRET, "s3cr3t-token-value"])
    prose = "The quick brown fox &amp; the lazy dog.\n  Indented; &#65;BC\n" * 20
    assert taint.scrub(prose) == prose


@FUZZ
@given(
    st.text(
        alphabet=st.sampled_from(list("ab &#x;1\n\t\r\x0b\x1c\x1f\x85\u00a0\u2028\u3000é;AMPamp")),
        max_size=60,
    )
)
def test_the_fast_and_the_mapped_normal_view_agree(text: str) -> None:
    view, starts, ends = normal_map(text)
    assert view == normal(text)
    assert len(starts) == len(ends) == len(view)
    assert all(0 <= a < b <= len(text) for a, b in zip(starts, ends, strict=True))


@FUZZ
@given(
    st.text(alphabet=st.sampled_from(list("0a=\\&;#x1")), min_size=8, max_size=20),
    st.sampled_from(sorted(echoes("placeholder"))),
    st.text(alphabet=st.sampled_from(list("xyz .,\n=\\\r")), max_size=10),
    st.text(alphabet=st.sampled_from(list("xyz .,\n=\\\r")), max_size=10),
)
def test_a_value_of_marks_and_references_is_caught(
    secret: str, form: str, left: str, right: str
) -> None:
    """Values made of continuation marks and reference characters, beside more marks: where
    the views disagree with the value's own characters (the cases above were found so)."""
    _caught(secret, form, left, right)


@FUZZ
@given(
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=24),
    st.sampled_from(sorted(echoes("placeholder"))),
    st.text(alphabet=st.sampled_from(list("xyz .,\n")), max_size=10),
    st.text(alphabet=st.sampled_from(list("xyz .,\n")), max_size=10),
)
def test_any_secret_in_any_form_is_caught(secret: str, form: str, left: str, right: str) -> None:
    _caught(secret, form, left, right)


def _caught(secret: str, form: str, left: str, right: str) -> None:
    echoed = echoes(secret)[form]
    # A secret (or a form of it) that is part of the marker itself, such as "[REDACTE", is
    # still replaced, but the marker put in its place spells it again.
    assume(secret not in TAINTED and echoed not in TAINTED)
    out = TaintSet([secret]).scrub(left + echoed + right)
    assert echoed not in out
    assert secret not in out and TAINTED in out


# -- through a real tool result ------------------------------------------------------------

PROBE = """
import os, sys
from echo_forms import echoes  # beside this script
token = os.environ["CANARY_TOKEN"]
for name, text in sorted(echoes(token).items()):
    print(f"== {name} ==")
    print(text)
    print(f"== end {name} ==", file=sys.stderr)
    print(text, file=sys.stderr)
"""


def _session(root: Path) -> Session:
    ticks = itertools.count()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    opened = Session(
        Workspace(root),
        environ={"PROCTOR_HOME": str(root / ".home")},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
        signer=signer_from_seed(bytes(range(32))),
    )
    _OPEN.append(opened)
    return opened


def test_a_command_echoing_every_form_leaks_none(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(
        root,
        "echoer",
        f"""minimum_proctor: 0.1.0
credentials:
  api:
    provider: canary
    auth:
      api_key: {{delivery: {{env: CANARY_TOKEN}}}}
methods:
  main:
    steps:
      - id: run
        tool: command.execute
        credential: api
        inputs: {{argv: ["{sys.executable}", "tools/echo.py"]}}
""",
    )
    (root / "tools" / "echo.py").write_text(PROBE)
    source = Path(__file__).read_text(encoding="utf-8")
    helper = source[source.index("def echoes(") : source.index("\n\nSECRET = ")]
    (root / "tools" / "echo_forms.py").write_text(
        "import base64, html, textwrap\n\n\n" + helper + "\n", encoding="utf-8"
    )
    secret = "canary&" + secrets.token_hex(12) + "<x>"
    env = _session(root).run("echoer#main", cwd=root, request_secrets={"api": secret})
    assert env.outcome == "completed", env.refusal
    out = env.result
    forms = echoes(secret)
    for name in forms:
        assert f"== {name} ==" in out["stdout"]  # the text around each form is kept
    stored = b"".join(p.read_bytes() for p in sorted((root / ".proctor").rglob("*")) if p.is_file())
    audit = (root / ".proctor" / "audit.jsonl").read_text(encoding="utf-8")
    receipts = all_bytes(root / ".proctor" / "receipts")
    shown = json.dumps(env.to_json(), ensure_ascii=False)
    for name, echoed in [("raw", secret), *forms.items()]:
        for where, text in (("stdout", out["stdout"]), ("stderr", out["stderr"]), ("env", shown)):
            assert echoed not in text, (name, where)
        assert echoed not in audit, name
        assert echoed.encode() not in stored, name
        assert echoed.encode() not in receipts, name
        # as stored JSON escapes them (newlines, quotes, non-ASCII)
        escaped = json.dumps(echoed)[1:-1]
        assert escaped.encode() not in stored, name
    assert out["stdout"].count(TAINTED) >= len(forms)


def test_a_reference_to_two_characters_is_cut_by_the_walk() -> None:
    # &nvlt; reads as "<" and U+20D2 together: no per-character pattern lists it, so the cut
    # falls back to walking the normal view, and still removes it all
    secret = "ab<\u20d2cdefgh"
    out = TaintSet([secret]).scrub("x ab&nvlt;cdefgh y")
    assert out == f"x {TAINTED} y"

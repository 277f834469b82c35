"""The sanitizer: credential shapes (checked against gitleaks' rules), secret names, taint."""

from __future__ import annotations

import base64
import re
import string
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from proctor.runtime.sanitize import TaintSet, is_secret_name, scrub_text, scrub_value
from tests.corpora import corpus_dir

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def _s(alphabet: str, n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=n, max_size=n)


# gitleaks rule id -> a strategy for a fake token of that shape.
SHAPES: dict[str, st.SearchStrategy[str]] = {
    "aws-access-token": st.tuples(st.sampled_from(["AKIA", "ASIA"]), _s("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)).map("".join),  # noqa: E501 - one shape per line reads best
    "github-pat": _s(ALNUM, 36).map(lambda s: "ghp_" + s),
    "github-oauth": _s(ALNUM, 36).map(lambda s: "gho_" + s),
    "github-app-token": _s(ALNUM, 36).map(lambda s: "ghs_" + s),
    "github-refresh-token": _s(ALNUM, 36).map(lambda s: "ghr_" + s),
    "github-fine-grained-pat": _s(ALNUM + "_", 82).map(lambda s: "github_pat_" + s),
    "gitlab-pat": _s(ALNUM + "_-", 20).map(lambda s: "glpat-" + s),
    "slack-bot-token": st.tuples(_s("0123456789", 12), _s("0123456789", 12), _s(ALNUM, 24)).map(lambda t: f"xoxb-{t[0]}-{t[1]}-{t[2]}"),  # noqa: E501 - one shape per line reads best
    "slack-webhook-url": _s(ALNUM, 44).map(lambda s: "https://hooks.slack.com/services/" + s),
    "jwt": st.tuples(_s(ALNUM, 20), _s(ALNUM, 24), _s(ALNUM + "_-", 30)).map(lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}"),  # noqa: E501 - one shape per line reads best
    "anthropic-api-key": _s(ALNUM + "_-", 93).map(lambda s: "sk-ant-api03-" + s + "AA"),
    "openai-api-key": st.tuples(_s(ALNUM, 20), _s(ALNUM, 20)).map(lambda t: f"sk-{t[0]}T3BlbkFJ{t[1]}"),  # noqa: E501 - one shape per line reads best
    "stripe-access-token": _s(ALNUM, 24).map(lambda s: "sk_live_" + s),
    "npm-access-token": _s(string.ascii_lowercase + string.digits, 36).map(lambda s: "npm_" + s),
    "pypi-upload-token": _s(ALNUM + "_-", 60).map(lambda s: "pypi-AgEIcHlwaS5vcmc" + s),
    "huggingface-access-token": _s(string.ascii_letters, 34).map(lambda s: "hf_" + s),
    "gcp-api-key": _s(ALNUM + "_-", 35).map(lambda s: "AIza" + s),
    "azure-ad-client-secret": st.tuples(_s(ALNUM, 3), _s("0123456789", 1), _s(ALNUM, 32)).map(lambda t: f"{t[0]}{t[1]}Q~{t[2]}"),  # noqa: E501 - one shape per line reads best
    "digitalocean-pat": _s(HEX, 64).map(lambda s: "dop_v1_" + s),
    "shopify-access-token": _s(HEX, 32).map(lambda s: "shpat_" + s),
    "twilio-api-key": _s(HEX, 32).map(lambda s: "SK" + s),
}  # fmt: skip


def _gitleaks() -> dict[str, re.Pattern[str]]:
    data = tomllib.loads((corpus_dir("gitleaks-rules") / "gitleaks.toml").read_text())
    out = {}
    for rule in data["rules"]:
        if rule["id"] in SHAPES:
            out[rule["id"]] = re.compile(rule["regex"].replace(r"\z", r"\Z"))
    return out


SURROUND = st.text(string.ascii_letters + " .,;\n", max_size=60)


@pytest.mark.parametrize("rule", sorted(SHAPES))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_claimed_gitleaks_shape_is_removed(rule: str, data: st.DataObject) -> None:
    pattern = _gitleaks()[rule]
    token = data.draw(SHAPES[rule])
    before, after = data.draw(SURROUND), data.draw(SURROUND)
    assert pattern.search(f" {token} "), "the fake token must be a real gitleaks match"
    text = f"{before} {token} {after}"
    out = scrub_text(text)
    assert token not in out
    assert out.startswith(before + " ") and out.endswith(" " + after)
    assert "[REDACTED:" in out


def test_private_key_blocks_including_cut_short_ones() -> None:
    block = (corpus_dir("detect-secrets-testdata") / "test_data/files/private_key").read_text()
    out = scrub_text("before\n" + block + "after\n")
    assert out == "before\n[REDACTED:private_key]\nafter\n"
    cut = scrub_text("x " + block[:50])
    assert "somethingSuper" not in cut and cut.startswith("x ")
    escaped = (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEv\\n-----END PRIVATE KEY-----\\n"}'
    )
    assert "MIIEv" not in scrub_text(escaped)


def test_detect_secrets_keyword_findings_and_allowlist() -> None:
    data = corpus_dir("detect-secrets-testdata") / "test_data"
    ini = scrub_text((data / "config.ini").read_text())
    assert "123456789a1234" not in ini  # Secret Keyword, line 2
    assert "password = 12345678901234  # pragma: allowlist secret" in ini
    yaml = scrub_text((data / "config.yaml").read_text())
    assert "MjNjcnh1IDJieXJpdXYyeXJpaTJidnl1MnI4OXkyb3UwMg==" not in yaml
    assert "'ToCynx5Se4e2PtoZxEhW7lUJcOX15c54'  # pragma: allowlist secret" in yaml
    assert "AKIATESTTESTTESTTEST" not in yaml
    assert "uuid_should_be_ignored: '203db13e-70c7-462b-9a3d-bf32640cb0be'" in yaml
    diff = scrub_text((data / "sample.diff").read_text())
    assert "a2480a72004fc40d124495fd59f5b482034fbadd" not in diff


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        ("Authorization: Bearer abcdefghij.klmnop", "Authorization: Bearer ", "abcdefghij"),
        ("git clone https://bob:hunter22@example.com/x", "https://bob:", "hunter22"),
        ("max_tokens: 1024, token_count = 5", "max_tokens: 1024, token_count = 5", "REDACTED"),
        ("if token == other:", "if token == other:", "REDACTED"),
    ],
)
def test_header_url_and_false_positives(text: str, kept: str, gone: str) -> None:
    out = scrub_text(text)
    assert kept in out and gone not in out


@pytest.mark.parametrize(
    ("name", "secret"),
    [("password", True), ("API_KEY", True), ("x-api-key", True), ("clientSecret", True),
     ("access_token", True), ("Cookie", True), ("private_key", True), ("passwd", True),
     ("credentials", True), ("session", True), ("authorization", True),
     ("max_tokens", False), ("token_count", False), ("password_length", False),
     ("secret_name", False), ("sort_key", False), ("client_id", False), ("tokens", False)],
)  # fmt: skip
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_scrub_value_paths_conversions_and_no_mutation() -> None:
    class Boom(Exception):
        pass

    value: dict[str, Any] = {
        "a": {"Api-Key": "k", "list": [b"x ghp_" + b"a" * 36, {2, 1}], "p": Path("d/f")},
        "max_tokens": 5,
        "password": None,
        "err": Boom("xoxb-1234567890-1234567890-abc"),
        "weird key": {"token": "t"},
    }
    original = repr(value)
    safe, paths = scrub_value(value)
    assert repr(value) == original
    assert safe["a"]["Api-Key"] == "[REDACTED:secret_field]"
    assert safe["a"]["list"][1] == [1, 2] and safe["a"]["p"] == "d/f"
    assert safe["max_tokens"] == 5 and safe["password"] is None
    assert safe["err"].startswith("Boom: ") and "1234567890" not in safe["err"]
    assert paths == ["$.a.Api-Key", "$.a.list[0]", "$.err", '$["weird key"].token']


def test_taint_exact_and_encoded_forms() -> None:
    secret = "s3cr3t/Value+9!"
    taint = TaintSet([secret, "short"])
    forms = [
        secret,
        quote(secret, safe=""),
        secret.encode().hex(),
        base64.b64encode(b"user:" + secret.encode()).decode(),
        base64.urlsafe_b64encode(b"xy" + secret.encode()).decode(),
    ]
    for form in forms:
        out = scrub_text(f"head {form} tail", taint)
        assert out.startswith("head ") and out.endswith(" tail"), out
        assert secret not in out and form not in out, (form, out)
    assert scrub_text("a short word", taint) == "a short word"  # < 8 chars: whole values only
    assert scrub_value({"x": "short"}, taint) == ({"x": "[REDACTED:tainted]"}, ["$.x"])


@settings(max_examples=60, deadline=None)
@given(secret=st.text(ALNUM + "!@#$%^&*()/+=-_", min_size=8, max_size=40), before=SURROUND, after=SURROUND, shift=st.integers(0, 2))  # fmt: skip  # noqa: E501 - one shape per line reads best
def test_taint_property_base64_any_alignment(
    secret: str, before: str, after: str, shift: int
) -> None:
    assume(secret not in before and secret not in after)
    taint = TaintSet([secret])
    blob = base64.b64encode(b"\x01" * shift + secret.encode() + b"\x02").decode()
    out = scrub_text(f"{before}|{blob}|{after}", taint)
    assert out.startswith(before + "|") and out.endswith("|" + after)
    decoded = out.split("|")[-2]
    assert blob not in out and secret not in out and "[REDACTED:tainted]" in decoded

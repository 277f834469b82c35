"""The sanitizer: credential shapes (checked against gitleaks' rules), secret names, taint."""

from __future__ import annotations

import base64
import json
import re
import string
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from proctor.runtime.boundary import detect as san
from proctor.runtime.boundary.sanitize import (
    MIN_TAINT_LENGTH,
    TaintSet,
    is_secret_name,
    scrub_text,
    scrub_value,
)
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


# --------------------------------------------------------------------------- fast paths
# Each fast path returns a string without the scan. These tests prove, from the compiled
# patterns themselves, that no detector could have changed such a string.

_CATEGORY = {
    "CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W",
}  # fmt: skip
INF = float("inf")


def _cases(char: str, ignore: bool) -> tuple[str, ...]:
    return (char, char.lower(), char.upper()) if ignore else (char,)


def _fits(items: Any, char: str, ignore: bool) -> bool:
    """Whether ``char`` is in an ``IN`` set (under (?i), in either case)."""
    negate, hit = False, False
    for op, av in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit |= chr(av) in _cases(char, ignore)
        elif name == "RANGE":
            hit |= any(av[0] <= ord(c) <= av[1] for c in _cases(char, ignore))
        elif name == "CATEGORY":
            hit |= re.fullmatch(_CATEGORY[str(av)], char) is not None
        else:
            raise AssertionError(f"unhandled set item {name}")
    return hit != negate


def min_width(pattern: str, alphabet: str) -> float:
    """The fewest characters of ``alphabet`` a match of ``pattern`` can consume (INF: none).

    Look-arounds and back-references count as matching anything: that only makes the
    bound smaller, so a bound found here is safe. ``alphabet`` is ASCII, where (?i) is
    plain upper/lower case.
    """

    def seq(nodes: Any, ignore: bool) -> float:
        return sum((node(op, av, ignore) for op, av in nodes), 0.0)

    def chars(op: str, av: Any, ignore: bool) -> bool:
        if op == "LITERAL":
            return any(chr(av) in _cases(c, ignore) for c in alphabet)
        if op == "NOT_LITERAL":
            return any(chr(av) not in _cases(c, ignore) for c in alphabet)
        if op == "ANY":
            return bool(alphabet)
        if op == "IN":
            return any(_fits(av, c, ignore) for c in alphabet)
        if op == "CATEGORY":
            return any(re.fullmatch(_CATEGORY[str(av)], c) for c in alphabet)
        raise AssertionError(op)

    def node(op_: Any, av: Any, ignore: bool) -> float:
        op = str(op_)
        if op in ("LITERAL", "NOT_LITERAL", "ANY", "IN", "CATEGORY"):
            return 1.0 if chars(op, av, ignore) else INF
        if op in ("AT", "ASSERT", "ASSERT_NOT", "GROUPREF"):
            return 0.0
        if op == "SUBPATTERN":
            _group, add, remove, body = av
            return seq(body, bool((ignore or add & re.I) and not remove & re.I))
        if op == "ATOMIC_GROUP":
            return seq(av, ignore)
        if op == "BRANCH":
            return min(seq(branch, ignore) for branch in av[1])
        if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, body = av
            return 0.0 if low == 0 else low * seq(body, ignore)
        raise AssertionError(f"unhandled node {op}")

    parsed = re._parser.parse(pattern)  # type: ignore[attr-defined]
    return seq(parsed, bool(parsed.state.flags & re.I))


SHORT_ALPHABET = string.ascii_letters + string.digits + "_./ -"
SNAKE_ALPHABET = string.ascii_lowercase + string.digits + "_."
DIGEST_ALPHABET = "sha256:" + HEX
UUID_ALPHABET = HEX + "-"
TIME_ALPHABET = string.digits + "-:T Z.+"


def test_min_width_reads_patterns_right() -> None:
    assert min_width(r"ab{3}c?", "abc") == 4
    assert min_width(r"a(?:x|yz)[0-9]{2,}", "ayz09") == 5
    assert min_width(r"(?<=q)a(?!b)", "a") == 1
    assert min_width(r"[^a]", "a") == INF and min_width(r"A", "a") == INF
    assert min_width(r"(?i:A)", "a") == 1 and min_width(r"(?i)[A-C]", "b") == 1
    assert min_width(r"\d+:", "0123") == INF


@pytest.mark.parametrize(
    ("alphabet", "longest"),
    [(SHORT_ALPHABET, san.SHORT_PLAIN), (SNAKE_ALPHABET, san.SHORT_SNAKE)],
    ids=["plain", "snake"],
)
def test_no_shape_fits_a_short_plain_string(alphabet: str, longest: int) -> None:
    widths = [(s.kind, min_width(s.pattern.pattern, alphabet)) for s in san._SHAPES]
    assert min(width for _kind, width in widths) > longest, widths
    # An assignment needs ``=`` or ``:``; neither is in the alphabet.
    assert min_width(san._ASSIGN_TEXT, alphabet) == INF


@pytest.mark.parametrize(
    "alphabet", [DIGEST_ALPHABET, UUID_ALPHABET, TIME_ALPHABET], ids=["digest", "uuid", "time"]
)
def test_no_shape_fits_a_digest_uuid_or_timestamp(alphabet: str) -> None:
    for shape in san._SHAPES:
        assert min_width(shape.pattern.pattern, alphabet) == INF, shape.kind


FORMS = st.one_of(
    _s(HEX, 64).map(lambda h: "sha256:" + h),
    st.uuids().map(str),
    _s(HEX, 32),  # a UUID's hex digits alone (a run's id); HEX is in UUID_ALPHABET above
    st.datetimes().map(lambda d: d.isoformat()),
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat(timespec="microseconds")),
    st.text(SHORT_ALPHABET, max_size=san.SHORT_PLAIN),
    st.text(SNAKE_ALPHABET, max_size=san.SHORT_SNAKE),
)


@settings(max_examples=300, deadline=None)
@given(form=FORMS)
def test_fast_path_forms_are_recognised_and_hold_no_assignment(form: str) -> None:
    assume(all(c not in form for c in "\u2028\u2029"))
    assert san.SAFE_FORM.fullmatch(form), form
    # The only names before an operator in these forms are ``sha256`` or none at all
    # (``T``/``Z`` follow a digit, so no name can start there).
    for match in san._assign_pattern().finditer(form):
        assert not is_secret_name(match.group("name")), form
    assert scrub_text(form) == form


@pytest.mark.parametrize("rule", sorted(SHAPES))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_no_secret_shape_takes_a_fast_path(rule: str, data: st.DataObject) -> None:
    token = data.draw(SHAPES[rule])
    assert san.SAFE_FORM.fullmatch(token[:8] + "-" + token[8:]) is None
    for text in (token, "sha256:" + token, f"2026-01-01 {token}", f"{token} 12:00"):
        assert san.SAFE_FORM.fullmatch(text) is None
        assert token not in scrub_text(text)


@settings(max_examples=40, deadline=None)
@given(secret=st.one_of(_s(HEX, 8), _s(ALNUM, 4), _s(SHORT_ALPHABET, 9)), where=FORMS)
@example(secret="0000Token", where="sha256:" + "0" * 64)
def test_tainted_values_are_replaced_in_fast_path_forms(secret: str, where: str) -> None:
    taint = TaintSet([secret])
    assert scrub_text(secret, taint) == "[REDACTED:tainted]"
    # A tainted key is replaced; its value is kept unless the key also names a secret
    # (``0000Token`` does), when the value is withheld as a secret field as well.
    kept = "[REDACTED:secret_field]" if is_secret_name(secret) else "v"
    assert scrub_value({"k": secret, secret: "v"}, taint)[0] == {
        "k": "[REDACTED:tainted]",
        "[REDACTED:tainted]": kept,
    }
    embedded = where[:5] + secret + where[5:]
    if len(secret) >= MIN_TAINT_LENGTH:
        assert secret not in scrub_text(embedded, taint)


# --------------------------------------------------------------------------- cues


SAMPLES = {
    "private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "slack_token": "xapp-1-A0123456789-abcdefghij",
    "slack_webhook": "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX",
    "discord_webhook": "https://DISCORD.com/api/WEBHOOKS/123/abcdefghijklmnopqrstuvwx",
    "discord_token": "discord " + "M" + "a" * 23 + ".abcdef." + "b" * 27,
    "azure_sas_signature": "https://x.blob.core.windows.net/c?sv=1&sig=abcdefghijklmnop1234",
    "sendgrid_key": "SG." + "a" * 22 + "." + "b" * 43,
    "age_secret_key": "AGE-SECRET-KEY-1" + "Q" * 58,
    "google_api_key": "AIza" + "x" * 35,
    "bearer_token": "authorization: BEARER abcdefgh12345",
    "basic_auth": "AUTHORIZATION = Basic dXNlcjpwYXNz",
    "url_password": "see https://bob:hunter22@example.com/",
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
@pytest.mark.parametrize("around", ["", "é ", "K "], ids=["ascii", "accent", "kelvin"])
def test_every_shape_is_cued_in_ascii_and_other_text(kind: str, around: str) -> None:
    out = scrub_text(f"{around}x {SAMPLES[kind]} y")
    assert f"[REDACTED:{kind}]" in out, out


@pytest.mark.parametrize(
    "text",
    [
        "password_hash = 'abcdef'",
        "sessionid=abc123",
        "secret_1: abc",
        "pa_ss_word = zzzzzz",
        "x = 1\nconfig.api_key => 'zzzzzz'\ny = 2",
        "名前 = 1; token := zzzzzz",
    ],
)
def test_assignments_of_every_secret_name_are_found(text: str) -> None:
    assert "[REDACTED:secret_field]" in scrub_text(text)
    assert "zzzzzz" not in scrub_text(text) and "abc" not in scrub_text(text).split("=")[-1]


NAMES = st.sampled_from(
    ["password", "API_KEY", "clientSecret", "auth_token", "db.password", "x-api-key", "dsn",
     "passphrase", "Cookie", "private_key", "hashed_secret", "pat"]
)  # fmt: skip
OPERATORS = [" = ", "=", ": ", " := ", " => ", '": "']
CODE_LINES = st.lists(
    st.sampled_from(
        ["def f(x: int) -> str:", "    return {'a': b}", "path = root / name", "if a == b:",
         "max_tokens = 5", "# see https://example.com/x", "sort_key: str", "A_B = C_D - 1"]
    ),
    max_size=8,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    before=CODE_LINES, after=CODE_LINES, name=NAMES, op=st.sampled_from(OPERATORS),
    quote=st.sampled_from(["", "'", '"']), value=_s(ALNUM, 12),
    token=st.sampled_from(["", " ghp_" + "a" * 36]),
)  # fmt: skip
def test_secret_assignment_anywhere_in_code_is_redacted(
    before: list[str], after: list[str], name: str, op: str, quote: str, value: str, token: str
) -> None:
    line = f'"{name}": "{value}"' if op == '": "' else f"{name}{op}{quote}{value}{quote}"
    text = "\n".join([*before, line + token, *after])
    out = scrub_text(text)
    assert value not in out and "ghp_" not in out
    assert out.count("\n") == text.count("\n")


def test_scrub_value_keys_cycles_and_plain_fast_path() -> None:
    token = "ghp_" + "k" * 36
    loop: list[Any] = ["x"]
    loop.append(loop)
    value = {
        "ok": "completed",  # plain key, plain value: the fast path
        "pwd": "hunter22",  # a plain key that names a secret
        token: 1,  # a key that is a credential
        "nested": ({"sha256": "sha256:" + "0" * 64, "at": "2026-01-01T00:00:00Z"}, loop),
    }
    safe, paths = scrub_value(value)
    assert safe["ok"] == "completed" and safe["pwd"] == "[REDACTED:secret_field]"
    assert token not in json.dumps(safe) and safe["[REDACTED:github_token]"] == 1
    assert safe["nested"][0] == value["nested"][0] and safe["nested"][1] == ["x", "[CYCLE]"]
    assert paths == ["$.<key>", "$.pwd"]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("PWD=/work/ws", True),  # what env prints inside a sandboxed command
        ("OLDPWD=/tmp", True),
        ("HOME=/root\nPWD=/srv/app\n", True),
        ("PWD=hunter2hunter2", False),  # not a path: a password
        ("pwd=/etc/x", False),  # only the shell's own spelling
        ("DB_PWD=/etc/x", False),
        ("PWD='hunter2'", False),
    ],
)
def test_the_shells_working_directory_is_not_taken_for_a_password(text: str, kept: bool) -> None:
    assert (scrub_text(text) == text) is kept, scrub_text(text)


def test_the_shells_working_directory_as_a_key_keeps_a_path_only() -> None:
    safe = scrub_value({"PWD": "/w", "PWD_": "hunter2", "pwd": "/w"})[0]
    assert safe == {
        "PWD": "/w",
        "PWD_": "[REDACTED:secret_field]",
        "pwd": "[REDACTED:secret_field]",
    }


def test_a_string_seen_safe_is_kept_and_a_changed_one_never_is() -> None:
    from proctor.runtime.boundary import sanitize

    note = "no host set an authority: effects allow, reach workspace; " + "x" * 40
    secret = "the key: ghp_" + "k" * 36
    assigned = "then password=hunter22hunter22"
    for _ in range(3):  # the first walk fills the memo, the next ones read it
        safe, paths = scrub_value({"notes": [note, secret], "t": assigned})
        assert safe["notes"][0] == note and paths == ["$.notes[1]", "$.t"]
        assert "ghp_" not in json.dumps(safe) and "hunter22" not in json.dumps(safe)
    assert note in sanitize._SAFE_SEEN
    assert secret not in sanitize._SAFE_SEEN and assigned not in sanitize._SAFE_SEEN
    # a tainted value is replaced even where the memo holds it as safe without taint
    taint = TaintSet([note])
    assert scrub_value([note], taint) == (["[REDACTED:tainted]"], ["$[0]"])


def test_a_long_key_is_kept_only_when_no_detector_changes_it() -> None:
    safe, paths = scrub_value(
        {
            "standing_approvals_of_the_run": [],
            "see password=hunter22hunter22": 1,
            "a github_token ghp_" + "k" * 36: 2,
            "db_password_for_the_staging_box": "hunter22",
        }
    )
    assert safe["standing_approvals_of_the_run"] == [] and "hunter22" not in json.dumps(safe)
    assert "ghp_" not in json.dumps(safe) and len(safe) == 4
    assert paths == [
        "$.<key>",
        "$.db_password_for_the_staging_box",
        '$["see password=[REDACTED:secret_field]"]',
    ]

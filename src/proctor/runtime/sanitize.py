"""The sanitizer: removes secrets from tool results, refusals, audit records and CLI output.

Three detectors, applied in this order:

1. **Taint set** (:class:`TaintSet`): the exact secret values proctor delivered to a tool, and
   the forms a tool could hand them back in (base64 and base64url at every byte alignment, hex,
   URL encoding, JSON string escaping). A value shorter than :data:`MIN_TAINT_LENGTH` is too
   likely to occur by chance, so it is only replaced where it is an entire string.
2. **Credential shapes**: provider tokens whose form identifies them (AWS key ids, GitHub and
   GitLab tokens, Slack tokens and webhooks, Discord, PEM and OpenSSH private-key blocks, JWTs,
   OpenAI/Anthropic/Stripe/npm/PyPI/Hugging Face/Google/Azure keys, bearer tokens, passwords in
   URLs).
3. **Secret-named fields**: a mapping key such as ``password`` or ``api_key`` (and, in text, an
   assignment ``api_key = ...``) has its value replaced. :func:`is_secret_name` decides; counts
   and metadata (``max_tokens``, ``token_count``, ``password_length``) are not secrets.

Only the secret is replaced; the text around it is kept. The marker is
``[REDACTED:<kind>]`` with ``kind`` one of :data:`KINDS`; the marker itself never matches a
detector, so scrubbing is idempotent.

Offsets and encodings: tools scrub the WHOLE content they read before slicing, paging or
encoding it, so no argument of a tool can cut a secret into a piece the scrubber misses. The
taint matching of encoded forms is the second line of defence for a tool that encodes anyway.
A line carrying ``pragma: allowlist secret`` (the detect-secrets convention) is exempt from the
secret-name heuristic in text only; shapes and tainted values are replaced on it all the same.

What this does not do: detect arbitrary high-entropy strings (digests are everywhere in proctor's
own output), or find a secret split across two separately scrubbed strings.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import enum
import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any, TypeAlias
from urllib.parse import quote, quote_plus

__all__ = [
    "KINDS",
    "MIN_TAINT_LENGTH",
    "Sanitizer",
    "TaintSet",
    "is_secret_name",
    "marker",
    "scrub_text",
    "scrub_value",
]

MIN_TAINT_LENGTH = 8


def marker(kind: str) -> str:
    """The replacement text for a secret of ``kind``: ``[REDACTED:<kind>]``."""
    return f"[REDACTED:{kind}]"


# --------------------------------------------------------------------------- names

# Words that make a name secret wherever they sit in it (unless a metadata suffix follows).
_STRONG = frozenset(
    {
        "password", "passwd", "pwd", "passphrase", "secret", "secrets", "credential",
        "credentials", "cookie", "cookies", "authorization", "apikey", "privatekey",
        "secretkey", "accesskey", "clientsecret", "accesstoken", "refreshtoken", "authtoken",
        "sessiontoken", "bearer", "pat",
    }
)  # fmt: skip
# Words that make a name secret only as its last part: ``token`` yes, ``token_count`` no.
_WEAK_LAST = frozenset({"token", "session", "auth", "sessionid", "dsn"})
# ``key`` as the last part is secret only after one of these (``api_key``, not ``sort_key``).
_KEY_PREFIXES = frozenset(
    {
        "api", "access", "secret", "private", "signing", "master", "encryption", "client",
        "auth", "account", "license", "service", "app", "admin", "subscription", "deploy",
        "ssh", "gpg", "pgp", "shared", "session", "webhook", "storage", "consumer", "hmac",
    }
)  # fmt: skip
# A last part that says the field describes a secret rather than holding one.
_METADATA = frozenset(
    {
        "count", "counts", "length", "len", "size", "type", "kind", "name", "names", "id",
        "ids", "path", "file", "env", "var", "ref", "hint", "policy", "required", "enabled",
        "expires", "expiry", "expiration", "ttl", "at", "url", "field", "fields", "source",
        "provider", "scope", "scopes", "label", "description", "set", "present", "redacted",
        "alias", "version", "format", "mode", "strength", "min", "max", "limit", "digest",
    }
)  # fmt: skip
_NAME_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a field named ``name`` holds a secret (case- and separator-insensitive).

    ``password``, ``API_KEY``, ``x-api-key``, ``clientSecret``, ``access_token``, ``Cookie``,
    ``private_key``, ``hashed_secret`` are secret; ``max_tokens``, ``token_count``,
    ``password_length``, ``secret_name``, ``sort_key``, ``client_id`` are not.
    """
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    if not parts:
        return False
    last = parts[-1]
    if last in _METADATA and len(parts) > 1:
        return False
    if last in _WEAK_LAST or any(p in _STRONG for p in parts):
        return True
    joined = "".join(parts)
    if joined in _STRONG:
        return True
    return last in ("key", "keys") and len(parts) > 1 and parts[-2] in _KEY_PREFIXES


# --------------------------------------------------------------------------- shapes


@dataclasses.dataclass(frozen=True)
class _Shape:
    kind: str
    # The cue: every match contains the literal character ``first`` followed by the regex
    # ``rest``; the full pattern runs only after its cue is seen (see _cue_scans). A ``back``
    # cue is searched in the reversed text and written reversed (``_[pousr]hg`` is
    # ``gh[pousr]_``): a prefix before a common character costs a look-behind at every
    # occurrence of that character, a suffix after it only a quick literal check.
    first: str
    rest: str
    pattern: re.Pattern[str]
    group: int = 0  # the group holding the secret; 0 = the whole match
    back: bool = False


def _shape(
    kind: str, first: str, rest: str, regex: str, group: int = 0, *, back: bool = False
) -> _Shape:
    return _Shape(kind, first, rest, re.compile(regex), group, back)


def _B(regex: str) -> str:
    """``regex`` anchored at a token boundary (``\\b`` would also fire after ``-``).

    The boundary look-behind goes after the pattern's literal prefix so that sre can search
    for that prefix in C instead of trying the look-behind at every position.
    """
    prefix = re.match(r"[A-Za-z0-9_-]+", regex)
    assert prefix is not None, regex
    lit = prefix.group(0)
    return f"{lit}(?<![A-Za-z0-9_]{lit}){regex[len(lit) :]}"


_E = r"(?![A-Za-z0-9_])"
_NB = r"(?<![A-Za-z0-9_])"
_PEM = (
    r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|[\s\S]*\Z)"
)

_SHAPES: tuple[_Shape, ...] = (
    # An unterminated block (a read cut short) is redacted to the end of the text.
    _shape("private_key", "-", "----BEGIN", _PEM),
    _shape("aws_access_key_id", "A", "(?:KIA|SIA|3T|BIA|CCA)",
           _B(r"A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}" + _E)),
    _shape("github_token", "_", "[pousr]hg", _B(r"gh[pousr]_[A-Za-z0-9]{30,251}" + _E),
           back=True),
    _shape("github_token", "_", "tap_buhtig", _B(r"github_pat_[A-Za-z0-9_]{22,255}"), back=True),
    _shape("gitlab_token",
           "-", "(?:tap|td|tr|ttp|tf|taos|tbc|tmi)lg",
           _B(r"gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt)-[A-Za-z0-9_-]{20,}"), back=True),
    _shape("slack_token", "-", "[abposre]xox", _B(r"xox[abposre]-[A-Za-z0-9-]{10,}"), back=True),
    _shape("slack_token", "-", "ppax", _B(r"xapp-\d-[A-Za-z0-9-]{10,}"), back=True),
    _shape("slack_webhook", "/", r"(?:services|workflows|triggers)/",
           r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/_-]{8,})", 1),
    # Case-insensitive shapes have no cue here: see _CASELESS_CUES.
    _shape("discord_webhook", "", "",
           r"[Dd](?i:iscord(?:app)?\.com/api/webhooks/)\d+/([A-Za-z0-9_-]{20,})", 1),
    # A bot token has no fixed prefix: it is looked for only where the text names Discord.
    _shape("discord_token", "", "",
           _NB + (r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}" + _E)),
    _shape("jwt", "J", "ye",
           _B(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*(?:={0,2})"), back=True),
    _shape("anthropic_key", "-", "ks", _B(r"sk-ant-[A-Za-z0-9_-]{20,}"), back=True),
    _shape("openai_key", "-", "ks", _B(r"sk-(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_-]{20,}"),
           back=True),
    _shape("stripe_key", "_", "(?:k[sr]|cesehw)",
           r"[srw](?<![A-Za-z0-9_][srw])"
           r"(?:k_(?:test|live|prod)_[A-Za-z0-9]{10,99}|hsec_[A-Za-z0-9]{20,})", back=True),
    _shape("npm_token", "_", "mpn", _B(r"npm_[A-Za-z0-9]{36}" + _E), back=True),
    _shape("pypi_token", "-", "ipyp", _B(r"pypi-AgE[A-Za-z0-9_-]{50,}"), back=True),
    _shape("huggingface_token", "_", "fh", _B(r"hf_[A-Za-z]{34}" + _E), back=True),
    _shape("google_api_key", "A", "Iza", _B(r"AIza[A-Za-z0-9_-]{35}")),
    _shape("azure_client_secret", "~", "Q",
           _NB + r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])", back=True),
    _shape("azure_sas_signature", "=", "gis", r"[?&]sig=([A-Za-z0-9%+/=]{16,})", 1, back=True),
    _shape("sendgrid_key", "S", r"G\.",
           _B(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}")),
    _shape("twilio_key", "S", "K[0-9a-fA-F]{8}", _B(r"SK[0-9a-fA-F]{32}" + _E)),
    _shape("digitalocean_token", "_", "[opr]od", _B(r"do[opr]_v1_[a-f0-9]{64}"), back=True),
    _shape("shopify_token", "_", "[ats][acps]phs", _B(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
           back=True),
    _shape("age_secret_key", "A", "GE-SECRET-KEY-", r"AGE-SECRET-KEY-1[A-Z0-9]{58}"),
    _shape("bearer_token", "", "",
           r"[Bb](?<![A-Za-z0-9_][Bb])(?i:earer)\s+([A-Za-z0-9._~+/-]{8,}=*)", 1),
    _shape("basic_auth", "", "",
           r"[Aa](?<![A-Za-z0-9_][Aa])(?i:uthorization[\"']?\s*[:=]\s*[\"']?basic\s+)"
           r"([A-Za-z0-9+/]{6,}=*)", 1),
    # user:password@host in any URL; the user name is kept, the password replaced.
    _shape("url_password", ":", "//",
           r"://[^\s:@/?#\"'<>]{0,128}:([^\s@/?#\"'<>]{1,256})@", 1),
)  # fmt: skip

# ``name = value`` / ``"name": "value"`` in text, where the name is secret (decided in Python).
# The name is the whole run of name characters before the operator (hence the possessive
# ``{0,63}+``: backing off could only leave a name character before the operator).
_ASSIGN = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]{0,63}+)[\"']?[ \t]*(?:=>|:=|=(?!=)|:(?!:))[ \t]*"
    r"(?:(?P<q>[\"'])(?P<qv>[^\"'\n]{1,4096})(?P=q)"
    r"|(?P<v>(?:!![A-Za-z]+[ \t]+|(?:Bearer|Basic|Token|Bot)[ \t]+)?[^\s\"',;&)\]}]{1,4096}))"
)
# The same ``name["']?[ \t]*<operator>`` read backwards over the reversed text, so that a scan
# starts at the (few) operators instead of at every letter. It yields every name _ASSIGN can
# match (reversed), plus some that _ASSIGN would refuse; a longer run yields its last 64
# characters, and _ASSIGN refuses such a name anyway.
_NAMES_BEFORE = tuple(re.compile(op + r"[ \t]*[\"']?([\w.-]{1,64}+)") for op in "=:")
_ALLOWLIST = "pragma: allowlist secret"


@functools.lru_cache(maxsize=4096)
def _secret_reversed(reversed_name: str) -> bool:
    return is_secret_name(reversed_name[::-1])


def _assignment_lines(text: str) -> list[int]:
    """Starts of the lines that may hold ``<secret name> <operator>`` (only these can change)."""
    backwards = text[::-1]
    names: set[str] = set()
    for operator, scan in zip("=:", _NAMES_BEFORE, strict=True):
        if operator in text:
            names.update(scan.findall(backwards))
    starts: list[int] = []
    for name in names:
        if _secret_reversed(name):
            # Every line holding the name: a superset of the lines where it is assigned.
            forwards = name[::-1]
            at = text.find(forwards)
            while at >= 0:
                starts.append(text.rfind("\n", 0, at) + 1)
                at = text.find(forwards, at + len(forwards))
    return starts


def _line_of(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)]


def _assignment_repl(m: re.Match[str]) -> str:
    if not is_secret_name(m.group("name")):
        return m.group(0)
    group = "qv" if m.group("qv") is not None else "v"
    value = m.group(group)
    if "[REDACTED:" in value or _ALLOWLIST in _line_of(m.string, m.start()):
        return m.group(0)
    start, end = m.start(group) - m.start(), m.end(group) - m.start()
    whole = m.group(0)
    return whole[:start] + marker("secret_field") + whole[end:]


def _scrub_assignments(text: str, line_starts: list[int]) -> str:
    """Replace values of secret-named assignments on the given lines (no match spans lines)."""
    pieces: list[str] = []
    done = 0
    for start in sorted(set(line_starts)):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        pieces.append(text[done:start])
        pieces.append(_ASSIGN.sub(_assignment_repl, text[start:end]))
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def _replace_group(shape: _Shape) -> Any:
    def repl(m: re.Match[str]) -> str:
        if shape.group == 0:
            return marker(shape.kind)
        whole = m.group(0)
        start, end = m.start(shape.group) - m.start(), m.end(shape.group) - m.start()
        return whole[:start] + marker(shape.kind) + whole[end:]

    return repl


_REPLACERS = tuple(_replace_group(s) for s in _SHAPES)

#: Every ``kind`` a marker can name.
KINDS: tuple[str, ...] = (
    *sorted({s.kind for s in _SHAPES}),
    "secret_field",
    "tainted",
)


# The cue scans: one per direction and first character of a cue, each
# ``<literal>(?:(?P<gN>rest)|...)`` where group ``gN`` names the shapes to run. A scan runs
# only where ``in`` (memchr) finds its first character: sre searches a pattern that starts
# with a literal far faster than one that starts with a set, so there is no combined scan.
_Scan: TypeAlias = tuple[str, re.Pattern[str], dict[str, tuple[int, ...]]]


def _cue_scans(back: bool) -> tuple[_Scan, ...]:
    cues: dict[str, dict[str, list[int]]] = {}
    for index, shape in enumerate(_SHAPES):
        if shape.first and shape.back is back:
            cues.setdefault(shape.first, {}).setdefault(shape.rest, []).append(index)
    scans = []
    for first, rests in sorted(cues.items()):
        groups = {f"g{n}": tuple(indexes) for n, indexes in enumerate(rests.values())}
        inner = "|".join(f"(?P<g{n}>{rest})" for n, rest in enumerate(rests))
        scans.append((first, re.compile(f"{re.escape(first)}(?:{inner})"), groups))
    return tuple(scans)


_FORWARD_SCANS, _BACKWARD_SCANS = _cue_scans(False), _cue_scans(True)


def _kinds(*kinds: str) -> tuple[int, ...]:
    return tuple(i for i, s in enumerate(_SHAPES) if s.kind in kinds)


# Shapes whose text is matched case-insensitively, by a word every match contains (the bot
# token is looked for only where the text names Discord). ASCII text is lowered once and
# searched for the word (a literal regex: sre beats ``in`` on such words); other text by the
# word under re.IGNORECASE, which also folds characters such as U+0130 and U+212A onto ASCII
# letters the way the shape's own (?i) does.
_CASELESS_CUES: tuple[tuple[re.Pattern[str], re.Pattern[str], tuple[int, ...]], ...] = tuple(
    (re.compile(word), re.compile(word, re.IGNORECASE), _kinds(*kinds))
    for word, kinds in (
        ("earer", ("bearer_token",)),
        ("uthorization", ("basic_auth",)),
        ("iscord", ("discord_webhook", "discord_token")),
    )
)
assert {i for *_, indexes in _CASELESS_CUES for i in indexes} == {
    i for i, s in enumerate(_SHAPES) if not s.first
}, "every shape needs a cue"


# --------------------------------------------------------------------------- taint


def _b64_cores(raw: bytes, alphabet: bytes | None) -> set[str]:
    """Substrings of base64(prefix + raw + suffix) that hold for ANY prefix and suffix.

    Base64 works on 3-byte groups, so the encoding of a value inside a larger blob depends on
    its offset modulo 3; the characters touched by neighbouring bytes are dropped.
    """
    cores: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw, altchars=alphabet).decode("ascii")
        head = (shift * 8 + 5) // 6  # chars that depend on the unknown prefix bytes
        body = encoded.rstrip("=")
        tail_bits = ((shift + len(raw)) * 8) % 6
        core = body[head : len(body) - (1 if tail_bits else 0)]
        if len(core) >= 6:
            cores.add(core)
    return cores


def _encodings(value: str) -> set[str]:
    raw = value.encode("utf-8")
    forms = {value, quote(value, safe=""), quote(value), quote_plus(value), raw.hex()}
    forms |= {raw.hex().upper(), json.dumps(value)[1:-1]}
    forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    forms |= _b64_cores(raw, None) | _b64_cores(raw, b"-_")
    return forms


class TaintSet:
    """Exact secret values (and their encodings) that must never leave proctor.

    Values of :data:`MIN_TAINT_LENGTH` characters or more are matched anywhere in text, in
    their raw, base64, base64url, hex, URL-encoded and JSON-escaped forms; shorter ones only
    as a whole string. Adding is cheap; matching compiles lazily.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._exact: set[str] = set()
        self._forms: set[str] = set()
        self._ordered: tuple[str, ...] = ()
        for value in values:
            self.add(value)

    def add(self, value: str) -> None:
        """Taint ``value``; empty strings are ignored."""
        if not value or value in self._exact:
            return
        self._exact.add(value)
        if len(value) >= MIN_TAINT_LENGTH:
            self._forms |= _encodings(value)
            self._ordered = tuple(sorted(self._forms, key=len, reverse=True))

    def __contains__(self, value: object) -> bool:
        return value in self._exact

    def __len__(self) -> int:
        return len(self._exact)

    def __bool__(self) -> bool:
        return bool(self._exact)

    def scrub(self, text: str) -> str:
        """``text`` with every tainted form replaced by ``[REDACTED:tainted]``."""
        if text in self._exact:
            return marker("tainted")
        hits = [form for form in self._ordered if form in text]
        if not hits:
            return text
        pattern = re.compile("|".join(re.escape(h) for h in hits))
        return pattern.sub(marker("tainted"), text)


# --------------------------------------------------------------------------- text

# Whole strings that cannot hold a credential shape or a secret-named assignment, so the scan
# is skipped (tests/runtime/test_sanitize.py proves each from the patterns themselves): a
# ``sha256:`` digest, a UUID, an ISO date or timestamp, and up to _SHORT_PLAIN characters of
# ``[A-Za-z0-9_./ -]`` (no shape fits in so few of those characters, and without ``=`` or
# ``:`` there is no assignment). Tainted values are still replaced in them first.
_SHORT_PLAIN = 14
_SAFE_FORM = re.compile(
    r"sha256:[0-9a-f]{64}"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?)?)?"
    rf"|[A-Za-z0-9_./ -]{{0,{_SHORT_PLAIN}}}"
)
_SAFE_FORM_MAX = 71  # the longest string _SAFE_FORM can match (a digest)


def _shape_cues(text: str) -> set[int]:
    shapes: set[int] = set()
    for first, scan, groups in _FORWARD_SCANS:
        if first in text:
            for match in scan.finditer(text):
                shapes.update(groups[match.lastgroup or ""])
    backwards = ""
    for first, scan, groups in _BACKWARD_SCANS:
        if first in text:
            backwards = backwards or text[::-1]
            for match in scan.finditer(backwards):
                shapes.update(groups[match.lastgroup or ""])
    if text.isascii():
        lowered = text.lower()
        for word, _caseless, indexes in _CASELESS_CUES:
            if word.search(lowered) is not None:
                shapes.update(indexes)
    else:
        for _word, caseless, indexes in _CASELESS_CUES:
            if caseless.search(text) is not None:
                shapes.update(indexes)
    return shapes


def scrub_text(text: str, taint: TaintSet | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``, the rest kept as it is.

    Applies the taint set (if given), then credential shapes, then secret-named assignments.
    Never raises on any ``str``.
    """
    if taint:
        text = taint.scrub(text)
    if len(text) <= _SAFE_FORM_MAX and _SAFE_FORM.fullmatch(text) is not None:
        return text
    shapes = _shape_cues(text)
    for index in sorted(shapes):
        text = _SHAPES[index].pattern.sub(_REPLACERS[index], text)
    if "=" in text or ":" in text:
        lines = _assignment_lines(text)
        if lines:
            text = _scrub_assignments(text, lines)
    return text


# --------------------------------------------------------------------------- values

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")

# A node's path is rendered only when something under it is redacted: ``(parent, key, _KEY)``,
# ``(parent, index, _INDEX)`` or ``(parent, "", _KEY_ITSELF)`` (the key was redacted).
_KEY, _INDEX, _KEY_ITSELF = 0, 1, 2
_Path: TypeAlias = "str | tuple[_Path, str | int, int]"


def _render(path: _Path) -> str:
    if isinstance(path, str):
        return path
    parent, step, how = path
    base = _render(parent)
    if how == _INDEX:
        return f"{base}[{step}]"
    if how == _KEY_ITSELF:
        return f"{base}.<key>"
    key = str(step)
    return f"{base}.{key}" if _IDENT.match(key) else f"{base}[{json.dumps(key)}]"


def _empty(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, bool)
        or (isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)) and len(value) == 0)
    )


class Sanitizer:
    """Scrubs text and JSON-like values against one taint set (see the module docstring)."""

    def __init__(self, taint: TaintSet | None = None) -> None:
        self.taint = taint if taint is not None else TaintSet()

    def text(self, text: str) -> str:
        """:func:`scrub_text` with this sanitizer's taint set."""
        return scrub_text(text, self.taint)

    def value(self, value: Any) -> tuple[Any, list[str]]:
        """:func:`scrub_value` with this sanitizer's taint set."""
        return scrub_value(value, self.taint)


def scrub_value(value: Any, taint: TaintSet | None = None) -> tuple[Any, list[str]]:
    """A scrubbed, JSON-ready copy of ``value`` and the paths (``$.a.b[0]``) that were redacted.

    Mappings, lists, tuples and sets become dicts and lists (sets sorted); bytes are decoded as
    UTF-8 with replacement; paths, enums, dates, exceptions, dataclasses, pydantic models and
    anything else become their JSON-ready form or their string. A value under a secret-named key
    (:func:`is_secret_name`) is replaced whole; strings are passed through :func:`scrub_text`.
    The input is never mutated; a reference cycle becomes ``"[CYCLE]"``.
    """
    walker = _Walker(taint)
    safe = walker.walk(value, "$")
    if not walker.redacted:
        return safe, []
    return safe, sorted({_render(path) for path in walker.redacted})


class _Walker:
    __slots__ = ("active", "redacted", "taint")

    def __init__(self, taint: TaintSet | None) -> None:
        self.taint = taint if taint else None  # an empty set taints nothing
        self.redacted: list[_Path] = []
        self.active: set[int] = set()

    def text(self, node: str, path: _Path) -> str:
        taint = self.taint
        if taint is None:
            if len(node) <= _SAFE_FORM_MAX and _SAFE_FORM.fullmatch(node) is not None:
                return node
        elif node in taint:
            self.redacted.append(path)
            return marker("tainted")
        out = scrub_text(node, taint)
        if out != node:
            self.redacted.append(path)
        return out

    def walk(self, node: Any, path: _Path) -> Any:
        kind = type(node)
        if kind is str:
            return self.text(node, path)
        if node is None or kind is int or kind is bool:
            return node
        if kind is dict or kind is list:
            return self.container(node, path)
        if isinstance(node, (bool, int)):
            return node
        if isinstance(node, str):
            return self.text(node, path)
        if isinstance(node, float):
            return node if math.isfinite(node) else str(node)
        if isinstance(node, (bytes, bytearray, memoryview)):
            return self.text(bytes(node).decode("utf-8", errors="replace"), path)
        if isinstance(node, enum.Enum):
            return self.walk(node.value, path)
        if isinstance(node, (PurePath, _dt.date, _dt.time)):
            return self.text(
                node.isoformat() if not isinstance(node, PurePath) else str(node), path
            )
        if isinstance(node, BaseException):
            return self.text(f"{type(node).__name__}: {node}", path)
        dump = getattr(node, "model_dump", None)
        if callable(dump) and not isinstance(node, type):
            return self.walk(dump(mode="json"), path)
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            return self.walk(dataclasses.asdict(node), path)
        if isinstance(node, (Mapping, list, tuple, set, frozenset)):
            return self.container(node, path)
        return self.text(str(node), path)

    def container(self, node: Any, path: _Path) -> Any:
        if id(node) in self.active:
            return "[CYCLE]"
        self.active.add(id(node))
        try:
            if isinstance(node, Mapping):
                return self.mapping(node, path)
            items = [self.walk(item, (path, i, _INDEX)) for i, item in enumerate(node)]
            if isinstance(node, (set, frozenset)):
                items.sort(key=lambda v: json.dumps(v, sort_keys=True))
            return items
        finally:
            self.active.discard(id(node))

    def mapping(self, node: Mapping[Any, Any], path: _Path) -> dict[str, Any]:
        taint = self.taint
        out: dict[str, Any] = {}
        for raw_key, item in node.items():
            key = raw_key if isinstance(raw_key, str) else str(self.walk(raw_key, path))
            if taint is None and len(key) <= _SAFE_FORM_MAX and _SAFE_FORM.fullmatch(key):
                safe_key = key
            else:
                safe_key = scrub_text(key, taint)
                if safe_key != key:
                    self.redacted.append((path, "", _KEY_ITSELF))
            if is_secret_name(key) and not _empty(item):
                out[safe_key] = marker("secret_field")
                self.redacted.append((path, safe_key, _KEY))
            elif item is None or type(item) is int or type(item) is bool:
                out[safe_key] = item
            else:
                out[safe_key] = self.walk(item, (path, safe_key, _KEY))
        return out

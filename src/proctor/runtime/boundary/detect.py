"""The detectors behind :mod:`proctor.runtime.boundary.sanitize`: secret names, credential shapes,
secret-named assignments in text, and the cues that decide which of them run.

Speed: every 4 KiB a tool returns and every audit field passes through here, so a detector
runs only after a cheap cue says it could match. A cue is a literal character found with
``in`` (memchr) and then a scan whose pattern starts with that literal (sre searches such a
pattern in a tight C loop, many times faster than a pattern that starts with a character
set). A cue that is a prefix before a common character (``gh[pousr]_``) is searched in the
reversed text, so that the scan stops at each ``_`` for a quick literal check instead of a
look-behind. Case-insensitive shapes are cued on the lowered text. Assignments are found
from the operator backwards (see :func:`_assignment_lines`). Whole strings of a few proven
forms skip every detector (:data:`SAFE_FORM`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from proctor.contracts import values as dataclasses

__all__ = [
    "KINDS",
    "SAFE_FORM",
    "SAFE_FORM_MAX",
    "detect",
    "is_secret_name",
    "is_shell_directory",
    "marker",
]


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


_SHELL_DIRECTORIES = frozenset({"PWD", "OLDPWD"})


def is_shell_directory(name: str, value: object) -> bool:
    """Whether ``name = value`` is the shell's working-directory variable (``PWD`` or
    ``OLDPWD``, spelled so) holding an absolute path, as ``env`` prints it: ``pwd`` names a
    password in every other case (``pwd``, ``db_pwd``, ``PWD=hunter2``)."""
    return (
        name in _SHELL_DIRECTORIES
        and isinstance(value, str)
        and value.startswith("/")
        and not any(c.isspace() or c in "'\"" for c in value)  # one plain path, as env prints it
    )


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
    regex: str
    group: int = 0  # the group holding the secret; 0 = the whole match
    back: bool = False

    @property
    def pattern(self) -> re.Pattern[str]:
        """The full pattern, compiled the first time a cue calls for it: most processes
        never see most shapes' cues, and compiling all of them cost every start-up."""
        compiled = _COMPILED.get(self.regex)
        if compiled is None:
            compiled = _COMPILED[self.regex] = re.compile(self.regex)
        return compiled


_COMPILED: dict[str, re.Pattern[str]] = {}


def _shape(
    kind: str, first: str, rest: str, regex: str, group: int = 0, *, back: bool = False
) -> _Shape:
    return _Shape(kind, first, rest, regex, group, back)


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
    _shape("private_key", "-", "----", _PEM, back=True),  # any run of five dashes
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
    _shape("slack_webhook", "/", r"(?:secivres|swolfkrow|sreggirt)/",
           r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/_-]{8,})", 1,
           back=True),
    # Case-insensitive shapes have no cue here: see _CASELESS_WORDS.
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
    _shape("url_password", "/", "/:",
           r"://[^\s:@/?#\"'<>]{0,128}:([^\s@/?#\"'<>]{1,256})@", 1, back=True),
)  # fmt: skip

# ``name = value`` / ``"name": "value"`` in text, where the name is secret (decided in Python).
# The name is the whole run of name characters before the operator (hence the possessive
# ``{0,63}+``: backing off could only leave a name character before the operator); the look-
# behind that no name character precedes it comes after its first letter, so that sre only
# tries it at letters.
_NAME_OP_TEXT = (
    r"(?P<name>[A-Za-z_](?<![\w.-][A-Za-z_])[\w.-]{0,63}+)[\"']?[ \t]*(?:=>|:=|=(?!=)|:(?!:))"
)
_ASSIGN_TEXT = (
    _NAME_OP_TEXT + r"[ \t]*"
    r"(?:[\"'](?P<qv>[^\"'\n]{1,4096})"
    r"|(?P<v>(?:!![A-Za-z]+[ \t]+|(?:Bearer|Basic|Token|Bot)[ \t]+)?[^\s\"',;&)\]}]{1,4096}))"
)
# What follows a value the 4,096 characters of _ASSIGN cut short (a quoted value's closing
# quote is not needed: an unclosed or longer one is replaced too), replaced with it.
_VALUE_TAIL = {"qv": re.compile(r"[^\"'\n]*"), "v": re.compile(r"[^\s\"',;&)\]}]*")}
# The same ``name["']?[ \t]*<operator>`` read backwards over the reversed text, so that a scan
# starts at the (few) operators instead of at every letter. It yields every name _ASSIGN can
# match (reversed), plus some that _ASSIGN would refuse; a longer run yields its last 64
# characters, and _ASSIGN refuses such a name anyway. The look-behind (in the reversed text:
# the character after the operator) skips an operator that _ASSIGN cannot match there: ``==``,
# ``::``, or one followed by nothing a value can start with (``def f():``, ``x[1:]``).
_NAMES_BEFORE_TEXT = {
    op: op + rf"(?<![\n\r\f\v,;&)\]}}{op}]{op})[ \t]*+[\"']?+([\w.-]{{1,64}}+)" for op in "=:"
}


@functools.cache
def _assign_pattern() -> re.Pattern[str]:
    """_ASSIGN, compiled on the first line that may assign a secret name (the costliest of
    these to compile, and most texts with an operator name no secret)."""
    return re.compile(_ASSIGN_TEXT)


@functools.cache
def _name_op_pattern() -> re.Pattern[str]:
    """A name and its operator, without the value (where _ASSIGN is tried)."""
    return re.compile(_NAME_OP_TEXT)


@functools.cache
def _names_before(operator: str) -> re.Pattern[str]:
    """The _NAMES_BEFORE scan of one operator, compiled on the first text holding it."""
    return re.compile(_NAMES_BEFORE_TEXT[operator])


_ALLOWLIST = "pragma: allowlist secret"


@functools.lru_cache(maxsize=4096)
def _secret_reversed(reversed_name: str) -> bool:
    return is_secret_name(reversed_name[::-1])


def _assignment_lines(text: str) -> list[int]:
    """Starts of the lines that may hold ``<secret name> <operator>`` (only these can change)."""
    backwards = text[::-1]
    names: set[str] = set()
    for operator in "=:":
        if operator in text:
            names.update(_names_before(operator).findall(backwards))
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


def _assignment_value(m: re.Match[str], own: bytearray | None, at: int) -> bool:
    """Whether a secret name's assignment has its value replaced: not when the value is a
    marker already, a shell directory or proctor's own words (``own``: one flag per character
    of the text the line starts ``at``)."""
    group = "qv" if m.group("qv") is not None else "v"
    value = m.group(group)
    if "[REDACTED:" in value or is_shell_directory(m.group("name"), value):
        return False
    return own is None or not all(own[at + m.start(group) : at + m.end(group)])


def _scrub_line(line: str, own: bytearray | None, at: int) -> str:
    """``line`` with the values of its secret-named assignments replaced.

    Every ``name <operator>`` of the line is looked at, each after the last one's operator
    (not after its value): the value of ``config: password=x`` is ``password=x``, itself an
    assignment of a secret name. A secret name's value is matched where its name is and, once
    replaced, the search goes on after it. Each character is read a bounded number of times
    (the allowlist mark is looked for once a line, not once a match: a long line of many
    assignments cost the square of its length). A line holding the allowlist mark is kept.
    """
    if _ALLOWLIST in line:  # the whole line is let through, once looked at
        return line
    names, assign = _name_op_pattern(), _assign_pattern()
    pieces: list[str] = []
    done = pos = 0
    while (m := names.search(line, pos)) is not None:
        pos = m.end()
        if not is_secret_name(m.group("name")):
            continue
        whole = assign.match(line, m.start())
        if whole is None or not _assignment_value(whole, own, at):
            continue
        group = "qv" if whole.group("qv") is not None else "v"
        pieces += (line[done : whole.start(group)], marker("secret_field"))
        done = pos = _VALUE_TAIL[group].match(line, whole.end(group)).end()  # type: ignore[union-attr]
    if not pieces:
        return line
    pieces.append(line[done:])
    return "".join(pieces)


def _scrub_assignments(text: str, line_starts: list[int], own: bytearray | None = None) -> str:
    """Replace values of secret-named assignments on the given lines (no match spans lines),
    except a value wholly inside ``own`` (one flag per character of ``text``)."""
    pieces: list[str] = []
    done = 0
    for start in sorted(set(line_starts)):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        pieces.append(text[done:start])
        pieces.append(_scrub_line(text[start:end], own, start))
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


# The cue scans: one per direction and first character, ``<literal>(?:rest|rest|...)``. A scan
# runs only where ``in`` (memchr) finds its first character: sre searches a pattern that
# starts with a literal far faster than one that starts with a set (so there is no combined
# scan), and faster again without capture groups (so a hit, which is rare, is attributed to
# its shapes afterwards by matching each cue on its own).
# Each scan's cues are kept as pattern text and compiled (through re's own cache) only on a hit.
_Scan: TypeAlias = tuple[str, re.Pattern[str], tuple[tuple[str, tuple[int, ...]], ...]]


def _cue_scans(back: bool) -> tuple[_Scan, ...]:
    cues: dict[str, dict[str, list[int]]] = {}
    for index, shape in enumerate(_SHAPES):
        if shape.first and shape.back is back:
            cues.setdefault(shape.first, {}).setdefault(shape.rest, []).append(index)
    scans = []
    for first, rests in sorted(cues.items()):
        lead = re.escape(first)
        each = tuple((f"{lead}(?:{rest})", tuple(ix)) for rest, ix in rests.items())
        scans.append((first, re.compile(f"{lead}(?:{'|'.join(rests)})"), each))
    return tuple(scans)


def _kinds(*kinds: str) -> tuple[int, ...]:
    return tuple(i for i, s in enumerate(_SHAPES) if s.kind in kinds)


# Shapes whose text is matched case-insensitively, by words every match contains, all of which
# must be present (the bot token is looked for only where the text names Discord). ASCII
# text is lowered once and searched for each word (a literal regex: sre beats ``in`` on such
# words, the more so when the first letter is rare); other text by the words under
# re.IGNORECASE, which also folds characters such as U+0130 and U+212A onto ASCII letters the
# way the shape's own (?i) does.
_Words: TypeAlias = tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]]
_CASELESS_WORDS: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...] = (
    (("bearer",), _kinds("bearer_token")),  # the shape is [Bb]earer
    (("zation", "basic", "uthorization"), _kinds("basic_auth")),  # cheapest first
    (("iscord",), _kinds("discord_webhook", "discord_token")),
)
assert {i for _words, indexes in _CASELESS_WORDS for i in indexes} == {
    i for i, s in enumerate(_SHAPES) if not s.first
}, "every shape needs a cue"


class _Cues:
    """The compiled cue scans, made by the first text that is scanned (see :func:`_cues`)."""

    __slots__ = ("any_first", "backward", "caseless", "forward")

    def __init__(
        self,
        forward: tuple[_Scan, ...],
        backward: tuple[_Scan, ...],
        caseless: tuple[tuple[_Words, tuple[int, ...]], ...],
        any_first: re.Pattern[str],
    ) -> None:
        self.forward = forward
        self.backward = backward
        self.caseless = caseless
        self.any_first = any_first


@functools.cache
def _cues() -> _Cues:
    """The cue scans, compiled once per process on first use: a process whose texts are all
    short plain words (``SAFE_FORM``) never compiles them."""
    caseless = tuple(
        (
            (
                tuple(re.compile(word) for word in words),
                tuple(re.compile(word, re.IGNORECASE) for word in words),
            ),
            kinds,
        )
        for words, kinds in _CASELESS_WORDS
    )
    # In a short text one search for any first character of a cue is cheaper than a
    # memchr each.
    any_first = re.compile(
        "[" + "".join(sorted({re.escape(s.first) for s in _SHAPES if s.first})) + "]"
    )
    return _Cues(_cue_scans(False), _cue_scans(True), caseless, any_first)


# --------------------------------------------------------------------------- text

# Whole strings that cannot hold a credential shape or a secret-named assignment, so the scan
# is skipped (tests/runtime/test_sanitize.py proves each from the patterns themselves): a
# ``sha256:`` digest, a UUID (also as 32 hex digits: a run's id), an ISO date or timestamp,
# up to SHORT_PLAIN characters of
# ``[A-Za-z0-9_./ -]`` and up to SHORT_SNAKE of ``[a-z0-9_.]`` (no shape fits in so few of
# those characters, and without ``=`` or ``:`` there is no assignment). Tainted values are
# still replaced in them first.
SHORT_PLAIN = 14
SHORT_SNAKE = 17
SAFE_FORM = re.compile(
    r"sha256:[0-9a-f]{64}"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|[0-9a-f]{32}"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,6})?)?)?)?"
    rf"|[A-Za-z0-9_./ -]{{0,{SHORT_PLAIN}}}"
    rf"|[a-z0-9_.]{{0,{SHORT_SNAKE}}}"
)
SAFE_FORM_MAX = 71  # the longest string SAFE_FORM can match (a digest)


_SHORT = 256


def _shape_cues(text: str) -> set[int]:
    shapes: set[int] = set()
    backwards = ""
    cues = _cues()
    scanned = len(text) > _SHORT or cues.any_first.search(text) is not None
    for scans, back in ((cues.forward, False), (cues.backward, True)) if scanned else ():
        for first, scan, each in scans:
            if first not in text:
                continue
            if back and not backwards:
                backwards = text[::-1]
            where = backwards if back else text
            for match in scan.finditer(where):
                for cue, indexes in each:
                    if re.compile(cue).match(where, match.start()):
                        shapes.update(indexes)
    ascii = text.isascii()
    where = text.lower() if ascii else text
    for (lowered, caseless), indexes in cues.caseless:
        for word in lowered if ascii else caseless:
            if word.search(where) is None:
                break
        else:
            shapes.update(indexes)
    return shapes


def detect(text: str, own: Sequence[tuple[int, int]] = ()) -> str:
    """``text`` with credential shapes, then secret-named assignments, replaced by markers.

    ``own``: spans of ``text`` that are proctor's own words, not data (a
    :class:`proctor.errors.Message`'s): a secret-named assignment whose value lies wholly
    inside them is kept, so ``credentials: Input should be a valid dictionary`` stays whole.
    Shapes are replaced wherever they are, and a value that reaches into data is replaced.
    """
    if len(text) <= SAFE_FORM_MAX and SAFE_FORM.fullmatch(text) is not None:
        return text
    mask: bytearray | None = None
    if own:
        mask = bytearray(len(text))
        for start, end in own:
            start, end = max(start, 0), min(end, len(text))
            if start < end:
                mask[start:end] = b"\x01" * (end - start)
    shapes = _shape_cues(text)
    for index in sorted(shapes):
        if mask is None:
            text = _SHAPES[index].pattern.sub(_REPLACERS[index], text)
        else:
            text, mask = _sub_masked(_SHAPES[index].pattern, _REPLACERS[index], text, mask)
    if "=" in text or ":" in text:
        lines = _assignment_lines(text)
        if lines:
            text = _scrub_assignments(text, lines, mask)
    return text


def _sub_masked(
    pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str], text: str, mask: bytearray
) -> tuple[str, bytearray]:
    """``pattern.sub(repl, text)`` and ``mask`` carried along: a replaced stretch is data."""
    pieces: list[str] = []
    flags = bytearray()
    done = 0
    for m in pattern.finditer(text):
        new = repl(m)
        pieces += [text[done : m.start()], new]
        flags += mask[done : m.start()] + bytearray(len(new))
        done = m.end()
    pieces.append(text[done:])
    flags += mask[done:]
    return "".join(pieces), flags

"""Credential shapes: which strings look like a secret, by kind (pure: no I/O).

One compiled inventory, shared by the policy guard that refuses a call carrying a credential and
(later) the sanitizer that scrubs one from output, so the two cannot disagree about what a
secret looks like. Each entry is ``(kind, pattern)``; the kind names the family (``aws_access_key``,
``github_token`` ...) and is what a refusal or an audit record reports, never the value.

Patterns are deliberately specific (a prefix, a fixed alphabet, a minimum length): a shape that
also matches digests, UUIDs or ordinary prose would refuse honest calls and teach people to turn
the guard off.
"""

from __future__ import annotations

import re

__all__ = ["has_secret_shape", "scrub_secret_shapes", "secret_kinds", "secret_shapes"]

_SOURCES: tuple[tuple[str, str], ...] = (
    # cloud keys
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    # version-control and package-registry tokens
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{36,}"),
    ("github_fine_grained_token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"),
    # chat tokens and webhooks
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("slack_webhook", r"hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9]+"),
    ("discord_token", r"\b[MN][A-Za-z\d_\-]{23,25}\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27,}"),
    # payment
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    # model providers
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}"),
    # key material and bearer tokens
    (
        "private_key_block",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    ("bearer_token", r"(?i:\bbearer\s+)[A-Za-z0-9_\-.~+/]{20,}=*"),
    (
        "assigned_secret",
        r"(?i:\b(?:api[_-]?key|secret[_-]?key|client[_-]?secret|auth[_-]?token"
        r"|access[_-]?token|password)\b[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9_\-./+]{16,}",
    ),
)
"""Every credential shape, in reporting order: ``(kind, pattern text)``; each is compiled the
first time a gate opens for it (most processes never see most shapes), see :func:`_shape`."""
_COMPILED: list[re.Pattern[str] | None] = [None] * len(_SOURCES)


def _shape(index: int) -> tuple[str, re.Pattern[str]]:
    """The kind and compiled pattern of shape ``index``."""
    compiled = _COMPILED[index]
    if compiled is None:
        compiled = _COMPILED[index] = re.compile(_SOURCES[index][1])
    return _SOURCES[index][0], compiled


def secret_shapes() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Every credential shape compiled, ``(kind, pattern)`` in reporting order."""
    return tuple(_shape(i) for i in range(len(_SOURCES)))


# Scanning a 4 KiB argument with the patterns alone costs ~0.5 ms (a leading ``\b`` defeats the
# regex engine's literal-prefix search). Each shape therefore has a gate: literals one of which
# any match must contain (``str.__contains__`` is a fast substring search), compared against the
# lower-cased text for the case-insensitive shapes, or a cheap literal-led regex. A pattern runs
# only when its gate opens.
_Gate = tuple[tuple[str, ...], bool] | re.Pattern[str]

_GATES: dict[str, _Gate] = {
    "aws_access_key": (("AKIA", "ASIA", "ABIA", "ACCA"), False),
    "google_api_key": (("AIza",), False),
    "github_token": (("gh",), False),
    "github_fine_grained_token": (("github_pat_",), False),
    "gitlab_token": (("glpat-",), False),
    "npm_token": (("npm_",), False),
    "pypi_token": (("pypi-",), False),
    "slack_token": (("xox",), False),
    "slack_webhook": (("hooks.slack.com",), False),
    "discord_token": re.compile(r"\.[A-Za-z\d_\-]{6}\.[A-Za-z\d_\-]{27}"),
    "stripe_key": (("_live_", "_test_"), False),
    "anthropic_key": (("sk-",), False),
    "openai_key": (("sk-",), False),
    "private_key_block": (("-----BEGIN",), False),
    "jwt": (("eyJ",), False),
    "bearer_token": (("bearer",), True),
    "assigned_secret": (("key", "secret", "token", "password"), True),
}
assert set(_GATES) == {kind for kind, _p in _SOURCES}, "every shape needs a gate"

_REDACTED = "[REDACTED]"

_MIN_LENGTH = 15
"""No shape matches fewer characters (``xoxb-`` + 10), so shorter text is skipped outright."""

_INDEX = {kind: i for i, (kind, _p) in enumerate(_SOURCES)}


def _needles(folded: bool) -> tuple[tuple[str, tuple[int, ...]], ...]:
    by_needle: dict[str, list[int]] = {}
    for kind, gate in _GATES.items():
        if not isinstance(gate, re.Pattern) and gate[1] is folded:
            for needle in gate[0]:
                by_needle.setdefault(needle, []).append(_INDEX[kind])
    return tuple((needle, tuple(kinds)) for needle, kinds in by_needle.items())


_EXACT_NEEDLES = _needles(False)
_FOLDED_NEEDLES = _needles(True)
_REGEX_GATES = tuple(
    (gate, _INDEX[kind]) for kind, gate in _GATES.items() if isinstance(gate, re.Pattern)
)


def _candidates(text: str) -> list[tuple[str, re.Pattern[str]]]:
    if len(text) < _MIN_LENGTH:
        return []
    open_: set[int] = set()
    for needle, kinds in _EXACT_NEEDLES:
        if needle in text:
            open_.update(kinds)
    lowered = text.lower()
    for needle, kinds in _FOLDED_NEEDLES:
        if needle in lowered:
            open_.update(kinds)
    open_.update(i for gate, i in _REGEX_GATES if gate.search(text) is not None)
    return [_shape(i) for i in sorted(open_)]


def has_secret_shape(text: str) -> bool:
    """Whether ``text`` holds anything shaped like a credential."""
    return any(p.search(text) for _kind, p in _candidates(text))


def secret_kinds(text: str) -> list[str]:
    """The kinds of credential shapes found in ``text``, in inventory order, without values."""
    return [kind for kind, pattern in _candidates(text) if pattern.search(text)]


def scrub_secret_shapes(text: str, replacement: str = _REDACTED) -> str:
    """``text`` with every credential-shaped span replaced, the text around it kept."""
    for _kind, pattern in _candidates(text):
        text = pattern.sub(replacement, text)
    return text

"""Package patterns: which packages an authority's ``packages`` covers, by identity (pure).

A package's identity says where it came from, never what it calls itself: ``core:NAME`` (a
skill shipped with proctor), ``registry:PUBLISHER/NAME`` (an installed, verified package) or
``local:PATH`` (a folder of the workspace). A pattern names an origin and segments, ``*``
standing for one segment, or for everything below as the last one; ``PUBLISHER/NAME`` alone is
a registry pattern.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from proctor.errors import UsageError

__all__ = ["MAX_PACKAGE_PATTERNS", "package_covered", "parse_packages"]

_SEGMENT = re.compile(r"^(\*|[A-Za-z0-9_.@+-][A-Za-z0-9_.@+ -]{0,127})$")
_ORIGINS = ("core", "registry", "local")
MAX_PACKAGE_PATTERNS = 256


def _pattern_parts(pattern: str) -> tuple[str, list[str]] | None:
    """``(origin, segments)`` of a package pattern, or ``None`` when it is malformed.

    ``<publisher>/<name>`` (either may be ``*``) is a registry pattern; otherwise the pattern
    names its origin: ``core:<name>``, ``registry:<publisher>/<name>``, ``local:<path>``.
    """
    origin, colon, rest = pattern.partition(":")
    if not colon:
        origin, rest = "registry", pattern
        if rest.count("/") != 1:
            return None
    if origin not in _ORIGINS or not rest:
        return None
    segments = rest.split("/")
    if not all(_SEGMENT.match(seg) and seg not in (".", "..") for seg in segments):
        return None
    return origin, segments


def package_covered(patterns: Sequence[str], identity: str) -> bool:
    """True when one of ``patterns`` covers the package ``identity``
    (``core:NAME``, ``registry:PUBLISHER/NAME``, ``local:PATH``).

    A ``*`` segment stands for exactly one segment, except as a pattern's last segment, where
    it stands for one or more (so ``local:*`` covers every package of the workspace, and
    ``local:skills/*`` every one under ``skills/``). Segments compare exactly.
    """
    origin, colon, rest = identity.partition(":")
    if not colon or not rest:
        return False
    have = rest.split("/")
    for pattern in patterns:
        parts = _pattern_parts(pattern)
        if parts is None or parts[0] != origin:
            continue
        want = parts[1]
        if want[-1] == "*" and len(have) >= len(want):
            fixed, tail_ok = want[:-1], True
            compared = have[: len(fixed)]
        else:
            fixed, tail_ok = want, len(have) == len(want)
            compared = have
        if tail_ok and all(w in ("*", h) for w, h in zip(fixed, compared, strict=True)):
            return True
    return False


def parse_packages(value: Any) -> tuple[str, ...]:
    """An authority's ``packages``: a list of at most :data:`MAX_PACKAGE_PATTERNS` patterns.

    Raises:
        UsageError: ``authority_invalid`` when it is not a list of well-formed patterns.
    """
    if (
        not isinstance(value, list)
        or len(value) > MAX_PACKAGE_PATTERNS
        or not all(isinstance(p, str) and _pattern_parts(p) is not None for p in value)
    ):
        raise UsageError(
            "packages is a list of package patterns: PUBLISHER/NAME, core:NAME,"
            " registry:PUBLISHER/NAME or local:PATH, each segment a name or * (at most"
            f" {MAX_PACKAGE_PATTERNS})",
            code="authority_invalid",
        )
    return tuple(value)

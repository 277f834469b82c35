"""Audiences: the one HTTPS origin a credential may be sent to."""

from __future__ import annotations

import re

from proctor.core.netaddr import InvalidHost, format_host, parse_host
from proctor.errors import CredentialError

__all__ = ["audience_host", "normalize_audience"]

_ORIGIN = re.compile(r"^https://([^/?#@\\\s]+?)(?::(\d{1,5}))?/?$", re.IGNORECASE)


def normalize_audience(audience: str) -> str:
    """``https://Host.Example:443/`` -> ``https://host.example``: the canonical HTTPS origin.

    Raises:
        CredentialError: (``credential_audience_invalid``) not an ``https://host[:port]`` URL
            (a path, query, userinfo or other scheme is refused: an audience names a host).
    """
    match = _ORIGIN.match(audience.strip())
    if match is None:
        raise CredentialError(
            "an audience must be an https://host URL with no path",
            code="credential_audience_invalid",
        )
    try:
        host = format_host(parse_host(match.group(1)))
    except InvalidHost as exc:
        raise CredentialError(
            "the audience host is not valid", code="credential_audience_invalid"
        ) from exc
    host = host.rstrip(".")
    port = int(match.group(2)) if match.group(2) else 443
    if not 0 < port < 65536:
        raise CredentialError("the audience port is not valid", code="credential_audience_invalid")
    return f"https://{host}" if port == 443 else f"https://{host}:{port}"


def audience_host(audience: str) -> str:
    """The normalized ``host[:port]`` of an audience, for comparing two audiences."""
    return normalize_audience(audience).removeprefix("https://")

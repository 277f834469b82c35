"""The host reader agrees with the WHATWG URL Standard's own test data (web-platform-tests).

Each http(s)/ws(s)/ftp entry of ``urltestdata.json`` with an authority is cut down to its raw
host, which :func:`parse_host` must turn into exactly the expected ``hostname``, or refuse
where the standard says the URL fails.
"""

from __future__ import annotations

import json
import re
from typing import Any

from proctor.core.netaddr import InvalidHost, format_host, parse_host
from tests.corpora import corpus_dir

_C0_OR_SPACE = "".join(chr(c) for c in range(0x21))


def _raw_host(entry: dict[str, Any]) -> str | None:
    """The host part of the entry's input, as a WHATWG parser sees it before host parsing."""
    text = re.sub("[\t\n\r]", "", entry["input"].strip(_C0_OR_SPACE))
    scheme = re.match(r"(?i)(https?|wss?|ftp):", text)
    if scheme is None:
        return None
    rest = text[scheme.end() :]
    if not re.match(r"[/\\]{2}", rest):
        return None  # a relative reference: its host comes from the base
    authority = re.split(r"[/\\?#]", rest.lstrip("/\\"), maxsplit=1)[0]
    authority = authority.rsplit("@", 1)[-1]
    if authority.startswith("[") and "]" in authority:
        end = authority.index("]") + 1
        host, port = authority[:end], authority[end:].removeprefix(":")
    else:
        host, _, port = authority.partition(":")
    # A failure caused by the port (not the host) says nothing about host parsing.
    if port and (not port.isdigit() or int(port) > 65535):
        return None
    return host


def test_hosts_match_whatwg_urltestdata() -> None:
    entries = json.loads((corpus_dir("whatwg-urltestdata") / "urltestdata.json").read_text())
    checked, mismatches = 0, []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        host = _raw_host(entry)
        if host is None:
            continue
        try:
            got: str | None = format_host(parse_host(host))
        except InvalidHost:
            got = None
        want = None if entry.get("failure") else entry["hostname"]
        checked += 1
        if got != want:
            mismatches.append((entry["input"], got, want))
    assert checked > 300, checked  # the corpus was really read
    assert mismatches == []

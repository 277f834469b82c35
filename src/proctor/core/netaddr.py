"""Which network addresses a tool may reach, and what a URL host really names.

Pure decisions, no I/O. Two questions are answered here:

* :func:`check_address`: is this IP address one proctor refuses to dial, and if so which range
  it falls in. Every special-purpose range is listed explicitly; ``ipaddress.is_global`` and its
  sibling properties are never consulted, because their answers have moved between CPython
  patch releases (``2002::/16`` was "global" on 3.11.9, ``::ffff:127.0.0.1`` was not
  "loopback" before 3.11.10).
* :func:`parse_host`: what address or name a URL host stands for, read the way a browser's
  WHATWG URL parser reads it, so ``2130706433``, ``0177.0.0.1``, ``0x7f.1`` and ``127.1`` are
  all recognised as ``127.0.0.1`` rather than handed to a resolver as opaque names.
"""

from __future__ import annotations

import ipaddress
from typing import Final

from proctor.contracts.values import dataclass

__all__ = [
    "DENIED_RANGES",
    "Denial",
    "DeniedRange",
    "HostName",
    "IPAddress",
    "InvalidHost",
    "check_address",
    "embedded_ipv4",
    "format_address",
    "format_host",
    "parse_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class DeniedRange:
    """One refused network and the name of what it is for."""

    network: IPNetwork
    label: str


def _ranges(*rows: tuple[str, str]) -> tuple[DeniedRange, ...]:
    return tuple(DeniedRange(ipaddress.ip_network(cidr), label) for cidr, label in rows)


# Overlaps are deliberate: the most specific (longest prefix) match names the reason, and any
# match refuses. IPv6 outside 2000::/3 is refused by the final catch-all even if nothing more
# specific is listed, so a newly assigned special range there cannot slip through.
DENIED_RANGES: Final[tuple[DeniedRange, ...]] = _ranges(
    ("0.0.0.0/8", "this network"),
    ("0.0.0.0/32", "unspecified"),
    ("10.0.0.0/8", "private-use"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private-use"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("192.168.0.0/16", "private-use"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("255.255.255.255/32", "limited broadcast"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "IPv4-compatible IPv6"),
    ("::ffff:0:0/96", "IPv4-mapped IPv6"),
    ("::ffff:0:0:0/96", "IPv4-translated IPv6"),
    ("64:ff9b::/96", "NAT64 well-known prefix"),
    ("64:ff9b:1::/48", "NAT64 local-use prefix"),
    ("100::/64", "discard-only"),
    ("100:0:0:1::/64", "dummy prefix"),
    ("2001::/23", "IETF protocol assignments"),
    ("2001::/32", "Teredo"),
    ("2001:2::/48", "benchmarking"),
    ("2001:10::/28", "ORCHID"),
    ("2001:20::/28", "ORCHIDv2"),
    ("2001:db8::/32", "documentation"),
    ("2002::/16", "6to4"),
    ("3ffe::/16", "6bone"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "SRv6 SIDs"),
    ("fc00::/7", "unique local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
    ("::/3", "outside IPv6 global unicast (2000::/3)"),
    ("4000::/2", "outside IPv6 global unicast (2000::/3)"),
    ("8000::/1", "outside IPv6 global unicast (2000::/3)"),
)


@dataclass(frozen=True)
class Denial:
    """Why an address is refused.

    Attributes:
        address: the address that was checked, as text.
        range: the most specific refused range it falls in.
        embedded: for an IPv6 form that carries an IPv4 address (mapped, compatible, NAT64,
            6to4, Teredo), that IPv4 address and its own denial, if it has one.
    """

    address: str
    range: DeniedRange
    embedded: tuple[str, Denial | None] | None = None

    @property
    def reason(self) -> str:
        """One sentence naming the address, the range and what the range is for."""
        text = f"{self.address} is in {self.range.network} ({self.range.label})"
        if self.embedded is not None:
            inner, inner_denial = self.embedded
            text += f", carrying IPv4 {inner}"
            if inner_denial is not None:
                text += f" in {inner_denial.range.network} ({inner_denial.range.label})"
        return text

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form: ``address``, ``range``, ``label`` and ``reason``."""
        return {
            "address": self.address,
            "range": str(self.range.network),
            "label": self.range.label,
            "reason": self.reason,
        }


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 transition form carries, or ``None``.

    Covers IPv4-mapped and IPv4-compatible (last 32 bits), NAT64 (last 32 bits), 6to4 (bits
    16-48) and Teredo (the client address, stored inverted in the last 32 bits).
    """
    value = int(address)
    if address in _MAPPED or address in _COMPATIBLE or address in _NAT64 or address in _NAT64_LOCAL:
        if address in _COMPATIBLE and value <= 1:
            return None  # ``::`` and ``::1`` are IPv6's own unspecified and loopback
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _SIXTOFOUR:
        return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    if address in _TEREDO:
        return ipaddress.IPv4Address(~value & 0xFFFFFFFF)
    return None


_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SIXTOFOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")


def _most_specific(address: IPAddress) -> DeniedRange | None:
    best: DeniedRange | None = None
    for row in DENIED_RANGES:
        if row.network.version != address.version or address not in row.network:
            continue
        if best is None or row.network.prefixlen > best.network.prefixlen:
            best = row
    return best


def check_address(address: IPAddress | str) -> Denial | None:
    """Return why ``address`` must not be dialled, or ``None`` when it is a public address.

    A text argument is parsed strictly (no zone id, no shorthand IPv4 forms; those belong to
    :func:`parse_host`). An IPv6 address with a zone id is refused as link-scoped whatever
    its value.

    Raises:
        ValueError: ``address`` is text that is not an IP address.
    """
    if isinstance(address, str):
        address = ipaddress.ip_address(address)
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        scoped = DeniedRange(ipaddress.IPv6Network("fe80::/10"), "link-scoped (zone id)")
        return Denial(str(address), scoped)
    match = _most_specific(address)
    if match is None:
        return None
    embedded: tuple[str, Denial | None] | None = None
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None:
            embedded = (str(inner), check_address(inner))
    return Denial(format_address(address), match, embedded)


# ---------------------------------------------------------------------------------------------
# WHATWG host parsing (https://url.spec.whatwg.org/#host-parsing), for special schemes only.


class InvalidHost(ValueError):
    """A URL host that a WHATWG parser would reject, or that proctor refuses (a zone id)."""


@dataclass(frozen=True)
class HostName:
    """A domain name after UTS #46 mapping and Punycode: lower-case ASCII, exactly as WHATWG."""

    name: str

    @property
    def canonical(self) -> str:
        """The name without its trailing dot (``a.example.`` is ``a.example``)."""
        return self.name[:-1] if self.name.endswith(".") else self.name


_FORBIDDEN_HOST = frozenset("\x00\t\n\r #/:<>?@[\\]^|")
_FORBIDDEN_DOMAIN = _FORBIDDEN_HOST | frozenset(chr(c) for c in range(0x20)) | {"%", "\x7f"}


def _percent_decode(text: str) -> bytes:
    raw = text.encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(raw):
        byte = raw[i]
        if byte == 0x25 and i + 2 < len(raw) and _is_hex(raw[i + 1 : i + 3]):
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
            continue
        out.append(byte)
        i += 1
    return bytes(out)


def _is_hex(pair: bytes) -> bool:
    return len(pair) == 2 and all(chr(b) in "0123456789abcdefABCDEF" for b in pair)


def _ipv4_number(part: str) -> int | None:
    if part == "":
        return None
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        part, radix = part[1:], 8
    if part == "":
        return 0
    digits = {10: "0123456789", 16: "0123456789abcdefABCDEF", 8: "01234567"}[radix]
    if any(ch not in digits for ch in part):
        return None
    return int(part, radix)


def _ends_in_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    if last and all(ch in "0123456789" for ch in last):
        return True
    return _ipv4_number(last) is not None and last[:2] in ("0x", "0X")


def _parse_ipv4(domain: str) -> ipaddress.IPv4Address:
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if len(parts) > 4:
        raise InvalidHost(f"{domain!r} ends in a number but has more than four parts")
    numbers: list[int] = []
    for part in parts:
        number = _ipv4_number(part)
        if number is None:
            raise InvalidHost(f"{domain!r} ends in a number but {part!r} is not one")
        numbers.append(number)
    if any(n > 255 for n in numbers[:-1]):
        raise InvalidHost(f"{domain!r} has an IPv4 part above 255")
    if numbers[-1] >= 256 ** (5 - len(numbers)):
        raise InvalidHost(f"{domain!r} is out of the IPv4 range")
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value += number * 256 ** (3 - index)
    return ipaddress.IPv4Address(value)


def _domain_to_ascii(domain: str) -> str:
    import idna  # UTS #46 mapping tables; pure data, imported when a host is parsed

    try:
        mapped = idna.uts46_remap(domain, std3_rules=False, transitional=False)
    except idna.IDNAError as exc:
        raise InvalidHost(f"{domain!r} is not a valid domain name") from exc
    labels = []
    for label in mapped.split("."):
        if label.isascii():
            if label.lower().startswith("xn--"):
                try:
                    decoded = idna.decode(label)
                except (idna.IDNAError, UnicodeError) as exc:
                    raise InvalidHost(f"{domain!r} has an invalid Punycode label") from exc
                if not decoded:
                    raise InvalidHost(f"{domain!r} has an empty Punycode label")
            labels.append(label.lower())
            continue
        try:
            labels.append("xn--" + label.encode("punycode").decode("ascii"))
        except UnicodeError as exc:
            raise InvalidHost(f"{domain!r} cannot be encoded as ASCII") from exc
    ascii_domain = ".".join(labels)
    if ascii_domain == "":
        raise InvalidHost("the host is empty")
    return ascii_domain


def parse_host(host: str) -> IPAddress | HostName:
    """Read a URL host the way a WHATWG URL parser does for ``http``/``https``.

    ``[...]`` is an IPv6 literal; a host whose last label is a number is an IPv4 address in
    any of the legacy forms (``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1``); anything
    else is a domain name, percent-decoded, UTS #46-mapped and Punycode-encoded (a trailing dot
    is kept, as WHATWG keeps it; :attr:`HostName.canonical` drops it).

    Raises:
        InvalidHost: the host is empty, malformed, an out-of-range number, contains a
            forbidden code point, or is an IPv6 literal with a zone id (refused: a zone names a
            local interface, which no outbound call should pick).
    """
    if host.startswith("["):
        if not host.endswith("]"):
            raise InvalidHost(f"{host!r} opens an IPv6 literal without closing it")
        inner = host[1:-1]
        if "%" in inner:
            raise InvalidHost(f"{host!r} carries a zone id; zone ids are refused")
        try:
            return ipaddress.IPv6Address(inner)
        except ValueError as exc:
            raise InvalidHost(f"{host!r} is not a valid IPv6 address") from exc
    if host == "":
        raise InvalidHost("the host is empty")
    try:
        domain = _percent_decode(host).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidHost(f"{host!r} percent-decodes to invalid UTF-8") from exc
    ascii_domain = _domain_to_ascii(domain)
    bad = sorted({ch for ch in ascii_domain if ch in _FORBIDDEN_DOMAIN})
    if bad:
        raise InvalidHost(f"{host!r} contains a forbidden character {bad[0]!r}")
    if _ends_in_number(ascii_domain):
        return _parse_ipv4(ascii_domain)
    return HostName(ascii_domain)


def format_address(address: IPAddress) -> str:
    """An address as text: dotted IPv4, or RFC 5952 IPv6 (hex pieces, first longest zero run)."""
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    pieces = [(int(address) >> (16 * (7 - i))) & 0xFFFF for i in range(8)]
    best_start, best_len, start = -1, 0, -1
    for i, piece in enumerate([*pieces, 1]):
        if piece == 0 and start < 0:
            start = i
        elif piece != 0 and start >= 0:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = -1
    if best_len < 2:
        return ":".join(f"{p:x}" for p in pieces)
    head = ":".join(f"{p:x}" for p in pieces[:best_start])
    tail = ":".join(f"{p:x}" for p in pieces[best_start + best_len :])
    return f"{head}::{tail}"


def format_host(host: IPAddress | HostName) -> str:
    """A parsed host as a URL would spell it: IPv6 in brackets, IPv4 dotted, names as they are."""
    if isinstance(host, HostName):
        return host.name
    if isinstance(host, ipaddress.IPv6Address):
        return f"[{format_address(host)}]"
    return str(host)

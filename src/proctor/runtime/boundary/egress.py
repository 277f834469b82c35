"""The egress guard: an httpx transport that dials only addresses it has checked.

Every request that reaches :class:`EgressTransport` (the first one and every redirect hop, since
each hop is a new request through the transport) goes through the same steps:

1. the scheme must be ``http`` or ``https`` and the URL must carry no userinfo;
2. the host is read the way a WHATWG URL parser reads it (:func:`proctor.core.netaddr.parse_host`),
   so ``2130706433`` and ``0x7f.1`` are the address ``127.0.0.1``, not names;
3. a name is resolved ONCE through the injected :class:`Resolver`; if ANY resolved address is
   refused by :func:`proctor.core.netaddr.check_address` the request is refused, even when
   another address is public (that mix is what DNS rebinding looks like);
4. the request is sent to the checked address itself (the URL host is rewritten to the literal
   IP), with the original ``Host`` header and, for TLS, the original name as SNI and as the
   name the certificate must match. No second lookup happens, so nothing can change between
   check and dial.

A workspace may allow its own services by name or network (``[egress] allow`` in
``proctor.toml``); :meth:`EgressAllow.to_authority` is the form recorded in a run's authority.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from proctor.contracts.values import dataclass
from proctor.core.netaddr import (
    HostName,
    InvalidHost,
    IPAddress,
    check_address,
    format_address,
    format_host,
    parse_host,
)
from proctor.errors import EgressRefused
from proctor.runtime.boundary.egress_allow import EgressAllow, load_egress_allow

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = [
    "EgressAllow",
    "EgressLimits",
    "EgressRoute",
    "Resolver",
    "StaticResolver",
    "SystemResolver",
    "canonical_url",
    "check_destination",
    "load_egress_allow",
]

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Resolver(Protocol):
    """Turns a host name into the IP addresses to dial (text, as ``getaddrinfo`` gives them).

    Raises ``OSError`` when the name does not resolve.
    """

    def __call__(self, host: str, port: int) -> Sequence[str]: ...


class SystemResolver:
    """The operating system's resolver (``socket.getaddrinfo``), TCP addresses only."""

    def __call__(self, host: str, port: int) -> Sequence[str]:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        seen: dict[str, None] = {}
        for info in infos:
            seen.setdefault(str(info[4][0]), None)
        return list(seen)


@dataclass(frozen=True)
class StaticResolver:
    """A resolver answering from a fixed table; for tests and air-gapped hosts.

    A name missing from the table does not resolve (``OSError``). Names are matched without
    case and without a trailing dot.
    """

    table: Mapping[str, Sequence[str]]

    def __call__(self, host: str, port: int) -> Sequence[str]:
        key = host.lower().rstrip(".")
        for name, addresses in self.table.items():
            if name.lower().rstrip(".") == key:
                return list(addresses)
        raise socket.gaierror(socket.EAI_NONAME, "name does not resolve")


@dataclass(frozen=True)
class EgressRoute:
    """Where a session's checked requests go instead of the network: ``proctor test`` answers
    them from fixtures, ``proctor test record`` copies each exchange on its way.

    Every request still passes the egress guard first (scheme, userinfo, host, the allow-list,
    each resolved address); only what happens after the check changes.

    Attributes:
        resolver: how names become the addresses the guard checks.
        pool_factory: builds the transport a checked request is handed to (see
            :class:`proctor.runtime.boundary.transport.EgressTransport`).
    """

    resolver: Resolver
    pool_factory: Callable[[ssl.SSLContext | bool], httpx.BaseTransport]
    allow: EgressAllow | None = None
    """Destinations this route answers although the guard would refuse their addresses
    (``proctor test``'s declared exchanges: an address such as ``127.0.0.1`` that a recorded
    run reached). They widen the HTTP tools' check on this route only: it dials nothing, and a
    process never gets network from them."""


@dataclass(frozen=True)
class EgressLimits:
    """Time and size bounds of one outbound call (redirects included)."""

    connect_s: float = 10.0
    read_s: float = 30.0
    total_s: float = 60.0
    max_response_bytes: int = 1024 * 1024
    max_redirects: int = 5

    def timeout(self) -> httpx.Timeout:
        """The per-operation httpx timeouts; ``total_s`` is enforced by the caller's deadline."""
        import httpx

        return httpx.Timeout(self.read_s, connect=self.connect_s, pool=self.connect_s)


def _refuse(message: str, *, host: str, kind: str, **details: Any) -> EgressRefused:
    return EgressRefused(message, details={"host": host, "kind": kind, **details})


_URL_FORBIDDEN = re.compile(r"[\x00-\x20\x7f\\]")
_URL_SHAPE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//([^/?#]*))?(.*)$", re.DOTALL)


def canonical_url(url: str) -> httpx.URL:
    """Read a URL a tool was given into the exact URL proctor will request.

    The host is rewritten to its WHATWG reading (``http://0x7f.1/`` becomes
    ``http://127.0.0.1/``) so that httpx, the resolver and the address check all see the same
    destination. The URL text never appears in a refusal message (it may carry a token).

    Raises:
        EgressRefused: the URL has whitespace, a control character or a backslash (parsers
            disagree on where such a host ends), a scheme other than http/https, no host,
            userinfo, an invalid host or port.
    """
    import httpx  # here, not at import: httpx costs ~100 ms and most commands never send

    if _URL_FORBIDDEN.search(url):
        raise _refuse(
            "egress refused: the URL contains whitespace, a control character or a backslash",
            host="",
            kind="invalid_url",
        )
    shape = _URL_SHAPE.match(url)
    scheme = shape.group(1).lower() if shape else ""
    if shape is None or scheme not in _SCHEMES:
        raise _refuse(
            f"egress refused: scheme {scheme or '(none)'!r} is not http or https",
            host="",
            kind="scheme",
        )
    authority = shape.group(3)
    if authority is None or authority == "":
        raise _refuse("egress refused: the URL has no host", host="", kind="invalid_url")
    if "@" in authority:
        raise _refuse(
            "egress refused: credentials in the URL (userinfo) are not allowed; "
            "deliver a credential with auth: {credential: NAME}",
            host="",
            kind="userinfo",
        )
    host_text, port_text = authority, ""
    if authority.startswith("["):
        end = authority.find("]")
        host_text, rest = authority[: end + 1], authority[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            raise _refuse("egress refused: malformed IPv6 host", host="", kind="invalid_url")
        port_text = rest[1:]
    elif ":" in authority:
        host_text, port_text = authority.split(":", 1)
    try:
        host = parse_host(host_text)
    except InvalidHost as exc:
        raise _refuse(f"egress refused: {exc}", host=host_text[:253], kind="invalid_host") from exc
    if port_text and (not port_text.isdigit() or int(port_text) > 65535):
        raise _refuse("egress refused: invalid port", host=format_host(host), kind="invalid_url")
    port = f":{int(port_text)}" if port_text else ""
    try:
        return httpx.URL(f"{scheme}://{format_host(host)}{port}{shape.group(4)}")
    except httpx.InvalidURL as exc:
        raise _refuse(
            "egress refused: the URL is not valid", host=format_host(host), kind="invalid_url"
        ) from exc


def check_destination(
    shown: str, port: int, allow: EgressAllow, resolver: Resolver
) -> tuple[list[IPAddress], str]:
    """The checked addresses a connection to ``shown`` (a host as a URL spells it: a name, an
    IPv4 address, or an IPv6 address in brackets) may dial, and the host's canonical spelling.

    The one check every outbound connection of a run passes, whether an ``http.request`` sends
    it or a sandboxed process asks the egress proxy for it: a name is resolved once, and the
    connection is refused when any of its addresses is refused (an allowed name accepts all of
    them); an address is refused unless public or in an allowed network. The caller dials one
    of the returned addresses, never the name.

    Raises:
        EgressRefused: the host is invalid, does not resolve, or an address is refused.
    """
    import ipaddress

    try:
        host = parse_host(shown)
    except InvalidHost as exc:
        raise _refuse(f"egress refused: {exc}", host=shown, kind="invalid_host") from exc
    if not isinstance(host, HostName):
        _check_one(allow, host, shown, host)
        return [host], format_host(host)
    name = host.canonical
    try:
        answers = list(resolver(name, port))
    except OSError as exc:
        raise _refuse(f"egress refused: {name} does not resolve", host=name,
                      kind="unresolved") from exc  # fmt: skip
    if not answers:
        raise _refuse(f"egress refused: {name} resolved to no address", host=name,
                      kind="unresolved")  # fmt: skip
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer)
        except ValueError as exc:
            raise _refuse(f"egress refused: {name} resolved to something not an address",
                          host=name, kind="unresolved") from exc  # fmt: skip
        if not allow.allows_host(host):
            _check_one(allow, address, name, host)
        addresses.append(address)
    return addresses, host.name


def _check_one(
    allow: EgressAllow, address: IPAddress, shown: str, host: IPAddress | HostName
) -> None:
    if allow.allows_address(address):
        return
    denial = check_address(address)
    if denial is None:
        return
    literal = format_address(address)
    if isinstance(host, HostName):
        said = f"{shown} resolves to {literal}, and {denial.reason}"
    elif shown.removeprefix("[").removesuffix("]") != literal:  # another spelling of it
        said = f"{shown} is {literal}, and {denial.reason}"
    else:
        said = denial.reason  # it names the address itself
    raise _refuse(f"egress refused: {said}", host=shown, kind="address", **denial.to_dict())

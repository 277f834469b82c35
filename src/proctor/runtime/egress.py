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

import ipaddress
import re
import socket
import ssl
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from proctor.core.netaddr import (
    HostName,
    InvalidHost,
    IPAddress,
    check_address,
    format_address,
    format_host,
    parse_host,
)
from proctor.errors import ConfigError, EgressRefused

__all__ = [
    "EgressAllow",
    "EgressLimits",
    "EgressTransport",
    "Resolver",
    "StaticResolver",
    "SystemResolver",
    "canonical_url",
    "egress_client",
    "load_egress_allow",
]

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# A network allow entry wider than this would switch the guard off for a large part of the
# address space; such an entry is refused rather than honoured.
_MIN_PREFIX = {4: 8, 6: 7}


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
class EgressAllow:
    """Destinations a workspace allows even though their addresses would be refused.

    Attributes:
        hosts: host names (canonical, lower-case, no trailing dot) whose resolved addresses are
            accepted whatever range they are in. Only the exact name is allowed; a redirect to
            another name is checked on its own.
        networks: networks whose addresses are accepted.
    """

    hosts: frozenset[str] = frozenset()
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressAllow:
        """Read allow entries: host names, IP addresses or CIDR networks.

        Raises:
            ConfigError: an entry is not a valid name, address or network, or is a network
                wider than /8 (IPv4) or /7 (IPv6).
        """
        hosts: set[str] = set()
        networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise ConfigError("egress.allow entries must be non-empty strings")
            text = entry.strip()
            try:
                network = ipaddress.ip_network(text.strip("[]"), strict=True)
            except ValueError:
                network = None
            if network is not None:
                if network.prefixlen < _MIN_PREFIX[network.version]:
                    raise ConfigError(
                        f"egress.allow entry {text!r} is wider than /{_MIN_PREFIX[network.version]}"
                        "; list the networks of your own services instead",
                        code="egress_allow_too_wide",
                    )
                networks.append(network)
                continue
            try:
                host = parse_host(text)
            except InvalidHost as exc:
                raise ConfigError(f"egress.allow entry {text!r} is not a host or network") from exc
            if isinstance(host, HostName):
                hosts.add(host.canonical)
            else:
                networks.append(ipaddress.ip_network(host))
        return cls(frozenset(hosts), tuple(sorted(set(networks), key=_network_key)))

    def allows_host(self, host: HostName) -> bool:
        """Whether this exact name is allowed."""
        return host.canonical in self.hosts

    def allows_address(self, address: IPAddress) -> bool:
        """Whether the address falls in an allowed network."""
        return any(address.version == n.version and address in n for n in self.networks)

    def to_authority(self) -> dict[str, list[str]]:
        """The allow-list as the run's authority records it: sorted ``hosts`` and ``networks``."""
        return {"hosts": sorted(self.hosts), "networks": [str(n) for n in self.networks]}


def _network_key(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> tuple[int, int, int]:
    return (network.version, int(network.network_address), network.prefixlen)


def load_egress_allow(workspace_root: Path) -> EgressAllow:
    """Read ``[egress] allow`` from ``<workspace>/proctor.toml``; empty when either is absent.

    Raises:
        ConfigError: the file is not valid TOML, ``allow`` is not a list of strings, or an
            entry is refused by :meth:`EgressAllow.parse`.
    """
    path = workspace_root / "proctor.toml"
    if not path.is_file():
        return EgressAllow()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"proctor.toml is not valid TOML: {exc}") from exc
    section = document.get("egress", {})
    if not isinstance(section, dict):
        raise ConfigError("proctor.toml: [egress] must be a table")
    unknown = sorted(set(section) - {"allow"})
    if unknown:
        raise ConfigError(f"proctor.toml: unknown key in [egress]: {unknown[0]}")
    entries = section.get("allow", [])
    if not isinstance(entries, list):
        raise ConfigError("proctor.toml: egress.allow must be a list of hosts or networks")
    return EgressAllow.parse(entries)


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


@dataclass
class EgressTransport(httpx.BaseTransport):
    """An httpx transport that checks each destination address and dials only that address.

    Args:
        allow: the workspace's allowed destinations.
        resolver: how names become addresses (default: the system resolver).
        verify: TLS verification for httpx (``True``, or an ``ssl.SSLContext`` with extra
            roots, as tests use). Never ``False`` in production code.
        max_pools: inner connection pools kept (one per original host name, so a TLS
            connection opened for one name is never reused for another on the same address).
        pool_factory: builds an inner pool from ``verify``; the default is an
            ``httpx.HTTPTransport`` with no proxy. Tests pass one that sends every checked
            request to a counting loopback server, to prove what was (not) sent.

    Raises (from :meth:`handle_request`):
        EgressRefused: the scheme, userinfo, host, or any resolved address is refused.
    """

    allow: EgressAllow = field(default_factory=EgressAllow)
    resolver: Resolver = field(default_factory=SystemResolver)
    verify: ssl.SSLContext | bool = True
    max_pools: int = 32
    pool_factory: Callable[[ssl.SSLContext | bool], httpx.BaseTransport] | None = None
    _pools: OrderedDict[tuple[str, str], httpx.BaseTransport] = field(
        default_factory=OrderedDict, init=False, repr=False
    )

    def check(self, url: httpx.URL) -> tuple[list[IPAddress], str]:
        """The checked addresses ``url`` may be sent to, and its host as a URL spells it.

        Raises:
            EgressRefused: as :meth:`handle_request`.
        """
        scheme = url.scheme.lower()
        raw_host = url.raw_host.decode("ascii", "replace")
        shown = f"[{raw_host}]" if ":" in raw_host else raw_host
        if scheme not in _SCHEMES:
            raise _refuse(f"egress refused: scheme {scheme!r} is not http or https", host=shown,
                          kind="scheme")  # fmt: skip
        if url.userinfo:
            raise _refuse("egress refused: the URL carries userinfo", host=shown, kind="userinfo")
        try:
            host = parse_host(shown)
        except InvalidHost as exc:
            raise _refuse(f"egress refused: {exc}", host=shown, kind="invalid_host") from exc
        port = url.port or _DEFAULT_PORTS[scheme]
        if not isinstance(host, HostName):
            self._check_one(host, shown, host)
            return [host], format_host(host)
        name = host.canonical
        try:
            answers = list(self.resolver(name, port))
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
            if not self.allow.allows_host(host):
                self._check_one(address, name, host)
            addresses.append(address)
        return addresses, host.name

    def _check_one(self, address: IPAddress, shown: str, host: IPAddress | HostName) -> None:
        if self.allow.allows_address(address):
            return
        denial = check_address(address)
        if denial is None:
            return
        via = "" if not isinstance(host, HostName) else f" resolves to {format_address(address)},"
        raise _refuse(
            f"egress refused: {shown}{via} {denial.reason}",
            host=shown,
            kind="address",
            **denial.to_dict(),
        )

    def _pool(self, scheme: str, name: str) -> httpx.BaseTransport:
        key = (scheme, name)
        pool = self._pools.get(key)
        if pool is None:
            factory = self.pool_factory or _default_pool
            pool = factory(self.verify)
            self._pools[key] = pool
            while len(self._pools) > self.max_pools:
                self._pools.popitem(last=False)[1].close()
        else:
            self._pools.move_to_end(key)
        return pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Check the destination of ``request`` and send it to the checked address.

        Raises:
            EgressRefused: the destination is refused; nothing was sent.
            httpx.TransportError: the connection failed on every checked address.
        """
        addresses, host_name = self.check(request.url)
        extensions = dict(request.extensions)
        if request.url.scheme.lower() == "https" and not host_name.startswith("["):
            extensions["sni_hostname"] = host_name.rstrip(".")
        pool = self._pool(request.url.scheme.lower(), host_name)
        last_error: httpx.TransportError | None = None
        for address in addresses:
            dial = httpx.Request(
                request.method,
                request.url.copy_with(host=format_address(address)),
                headers=request.headers,  # keeps the original Host header
                stream=request.stream,
                extensions=extensions,
            )
            try:
                return pool.handle_request(dial)
            except httpx.ConnectError as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    def close(self) -> None:
        """Close every inner connection pool."""
        while self._pools:
            self._pools.popitem()[1].close()


def _default_pool(verify: ssl.SSLContext | bool) -> httpx.BaseTransport:
    # proxy=None: through a proxy, the proxy is what gets dialled, not the checked address.
    return httpx.HTTPTransport(verify=verify, proxy=None, retries=0)


def egress_client(
    allow: EgressAllow | None = None,
    *,
    resolver: Resolver | None = None,
    limits: EgressLimits | None = None,
    verify: ssl.SSLContext | bool = True,
) -> httpx.Client:
    """An httpx client whose every request, redirects included, passes the egress guard.

    Redirects are not followed automatically (the caller bounds them, see
    :func:`proctor.runtime.tools.http.send`); environment proxies are ignored.
    """
    transport = EgressTransport(
        allow=allow or EgressAllow(), resolver=resolver or SystemResolver(), verify=verify
    )
    return httpx.Client(
        transport=transport,
        follow_redirects=False,
        trust_env=False,
        timeout=(limits or EgressLimits()).timeout(),
    )

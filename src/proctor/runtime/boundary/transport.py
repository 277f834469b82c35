"""The egress transport: an httpx transport that dials only addresses it has checked.

The checks themselves (schemes, hosts, the allow-list, resolution) are described in
:mod:`proctor.runtime.boundary.egress`, which re-exports :class:`EgressTransport` and
:func:`egress_client`; they live here so that importing the egress policy never imports httpx.
"""

from __future__ import annotations

import ssl
import threading
from collections import OrderedDict
from collections.abc import Callable

import httpx

from proctor.contracts.values import dataclass, field
from proctor.core.netaddr import IPAddress, format_address
from proctor.runtime.boundary.egress import (
    _DEFAULT_PORTS,
    _SCHEMES,
    EgressAllow,
    EgressLimits,
    Resolver,
    SystemResolver,
    _refuse,
    check_destination,
)

__all__ = ["EgressTransport", "egress_client"]


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
        return check_destination(shown, url.port or _DEFAULT_PORTS[scheme], self.allow,
                                 self.resolver)  # fmt: skip

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
    return httpx.HTTPTransport(
        verify=_system_context() if verify is True else verify, proxy=None, retries=0
    )


_CONTEXTS: list[ssl.SSLContext] = []
_CONTEXT_LOCK = threading.Lock()


def _system_context() -> ssl.SSLContext:
    """The verifying TLS context httpx builds for ``verify=True``, built once per process:
    loading the trusted certificates took ~100 ms, and every new pool (every call of a run
    that sends) built it again, plain http included."""
    with _CONTEXT_LOCK:
        if not _CONTEXTS:
            _CONTEXTS.append(httpx.create_ssl_context(verify=True))
        return _CONTEXTS[0]


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

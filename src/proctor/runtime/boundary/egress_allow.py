"""The workspace's egress allow-list (``[egress] allow`` in ``proctor.toml``).

Kept apart from :mod:`proctor.runtime.boundary.egress` so that a run records its allow-list
(usually empty: there is no ``proctor.toml``) without importing the egress guard and its
address parser; those are imported when an entry is parsed or a request is checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError
from proctor.runtime.boundary.plain_file import regular_file

if TYPE_CHECKING:
    import ipaddress

    from proctor.core.netaddr import HostName, IPAddress

__all__ = ["EgressAllow", "load_egress_allow"]

# A network allow entry wider than this would switch the guard off for a large part of the
# address space; such an entry is refused rather than honoured.
_MIN_PREFIX = {4: 8, 6: 7}


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
        entries = list(entries)
        if not entries:  # most runs: nothing to parse, nothing to import
            return cls()
        import ipaddress

        from proctor.core.netaddr import HostName, InvalidHost, parse_host

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

    def merged(self, other: EgressAllow) -> EgressAllow:
        """The destinations of both lists."""
        networks = sorted(set(self.networks) | set(other.networks), key=_network_key)
        return EgressAllow(self.hosts | other.hosts, tuple(networks))

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
    path = os.path.join(workspace_root, "proctor.toml")  # asked every run: no Path built
    if not regular_file(path):
        return EgressAllow()
    import tomllib  # read only when the workspace has a proctor.toml

    try:
        with open(path, encoding="utf-8") as handle:
            document = tomllib.loads(handle.read())
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

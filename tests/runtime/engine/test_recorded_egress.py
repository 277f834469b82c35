"""Delivery enforces the egress grant the run recorded, as the driver parsed it from the run's
authority record: the same allow-list the record (and its digest) names, and nothing when none
was recorded; entries the allow-list refuses are refused (an altered record)."""

from __future__ import annotations

import ipaddress

import pytest

from proctor.core.authority import Authority, EgressGrant, parse_authority
from proctor.errors import ConfigError
from proctor.runtime.engine.delivery import recorded_egress


def test_the_recorded_grant_is_the_allow_list_delivery_enforces() -> None:
    grant = EgressGrant(hosts=("svc.internal",), networks=("127.0.0.1/32",))
    parsed = parse_authority(
        Authority(effects="ask", set_by="host", egress=grant).to_json(), recorded=True
    )
    allow = recorded_egress(parsed.egress)
    assert allow.hosts == frozenset({"svc.internal"})
    assert list(allow.networks) == [ipaddress.ip_network("127.0.0.1/32")]
    assert allow.to_authority() == {"hosts": ["svc.internal"], "networks": ["127.0.0.1/32"]}
    none = recorded_egress(parse_authority({}, recorded=True).egress)
    assert not none.hosts and not list(none.networks)


def test_an_entry_the_allow_list_refuses_is_refused() -> None:
    with pytest.raises(ConfigError):
        recorded_egress(EgressGrant(hosts=(), networks=("10.0.0.0/4",)))

"""The egress grant in a run's recorded authority: carried natively, never a host's to state."""

from __future__ import annotations

import pytest

from proctor.core.authority import Authority, EgressGrant, narrow, parse_authority
from proctor.errors import UsageError

GRANT = EgressGrant(hosts=("svc.internal",), networks=("127.0.0.1/32",))


def test_a_recorded_grant_round_trips_and_narrowing_keeps_it() -> None:
    recorded = Authority(effects="ask", set_by="host", egress=GRANT).to_json()
    assert recorded["egress"] == {"hosts": ["svc.internal"], "networks": ["127.0.0.1/32"]}
    again = parse_authority(recorded, recorded=True)
    assert again.egress == GRANT and again.to_json() == recorded
    assert narrow(again, effects="none").egress == GRANT


def test_an_authority_without_a_grant_records_no_egress_key() -> None:
    assert "egress" not in Authority().to_json()
    assert parse_authority({"effects": "ask"}).egress is None


def test_a_host_cannot_grant_egress() -> None:
    with pytest.raises(UsageError) as refused:
        parse_authority({"effects": "allow", "egress": {"hosts": ["10.0.0.1"], "networks": []}})
    assert refused.value.code == "authority_invalid"
    assert "proctor.toml" in refused.value.message


@pytest.mark.parametrize(
    "egress",
    [
        [],
        {"hosts": "svc"},
        {"hosts": [""]},
        {"networks": [1]},
        {"hosts": [], "ports": []},
    ],
)
def test_a_malformed_recorded_grant_is_refused(egress: object) -> None:
    with pytest.raises(UsageError) as refused:
        parse_authority({"egress": egress}, recorded=True)
    assert refused.value.code == "authority_invalid"

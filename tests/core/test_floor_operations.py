"""The floor for connector operations: standing ``operations`` approvals and
``approval: required``."""

from __future__ import annotations

import pytest

from proctor.core.authority import Authority, parse_authority, parse_standing
from proctor.core.floor import Change, decide
from proctor.errors import UsageError


def _ask(*names: str) -> Authority:
    return parse_authority(
        {"effects": "ask", "standing_approvals": [{"operations": {"names": list(names)}}]}
    )


def test_an_operations_approval_covers_the_named_operation_or_its_connector() -> None:
    write = Change("operation:tracker/issue.label", "network", operation="tracker/issue.label")
    assert decide(_ask("tracker/issue.label"), write).verdict == "admit"
    assert decide(_ask("tracker/*"), write).verdict == "admit"
    assert decide(_ask("tracker/issue.read"), write).verdict == "pause"
    assert decide(_ask("other/*"), write).verdict == "pause"
    # it covers operations only: a plain request is not an operation
    assert decide(_ask("tracker/*"), Change("http.request", "network")).verdict == "pause"


def test_approval_required_needs_a_person_under_allow_and_standing_approvals() -> None:
    required = Change("operation:t/op", "network", operation="t/op", required=True)
    assert decide(parse_authority({"effects": "allow"}), required).verdict == "pause"
    assert decide(_ask("t/*"), required).verdict == "pause"
    assert decide(_ask("t/*"), required, approved=True).verdict == "admit"
    assert decide(parse_authority({"effects": "none"}), required).verdict == "refuse"
    read = Change("operation:t/read", "read", operation="t/read", required=True)
    assert decide(parse_authority({"effects": "allow"}), read).verdict == "pause"


def test_the_entry_round_trips() -> None:
    (entry,) = parse_standing([{"operations": {"names": ["tracker/*", "git/pr.create"]}}])
    assert entry.to_json() == {"operations": {"names": ["tracker/*", "git/pr.create"]}}


@pytest.mark.parametrize(
    "body",
    [{"names": []}, {"names": ["no-slash"]}, {"names": ["a/*", 3]}, {"names": ["A/b"]}, {}, True],
)
def test_malformed_entries_are_refused(body: object) -> None:
    with pytest.raises(UsageError) as refused:
        parse_standing([{"operations": body}])
    assert refused.value.code == "authority_invalid"

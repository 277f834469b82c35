"""A run's authority record: the default authority is one shared value, and the record of the
same authority with the same grant is made once and handed out as a new document each time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proctor.core.authority import Authority, default_authority
from proctor.runtime.boundary.egress_allow import EgressAllow
from proctor.runtime.engine import drive
from proctor.runtime.engine.delivery import record_authority
from tests.runtime.driver_support import (
    ONE_ECHO,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)


def test_the_default_authorities_are_shared_values() -> None:
    assert default_authority(managed=False) is default_authority(managed=False)
    assert default_authority(managed=True) is default_authority(managed=True)
    assert default_authority(managed=False) == Authority()
    assert default_authority(managed=True) == Authority(effects="ask")


def test_a_record_is_the_authority_with_the_grant_and_a_new_document_each_time() -> None:
    host = default_authority(managed=False)
    none, some = EgressAllow(), EgressAllow.parse(["api.example.com", "10.1.0.0/16"])
    first = record_authority(host, none)
    assert first == {**Authority().to_json(), "egress": {"hosts": [], "networks": []}}
    first["effects"] = "none"  # the caller's own document: the next record is not changed
    first["egress"]["hosts"].append("changed.example")
    again = record_authority(host, none)
    assert again["effects"] == "allow" and again["egress"] == {"hosts": [], "networks": []}
    granted = record_authority(host, some)
    assert granted["egress"] == {"hosts": ["api.example.com"], "networks": ["10.1.0.0/16"]}
    asked = record_authority(default_authority(managed=True), some)
    assert asked["effects"] == "ask" and asked["egress"] == granted["egress"]
    assert record_authority(host, none)["egress"] == {"hosts": [], "networks": []}
    stated = Authority(effects="ask", max_calls=3, set_by="host")
    assert record_authority(stated, none) == {
        **stated.to_json(),
        "egress": {"hosts": [], "networks": []},
    }


def test_a_document_with_a_cycle_is_parsed_and_refused_as_ever() -> None:
    doc: dict[str, Any] = {"effects": "allow"}
    doc["standing_approvals"] = [doc]
    method = type("M", (), {"effects": None, "reach": None})()
    try:
        drive._authorities(doc, method)  # type: ignore[arg-type]
    except Exception as exc:  # parse_authority's refusal, not the key's
        assert "Recursion" not in type(exc).__name__
    else:
        raise AssertionError("a cyclic document was taken")


def test_runs_of_a_session_record_their_authority_each(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    s = session(root)
    first, second = s.run("one", cwd=root), s.run("one", cwd=root)
    records = [s.store.get_run(e.run_id) for e in (first, second)]
    docs = [r.data["authority"] for r in records if r is not None]
    expected = json.loads(json.dumps(record_authority(Authority(), EgressAllow())))
    assert docs[0] == docs[1] == expected

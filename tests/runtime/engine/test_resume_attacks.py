"""Hostile resume documents: each refused with its code; the store and files stay unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ResumeRefused
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
    store_bytes,
)

FLOW = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: read
        tool: fs.read
        inputs: {path: n.md}
      - id: write
        tool: fs.write
        inputs: {path: n.md, content: "new\\n", expected_digest: $steps.read.content_digest}
      - id: confirm
        ask: {reason: Publish?}
      - id: draft
        agent:
          instructions: Say something.
          output: {type: object}
"""

ZERO = "sha256:" + "0" * 64


def _tree(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(".proctor/runs.sqlite"):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Path, Any]:
    root = make_workspace(tmp_path / "ws")
    (root / "n.md").write_text("old\n")
    make_skill(root, "flow", FLOW)
    s = session(root)
    env = s.run("flow", authority=authority(effects="ask"), cwd=root)
    assert env.status == "needs_approval" and (env.requests or [])[0]["address"] == "write"
    return root, env


def _refused(root: Path, run_id: str, doc: Any, code: str) -> None:
    before_store, before_files = store_bytes(root), _tree(root)
    s = session(root)
    with pytest.raises(ResumeRefused) as refused:
        s.resume(run_id, doc if isinstance(doc, bytes) else json.dumps(doc))
    assert refused.value.code == code, refused.value.message
    assert store_bytes(root) == before_store
    assert _tree(root) == before_files
    assert (root / "n.md").read_text() == "old\n"


def test_wrong_digest(paused: tuple[Path, Any]) -> None:
    root, env = paused
    doc = approve(env)
    doc["approvals"]["write"]["request_digest"] = ZERO
    _refused(root, env.run_id, doc, "digest_mismatch")


def test_unknown_address(paused: tuple[Path, Any]) -> None:
    root, env = paused
    doc = approve(env)
    doc["approvals"]["elsewhere"] = doc["approvals"]["write"]
    _refused(root, env.run_id, doc, "unknown_address")


def test_decision_for_a_request_not_yet_asked(paused: tuple[Path, Any]) -> None:
    root, env = paused
    doc = {"approvals": {"confirm": {"request_digest": ZERO, "approved": True}}}
    _refused(root, env.run_id, doc, "unknown_address")


def test_agent_lane_answer_to_an_approval(paused: tuple[Path, Any]) -> None:
    root, env = paused
    digest_ = env.requests[0]["request_digest"]
    doc = {"answers": {"write": {"request_digest": digest_, "value": {"approved": True}}}}
    _refused(root, env.run_id, doc, "wrong_lane")


def test_person_lane_answer_to_an_agent_turn(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "n.md").write_text("old\n")
    make_skill(root, "flow", FLOW)
    s = session(root)
    env = s.run("flow", cwd=root)
    env = s.resume(env.run_id or "", approve(env))
    assert env.status == "needs_agent"
    digest_ = (env.requests or [])[0]["request_digest"]
    (root / "n.md").write_text("old\n")  # the fixture's file check
    doc = {"approvals": {"draft": {"request_digest": digest_, "approved": True}}}
    _refused(root, env.run_id or "", doc, "wrong_lane")


EDIT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: edit
        tool: fs.edit
        inputs: {path: n.md, edits: [{old: "tail", new: "TAIL"}]}
"""


def test_replay_of_an_old_decision_after_the_request_changed(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "n.md").write_text("old\ntail\n")
    make_skill(root, "edit", EDIT)
    s = session(root)
    env = s.run("edit", authority=authority(effects="ask"), cwd=root)
    assert env.status == "needs_approval"
    old = approve(env)
    (root / "n.md").write_text("edited meanwhile\ntail\n")  # the edit still applies
    again = s.resume(env.run_id or "", {})  # the driver sees the change and asks again
    assert again.status == "needs_approval"
    new_digest = (again.requests or [])[0]["request_digest"]
    assert new_digest != (env.requests or [])[0]["request_digest"]
    before_store, before_files = store_bytes(root), _tree(root)
    with pytest.raises(ResumeRefused) as refused:
        session(root).resume(env.run_id or "", json.dumps(old))
    assert refused.value.code == "digest_mismatch"
    assert store_bytes(root) == before_store and _tree(root) == before_files
    assert (root / "n.md").read_text() == "edited meanwhile\ntail\n"


def test_close_with_other_entries(paused: tuple[Path, Any]) -> None:
    root, env = paused
    doc = {**approve(env), "close": {"outcome": "declined"}}
    _refused(root, env.run_id, doc, "close_not_alone")


def test_an_approval_without_a_decision(paused: tuple[Path, Any]) -> None:
    root, env = paused
    _refused(root, env.run_id, env.answers_template, "answer_invalid")


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[]", b'{"approvals": 3}', b'{"extra": {}}', b'{"close": {"outcome": "x"}}'],
)
def test_malformed_documents(paused: tuple[Path, Any], raw: bytes) -> None:
    root, env = paused
    _refused(root, env.run_id, raw, "resume_invalid")


def test_same_decision_twice_is_recorded_once_and_a_new_one_replaces_an_unused_one(
    paused: tuple[Path, Any],
) -> None:
    root, env = paused
    s = session(root)
    plan = approve(env, approved=False)
    # Record a decline without driving (as if the driver crashed right after recording it).
    from proctor.contracts.resume import parse_resume_document
    from proctor.core.resume import admit_resume

    doc = parse_resume_document(plan)
    views = s._request_views(env.run_id, doc)  # the requests the document names
    first = admit_resume(doc, sealed=False, requests=views)
    s.store.record_decisions(env.run_id, first.decisions)
    views = s._request_views(env.run_id, doc)
    same = admit_resume(doc, sealed=False, requests=views)
    assert same.decisions == {} and same.unchanged == ["write"]
    done = s.resume(env.run_id, approve(env))  # a different decision replaces the unused one
    assert done.status == "needs_approval"  # went on to the ask step
    assert (root / "n.md").read_text() == "new\n"


def test_sealed_run_refuses_anything_new(paused: tuple[Path, Any]) -> None:
    root, env = paused
    s = session(root)
    closed = s.resume(env.run_id, {"close": {"outcome": "declined"}})
    assert closed.outcome == "declined"
    _refused(root, env.run_id, approve(env), "run_sealed")
    _refused(root, env.run_id, {"close": {"outcome": "superseded"}}, "run_sealed")

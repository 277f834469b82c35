"""A host-driven turn call (``Session.turn_call``, what MCP's turn_call uses) naming no tool, a
500-character tool, or a secret as its tool name is refused ``tool_unknown`` or
``tool_not_allowed``, recorded, and the run still seals with a verifiable receipt: the call's
receipt names the tool by a placeholder or the scrubbed name, never empty, never the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor import verify_receipt
from proctor.receipts.signing import signer_from_seed
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

TURN = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: draft
        agent:
          instructions: Do it.
          calls: {tools: [fs.list]}
          output: {type: object, properties: {summary: {type: string}}, required: [summary]}
"""
SECRET = "ghp_" + "Zq9X" * 9


@pytest.mark.parametrize(
    ("name", "code"),
    [("", "tool_unknown"), ("x" * 500, "tool_unknown"), (SECRET, "tool_not_allowed")],
)
def test_a_bad_tool_name_is_refused_recorded_and_the_run_seals(
    tmp_path: Path, name: str, code: str
) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "writer", TURN)
    s = session(root)
    env = s.run("writer")
    assert env.status == "needs_agent" and env.run_id
    outcome = s.turn_call(env.run_id, "draft", name, {}, "c1")
    assert (outcome.status, outcome.code) == ("refused", code)
    [record] = s.store.calls(env.run_id)
    assert record.tool and len(record.tool) <= 128 and SECRET not in record.tool
    digest = next(r for r in s.store.requests(env.run_id) if r.kind == "agent_turn")
    answer = {"request_digest": digest.request_digest, "value": {"summary": "done"}}
    done = s.resume(env.run_id, {"answers": {"draft": answer}})
    assert (done.status, done.outcome) == ("sealed", "completed")
    stored = b"".join(p.read_bytes() for p in (root / ".proctor").rglob("*") if p.is_file())
    assert SECRET.encode() not in stored and ("x" * 100).encode() not in stored
    assert done.receipt_id
    key = signer_from_seed(bytes(range(32))).public_key
    verified = verify_receipt(
        done.receipt_id, receipts_dir=root / ".proctor" / "receipts", public_key=key
    )
    assert verified.ok, verified.message


def test_a_call_id_reused_with_other_arguments_is_refused_not_answered_with_the_first(
    tmp_path: Path,
) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "sub").mkdir()
    make_skill(root, "writer", TURN)
    s = session(root)
    env = s.run("writer")
    assert env.run_id
    first = s.turn_call(env.run_id, "draft", "fs.list", {"path": "."}, "c1")
    assert first.status == "completed"
    again = s.turn_call(env.run_id, "draft", "fs.list", {"path": "."}, "c1")
    assert again.status == "completed" and again.result == first.result
    other = s.turn_call(env.run_id, "draft", "fs.list", {"path": "sub"}, "c1")
    assert (other.status, other.code) == ("refused", "call_id_reused")
    assert len(s.store.calls(env.run_id)) == 1
    audit = (root / ".proctor" / "audit.jsonl").read_text(encoding="utf-8")
    assert '"call_id_reused"' in audit

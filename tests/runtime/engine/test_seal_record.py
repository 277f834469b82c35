"""The seal seals from its driver's record, not the row read again: a field of the row the
driver changes while it drives is in the receipt (see also ``conftest.py``, which holds every
seal of these tests to the store's row)."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.receipts.canonical import digest
from proctor.runtime.boundary.reach import authority_record
from proctor.runtime.records.receipts import ReceiptStore
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

ASK = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: read
        tool: fs.read
        inputs: {path: n.md}
      - id: write
        tool: fs.write
        reason: Replace the note.
        inputs: {path: n.md, content: "new text\\n",
                 expected_digest: $steps.read.content_digest}
"""


def _body(root: Path, receipt_id: str | None) -> dict:  # type: ignore[type-arg]
    stored = ReceiptStore(root / ".proctor" / "receipts").get(str(receipt_id))
    return json.loads(stored or b"")["body"]  # type: ignore[no-any-return]


def test_a_policy_edited_while_a_run_waits_is_the_one_its_resume_seals(tmp_path: Path) -> None:
    """The resuming driver loads the policy as it is now and records its digest in the row
    during the drive: the receipt binds that digest, not the one the run started with."""
    root = make_workspace(tmp_path)
    make_skill(root, "ask", ASK)
    (root / "policies").mkdir()
    policy = root / "policies" / "local.yaml"
    policy.write_text("id: first\nrules: []\n")
    (root / "n.md").write_text("old text\n")
    s = session(root)
    env = s.run("ask", authority=authority(effects="ask"), cwd=root)
    assert env.status == "needs_approval"
    started = s.store.get_run(env.run_id or "").data["policy_digest"]  # type: ignore[union-attr]
    policy.write_text("id: second\nrules: []\n")
    done = session(root).resume(env.run_id or "", approve(env))
    assert done.status == "sealed" and done.outcome == "completed"
    row = s.store.get_run(env.run_id or "")
    assert row is not None
    now = row.data["policy_digest"]
    assert now and started and now != started
    body = _body(root, done.receipt_id)
    assert body["policy_digest"] == now
    assert body["authority_digest"] == digest(authority_record(row.data))

"""``receipt.read``: the exact output a receipt of the caller's own tree signed, read from the
run store after the tree verifies, by JSON pointer. Attacks: a receipt of another tree, a
receipt edited in the store, an output edited in the run store (alone, and with the receipt
edited to match it): each is refused and the forged value never comes back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ToolFailed
from proctor.receipts.canonical import canonical, digest
from proctor.receipts.model import parse_envelope
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.receipt_read import RECEIPT_READ
from proctor.runtime.tools.receipts_tool import RECEIPTS_EXTRA
from tests.receipt_files import rewrite
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

PARENT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: child
        skill: ../leaf
        inputs: {}
    result_from: [child]
"""

LEAF = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {}
    steps:
      - id: say
        tool: data.digest
        inputs: {value: {items: [leaf-one, leaf-two], note: "a/b~c"}}
    result_from: [say]
"""

READER = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {receipt: {type: string}}
      required: [receipt]
    steps:
      - id: read
        tool: receipt.read
        inputs: {receipt: $input.receipt}
    result_from: [read]
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "parent", PARENT)
    make_skill(root, "leaf", LEAF)
    make_skill(root, "reader", READER)
    return root


def _sealed_tree(ws: Path) -> tuple[str, RunRecord, dict[str, str]]:
    """Run the parent (its child seals inside it); the parent's run id, the child's record, and
    the child's receipts by kind."""
    s = session(ws)
    env = s.run("parent", cwd=ws)
    assert env.outcome == "completed", env.refusal
    child = next(r for r in s.store.list_runs() if r.data.get("tree") == env.run_id)
    assert child.receipt_id is not None
    run_body = parse_envelope(s.receipts.get(child.receipt_id) or b"")
    step_id = run_body.children[0].receipt_id
    call_id = parse_envelope(s.receipts.get(step_id) or b"").children[0].receipt_id
    return env.run_id or "", child, {"run": child.receipt_id, "step": step_id, "call": call_id}


def _caller(ws: Path, tree: str | None) -> str:
    """A running run of the tree ``tree`` (its own tree when ``None``) to call the tool as."""
    run_id = "f" * 32 if tree is not None else "e" * 32
    data = {"tree": tree} if tree is not None else {}
    session(ws).store.create_run(RunRecord(run_id=run_id, skill="r", method="main", data=data))
    return run_id


def _read(ws: Path, caller: str, **args: Any) -> dict[str, Any]:
    s = session(ws)
    seam = {"load": s.receipts.get, "keys": [s.signer.public_key]}
    ctx = ToolContext(s.workspace, s.store, caller, "call-1", extras={RECEIPTS_EXTRA: seam})
    return RECEIPT_READ.handler(ctx, dict(args))


def _refused(ws: Path, caller: str, **args: Any) -> ToolFailed:
    with pytest.raises(ToolFailed) as caught:
        _read(ws, caller, **args)
    return caught.value


def test_a_call_receipt_gives_back_the_exact_result_it_signed(ws: Path) -> None:
    root, child, ids = _sealed_tree(ws)
    caller = _caller(ws, root)
    whole = _read(ws, caller, receipt=ids["call"])
    assert whole["verification"] == "verified" and whole["kind"] == "call"
    assert whole["run_id"] == child.run_id and whole["step"] == "say"
    body = parse_envelope(session(ws).receipts.get(ids["call"]) or b"").body
    assert digest(whole["value"]) == body["outputs_digest"]
    one = _read(ws, caller, receipt=ids["call"], json_pointer="/digest")
    assert one["value"] == whole["value"]["digest"]
    assert one["bytes"] == len(canonical(one["value"]))


def test_a_run_receipt_gives_back_the_run_result(ws: Path) -> None:
    root, child, ids = _sealed_tree(ws)
    read = _read(ws, _caller(ws, root), receipt=ids["run"], run_id=child.run_id)
    assert read["kind"] == "run" and read["value"] == child.data["envelope"]["result"]


def test_a_step_receipt_signs_no_output(ws: Path) -> None:
    root, _child, ids = _sealed_tree(ws)
    refused = _refused(ws, _caller(ws, root), receipt=ids["step"])
    assert refused.code == "receipt_not_a_call"
    assert refused.details["children"] == [ids["call"]]


def test_pointer_and_size_are_refused_never_cut(ws: Path) -> None:
    root, _child, ids = _sealed_tree(ws)
    caller = _caller(ws, root)
    assert _refused(ws, caller, receipt=ids["call"], json_pointer="/nope").code == (
        "receipt_pointer_missing"
    )
    assert _refused(ws, caller, receipt=ids["call"], max_bytes=8).code == "receipt_read_too_large"


def test_a_receipt_of_another_tree_is_refused(ws: Path) -> None:
    _root, _child, ids = _sealed_tree(ws)
    stranger = _caller(ws, None)  # a root of its own tree in the same workspace
    refused = _refused(ws, stranger, receipt=ids["call"])
    assert refused.code == "receipt_not_in_tree"
    assert _refused(ws, stranger, receipt="sha256:" + "0" * 64).code == "receipt_not_found"
    refused = _refused(ws, stranger, receipt=ids["call"], run_id=_child_id(ws))
    assert refused.code == "run_not_in_tree"


def _child_id(ws: Path) -> str:
    return next(r.run_id for r in session(ws).store.list_runs() if r.data.get("tree"))


def test_through_a_run_another_tree_is_refused_and_nothing_comes_back(ws: Path) -> None:
    """The tool as a skill calls it: admission hands it the receipts, the tree rule holds."""
    _root, _child, ids = _sealed_tree(ws)
    env = session(ws).run("reader", inputs={"receipt": ids["call"]}, cwd=ws)
    assert env.refusal is not None and env.refusal.code == "receipt_not_in_tree"
    assert "leaf-one" not in json.dumps(env.to_json())


def _edit_call_result(ws: Path, run_id: str, forged: dict[str, Any]) -> None:
    db = sqlite3.connect(ws / ".proctor" / "runs.sqlite")
    try:
        (text,) = db.execute(
            "SELECT result FROM calls WHERE run_id = ? AND step_id = 'say'", (run_id,)
        ).fetchone()
        settled = json.loads(text)
        settled["result"] = forged
        db.execute(
            "UPDATE calls SET result = ? WHERE run_id = ? AND step_id = 'say'",
            (json.dumps(settled), run_id),
        )
        db.commit()
    finally:
        db.close()


def test_an_output_edited_in_the_run_store_is_refused(ws: Path) -> None:
    root, child, ids = _sealed_tree(ws)
    forged = {"digest": "sha256:" + "1" * 64, "forged": "FORGED-VALUE"}
    _edit_call_result(ws, child.run_id, forged)
    refused = _refused(ws, _caller(ws, root), receipt=ids["call"])
    assert refused.code == "receipt_not_retained"
    assert "FORGED-VALUE" not in json.dumps(refused.to_dict())


def test_a_receipt_edited_to_match_a_forged_output_is_refused(ws: Path) -> None:
    """The whole forgery: the store's output and the receipt's signed digest both changed.
    The parent's commitment to the receipt no longer holds, so the tree does not verify and
    nothing is read."""
    root, child, ids = _sealed_tree(ws)
    forged = {"digest": "sha256:" + "1" * 64, "forged": "FORGED-VALUE"}
    _edit_call_result(ws, child.run_id, forged)
    envelope = json.loads(session(ws).receipts.get(ids["call"]) or b"")
    envelope["body"]["outputs_digest"] = digest(forged)
    rewrite(ws / ".proctor" / "receipts", ids["call"], canonical(envelope) + b"\n")
    refused = _refused(ws, _caller(ws, root), receipt=ids["call"])
    assert refused.code == "receipt_unverified"
    assert "FORGED-VALUE" not in json.dumps(refused.to_dict())


def test_a_tree_signed_by_an_untrusted_key_is_refused(ws: Path) -> None:
    from proctor.receipts.signing import signer_from_seed

    root, _child, ids = _sealed_tree(ws)
    s = session(ws)
    seam = {"load": s.receipts.get, "keys": [signer_from_seed(b"\x07" * 32).public_key]}
    ctx = ToolContext(s.workspace, s.store, _caller(ws, root), "c", extras={RECEIPTS_EXTRA: seam})
    with pytest.raises(ToolFailed) as caught:
        RECEIPT_READ.handler(ctx, {"receipt": ids["call"]})
    assert caught.value.code == "receipt_unverified"


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"receipt": "x", "json_pointer": "no-slash"},
        {"receipt": "x", "max_bytes": 0},
        {"receipt": "x", "run_id": "../etc"},
        {"receipt": "x", "path": "/etc/passwd"},
    ],
)
def test_arguments_out_of_schema_are_refused(args: dict[str, Any]) -> None:
    from proctor.runtime.tools.base import validate_args

    assert validate_args(RECEIPT_READ, dict(args)) is not None

"""One receipt budget for the whole tree: children and turn calls draw on the root's, so a
fan-out cannot multiply it, and the receipts written never pass it (counted on disk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proctor.runtime.engine.compose import child_run_id
from tests.receipt_files import stored
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.engine.test_compose import _verify

# each child writes 5 receipts: its run, two steps, two calls
LEAF = """minimum_proctor: 0.1.0
methods:
  main:
    inputs: {type: object, properties: {n: {type: string}}}
    steps:
      - id: one
        tool: echo
        inputs: {text: $input.n}
      - id: two
        tool: echo
        inputs: {text: $input.n}
"""

FAN = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {items: {type: array, items: {type: string}}}
      required: [items]
    steps:
      - id: all
        skill: ../leaf
        for_each: $input.items
        concurrency: CONCURRENCY
        inputs: {n: $item}
"""

TURN = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: think
        agent:
          instructions: Use the leaf.
          calls: {skills: [../leaf]}
          output: {type: object}
"""


def _ws(tmp_path: Path, concurrency: int = 1) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "leaf", LEAF)
    make_skill(root, "fan", FAN.replace("CONCURRENCY", str(concurrency)))
    make_skill(root, "turn", TURN)
    return root


def _session(root: Path, limit: int) -> Any:
    s = session(root)
    s.environ = {**s.environ, "PROCTOR_MAX_RECEIPTS": str(limit)}
    return s


def _written(root: Path) -> int:
    return len(stored(root / ".proctor" / "receipts"))


def test_a_fan_out_within_the_budget_writes_exactly_what_it_counts(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    env = _session(root, 30).run("fan", inputs={"items": ["a", "b", "c", "d"]}, cwd=root)
    assert env.outcome == "completed", env.refusal
    # the root's run and step, and 5 for each of 4 children
    assert _verify(root, env.receipt_id).receipts == 22 == _written(root)


def test_a_fan_out_that_cannot_fit_is_refused_before_any_child_starts(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    s = _session(root, 8)
    env = s.run("fan", inputs={"items": ["a", "b", "c", "d"]}, cwd=root)
    assert env.outcome == "blocked" and env.refusal is not None
    assert env.refusal.code == "receipt_budget_exceeded"
    assert s.store.get_run(child_run_id(env.run_id or "", "all", 0)) is None
    assert _written(root) <= 8
    assert _verify(root, env.receipt_id).status == "verified"


def test_children_together_past_the_root_budget_are_refused_with_its_code(
    tmp_path: Path,
) -> None:
    root = _ws(tmp_path)
    s = _session(root, 14)
    # each child alone fits (its own budget would have been 14): together they do not
    env = s.run("fan", inputs={"items": ["a", "b", "c", "d"]}, cwd=root)
    assert env.status == "sealed" and env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "receipt_budget_exceeded"
    assert _written(root) <= 14
    result = _verify(root, env.receipt_id)
    assert result.status == "verified" and result.receipts <= 14


def test_concurrent_children_never_pass_the_root_budget(tmp_path: Path) -> None:
    root = _ws(tmp_path, concurrency=4)
    s = _session(root, 20)
    env = s.run("fan", inputs={"items": list("abcdefgh")}, cwd=root)
    assert env.refusal is not None and env.refusal.code == "receipt_budget_exceeded"
    assert _written(root) <= 20
    assert _verify(root, env.receipt_id).status == "verified"


def test_a_turns_skill_calls_draw_on_the_same_budget(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    s = _session(root, 12)
    env = s.run("turn", cwd=root, authority=authority(effects="allow"))
    assert env.status == "needs_agent"
    run_id = env.run_id or ""
    # the root holds 2 (its run, the spare) + the call's receipt; each child 5
    first = s.turn_call(run_id, "think", "skill.leaf.main", {"n": "x"}, "c1")
    assert first.ok, first.error
    second = s.turn_call(run_id, "think", "skill.leaf.main", {"n": "y"}, "c2")
    assert not second.ok and second.code == "receipt_budget_exceeded"
    (turn,) = env.requests or []
    answer = {"answers": {"think": {"request_digest": turn["request_digest"], "value": {}}}}
    done = s.resume(run_id, answer)
    assert done.status == "sealed"
    assert _written(root) <= 12
    assert _verify(root, done.receipt_id).status == "verified"


def test_refusals_past_the_budget_are_audited_and_never_take_the_tree_past_it(
    tmp_path: Path,
) -> None:
    root = _ws(tmp_path)
    s = _session(root, 6)
    env = s.run("turn", cwd=root)
    run_id = env.run_id or ""
    # outside the allowance: each refused, the first ones recorded with a receipt each
    outcomes = [
        s.turn_call(run_id, "think", "fs.write", {"path": "x", "content": "y"}, f"c{n}")
        for n in range(10)
    ]
    assert {o.code for o in outcomes} == {"tool_not_allowed"}
    assert not (root / "x").exists()
    audited = (root / ".proctor" / "audit.jsonl").read_text().count('"call_refused"')
    assert audited == 10  # every refusal is audited, recorded or not
    (turn,) = env.requests or []
    answer = {"answers": {"think": {"request_digest": turn["request_digest"], "value": {}}}}
    done = s.resume(run_id, answer)
    # the recorded refusals used the budget up: the step has no receipt of its own left, so
    # the run seals blocked on the spare it reserved for exactly this
    assert done.outcome == "blocked" and done.refusal is not None
    assert done.refusal.code == "receipt_budget_exceeded"
    assert _written(root) == 6
    assert _verify(root, done.receipt_id).status == "verified"

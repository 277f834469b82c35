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


def _writes(steps: int) -> str:
    lines = ["minimum_proctor: 0.1.0", "methods:", "  main:", "    steps:"]
    for n in range(steps):
        lines += [
            f"      - id: w{n}",
            "        tool: fs.write",
            f"        inputs: {{path: out{n}.txt, content: x, create: true}}",
        ]
    return "\n".join(lines) + "\n"


def test_a_run_whose_steps_need_more_than_max_receipts_is_refused_before_its_first_step(
    tmp_path: Path,
) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "many", _writes(30))
    s = session(root)
    # 30 steps of one call each need 2 + 60 receipts; the run's own authority allows 61
    env = s.run("many", cwd=root, authority=authority(effects="allow", max_receipts=61))
    assert env.status == "sealed" and env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "receipt_budget_exceeded"
    assert "no step was run" in env.refusal.message
    assert not list(root.glob("out*.txt"))  # nothing executed
    assert s.store.calls(env.run_id or "") == []
    assert _verify(root, env.receipt_id).status == "verified"
    # with room for every receipt the same run completes and writes every file
    done = s.run("many", cwd=root, authority=authority(effects="allow", max_receipts=62))
    assert done.outcome == "completed", done.refusal
    assert len(list(root.glob("out*.txt"))) == 30
    assert _verify(root, done.receipt_id).receipts == 61


def test_max_receipts_is_an_authority_limit_that_narrows_and_is_refused_out_of_range() -> None:
    import pytest

    from proctor.core.authority import narrow, parse_authority
    from proctor.errors import UsageError

    host = parse_authority({"max_receipts": 100})
    assert narrow(host, limits={"max_receipts": 500}).max_receipts == 100
    assert narrow(host, limits={"max_receipts": 50}).max_receipts == 50
    assert "max_receipts" not in parse_authority({}).to_json()  # older digests hold
    for bad in (0, 16_000_001, "10", True):
        with pytest.raises(UsageError) as info:
            parse_authority({"max_receipts": bad})
        assert info.value.code == "authority_invalid"

"""Evaluation: fixed order, warn vs block, on_error, guards missing at call time, UNRESTRICTED."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import ProctorError, RefusedCall
from proctor.policy import (
    UNRESTRICTED,
    GuardContext,
    GuardRegistry,
    GuardVerdict,
    PolicySet,
    evaluate,
    load_policies,
    require_policies,
)
from tests.policy.conftest import TOOLS, ctx, write


class Calls:
    """Guards that record the order they ran in."""

    def __init__(self) -> None:
        self.order: list[str] = []

    def deny(self, name: str):  # type: ignore[no-untyped-def]
        def guard(c: GuardContext) -> GuardVerdict | None:
            self.order.append(name)
            return GuardVerdict(False, f"{name} says no", code=f"{name}_code")

        return guard

    def passes(self, name: str):  # type: ignore[no-untyped-def]
        def guard(c: GuardContext) -> GuardVerdict | None:
            self.order.append(name)
            return None

        return guard

    def raises(self, name: str):  # type: ignore[no-untyped-def]
        def guard(c: GuardContext) -> GuardVerdict | None:
            self.order.append(name)
            raise RuntimeError("token ghp_" + "a" * 36 + " broke")

        return guard


def _rule(rule_id: str, guard: str, enforcement: str, on_error: str = "fail_closed") -> str:
    return (
        f"  - id: {rule_id}\n    guard: {guard}\n    enforcement: {enforcement}\n"
        f"    on_error: {on_error}\n"
    )


def _set(tmp_path: Path, registry: GuardRegistry, files: dict[str, str]) -> PolicySet:
    for name, rules in files.items():
        write(tmp_path / "policies", name, f"id: {name.split('.')[0]}\nrules:\n{rules}")
    return load_policies(tmp_path / "policies", registry, TOOLS)


def test_rules_run_in_file_name_then_file_order_and_block_stops(tmp_path: Path) -> None:
    calls = Calls()
    reg = GuardRegistry(
        {
            "a1": calls.passes("a1"),
            "a2": calls.deny("a2"),
            "b1": calls.deny("b1"),
            "c1": calls.passes("c1"),
        }
    )
    # written out of order on purpose: z-file content first
    ps = _set(
        tmp_path,
        reg,
        {
            "z.yaml": _rule("c1", "c1", "block"),
            "m.yaml": _rule("b1", "b1", "block"),
            "a.yaml": _rule("a1", "a1", "block") + _rule("a2", "a2", "warn"),
        },
    )
    decision = evaluate(ps, ctx("echo"), reg)
    assert calls.order == ["a1", "a2", "b1"]  # c1 never ran: b1 blocked first
    assert not decision.allowed
    assert decision.refusal is not None and decision.refusal.rule.id == "b1"
    assert [(o.rule.id, o.effect) for o in decision.verdicts] == [
        ("a2", "warned"),
        ("b1", "refused"),
    ]
    with pytest.raises(RefusedCall) as info:
        decision.raise_if_refused()
    assert info.value.code == "b1_code" and "b1" in info.value.message


def test_warn_records_and_continues(tmp_path: Path) -> None:
    calls = Calls()
    reg = GuardRegistry({"w": calls.deny("w"), "p": calls.passes("p")})
    ps = _set(tmp_path, reg, {"a.yaml": _rule("w", "w", "warn") + _rule("p", "p", "block")})
    decision = evaluate(ps, ctx("echo"), reg)
    assert decision.allowed and decision.refusal is None
    assert calls.order == ["w", "p"]
    assert [o.verdict.code for o in decision.verdicts] == ["w_code"]
    decision.raise_if_refused()  # nothing to raise


def test_silent_pass_leaves_no_verdict_and_allowing_verdict_is_recorded(tmp_path: Path) -> None:
    def says_yes(c: GuardContext) -> GuardVerdict:
        return GuardVerdict(True, "looked and approved", code="approved")

    reg = GuardRegistry({"yes": says_yes, "quiet": lambda c: None})
    ps = _set(tmp_path, reg, {"a.yaml": _rule("y", "yes", "block") + _rule("q", "quiet", "block")})
    decision = evaluate(ps, ctx("echo"), reg)
    assert decision.allowed
    assert [(o.rule.id, o.effect) for o in decision.verdicts] == [("y", "recorded")]


def test_fail_open_records_the_error_and_continues(tmp_path: Path) -> None:
    calls = Calls()
    reg = GuardRegistry({"boom": calls.raises("boom"), "after": calls.passes("after")})
    ps = _set(
        tmp_path,
        reg,
        {"a.yaml": _rule("r", "boom", "block", "fail_open") + _rule("s", "after", "block")},
    )
    decision = evaluate(ps, ctx("echo"), reg)
    assert decision.allowed
    assert calls.order == ["boom", "after"]
    (outcome,) = decision.verdicts
    assert outcome.event == "policy_guard_error" and outcome.effect == "warned"
    assert outcome.verdict.code == "guard_error"
    meta = dict(outcome.verdict.metadata or {})
    assert meta["error_type"] == "RuntimeError"
    assert "ghp_" not in str(meta) and "[REDACTED]" in meta["error"]


def test_fail_closed_refuses_with_guard_error(tmp_path: Path) -> None:
    calls = Calls()
    reg = GuardRegistry({"boom": calls.raises("boom"), "after": calls.passes("after")})
    ps = _set(
        tmp_path,
        reg,
        {"a.yaml": _rule("r", "boom", "warn", "fail_closed") + _rule("s", "after", "block")},
    )
    decision = evaluate(ps, ctx("echo"), reg)
    assert not decision.allowed
    assert calls.order == ["boom"]
    assert decision.refusal is not None
    assert decision.refusal.verdict.code == "guard_error"
    with pytest.raises(RefusedCall) as info:
        decision.raise_if_refused()
    assert info.value.code == "guard_error"


@pytest.mark.parametrize(("on_error", "allowed"), [("fail_closed", False), ("fail_open", True)])
def test_guard_missing_at_call_time_is_a_failed_guard(
    tmp_path: Path, on_error: str, allowed: bool
) -> None:
    loaded_with = GuardRegistry({"g": lambda c: None})
    ps = _set(tmp_path, loaded_with, {"a.yaml": _rule("r", "g", "block", on_error)})
    decision = evaluate(ps, ctx("echo"), GuardRegistry())  # the guard is gone at call time
    assert decision.allowed is allowed
    (outcome,) = decision.verdicts
    assert outcome.event == "policy_guard_missing"
    assert outcome.verdict.code == "guard_error"


@pytest.mark.parametrize("returned", [True, "no", {"allowed": False}])
def test_a_guard_returning_garbage_has_failed(tmp_path: Path, returned: object) -> None:
    reg = GuardRegistry({"odd": lambda c: returned})
    ps = _set(tmp_path, reg, {"a.yaml": _rule("r", "odd", "block")})
    decision = evaluate(ps, ctx("echo"), reg)
    assert not decision.allowed
    assert decision.refusal is not None and decision.refusal.event == "policy_guard_error"


def test_rules_apply_only_to_their_tools_and_directives(tmp_path: Path) -> None:
    calls = Calls()
    reg = GuardRegistry({"d": calls.deny("d")})
    write(
        tmp_path / "policies",
        "a.yaml",
        """
        id: a
        rules:
          - id: reads
            guard: d
            enforcement: block
            tools: [read_file]
          - id: only_x
            guard: d
            enforcement: block
            directives: [x]
        """,
    )
    ps = load_policies(tmp_path / "policies", reg, TOOLS)
    assert evaluate(ps, ctx("echo"), reg).allowed
    refused = evaluate(ps, ctx("fs.read"), reg)
    assert refused.refusal is not None and refused.refusal.rule.id == "reads"
    in_x = GuardContext("echo", {}, {}, "r", "x", ())
    refused_x = evaluate(ps, in_x, reg)
    assert refused_x.refusal is not None and refused_x.refusal.rule.id == "only_x"


def test_advisory_rules_are_never_evaluated(tmp_path: Path) -> None:
    calls = Calls()
    reg = GuardRegistry({"d": calls.deny("d")})
    ps = _set(tmp_path, reg, {"a.yaml": _rule("r", "d", "advisory")})
    assert evaluate(ps, ctx("echo"), reg).allowed
    assert calls.order == []


def test_unrestricted_evaluates_nothing_and_says_so(registry: GuardRegistry) -> None:
    decision = evaluate(UNRESTRICTED, ctx("fs.read", {"path": ".env"}), registry)
    assert decision.allowed and decision.unrestricted
    assert repr(UNRESTRICTED) == "UNRESTRICTED"
    assert require_policies(UNRESTRICTED) is UNRESTRICTED


@pytest.mark.parametrize("value", [None, [], "UNRESTRICTED", False])
def test_none_or_anything_else_is_incomplete_context(
    registry: GuardRegistry, value: object
) -> None:
    with pytest.raises(ProctorError) as info:
        evaluate(value, ctx("echo"), registry)  # type: ignore[arg-type]
    assert info.value.code == "incomplete_context"
    assert "UNRESTRICTED" in info.value.message
    with pytest.raises(ProctorError) as info2:
        require_policies(value)
    assert info2.value.code == "incomplete_context"

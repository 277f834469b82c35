"""Rule/guard binding in both directions, for ``proctor check``.

A rule naming a guard nobody registered protects nothing; a registered guard no rule binds reads
as protection while inspecting nothing. Both are findings, and so is a check with nothing to
examine: zero enforceable rules and zero guards is a failure, not a clean pass.
"""

from __future__ import annotations

from typing import Literal

from proctor.contracts.values import dataclass
from proctor.policy.loader import guard_arity_problem
from proctor.policy.model import PolicySet
from proctor.policy.registry import GuardRegistry

__all__ = ["Finding", "check_bindings"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``proctor check`` reports.

    Attributes:
        code: stable snake_case identifier (``unbound_guard``, ``unknown_guard`` ...).
        message: what is wrong and where.
        severity: ``error`` fails the check; ``info`` only reports coverage.
        rule_id: the rule concerned, when there is one.
        guard: the guard concerned, when there is one.
    """

    code: str
    message: str
    severity: Literal["error", "info"] = "error"
    rule_id: str | None = None
    guard: str | None = None


def check_bindings(policy_set: PolicySet, registry: GuardRegistry) -> list[Finding]:
    """Every enforceable rule's guard is registered and callable; every guard is bound by a rule.

    The last finding is always an ``info`` one (code ``guard_binding_coverage``) with the counts,
    unless nothing was examined, which is an error (code ``nothing_examined``).
    """
    findings: list[Finding] = []
    bound: set[str] = set()
    for rule in policy_set.enforceable:
        assert rule.guard is not None  # enforceable implies a guard
        guard = registry.get(rule.guard)
        if guard is None:
            findings.append(
                Finding(
                    "unknown_guard",
                    f"{rule.ref}: guard '{rule.guard}' is not registered",
                    rule_id=rule.id,
                    guard=rule.guard,
                )
            )
            continue
        bound.add(rule.guard)
        if not callable(guard):
            findings.append(
                Finding(
                    "guard_not_callable",
                    f"{rule.ref}: guard '{rule.guard}' is not callable",
                    rule_id=rule.id,
                    guard=rule.guard,
                )
            )
            continue
        problem = guard_arity_problem(guard)
        if problem is not None:
            findings.append(
                Finding(
                    "guard_arity",
                    f"{rule.ref}: guard '{rule.guard}' {problem}",
                    rule_id=rule.id,
                    guard=rule.guard,
                )
            )
    for name in registry.names():
        if name not in bound:
            findings.append(
                Finding(
                    "unbound_guard",
                    f"guard '{name}' is registered but no enforceable rule binds it",
                    guard=name,
                )
            )
    rules, guards = len(policy_set.enforceable), len(registry)
    if rules == 0 and guards == 0:
        findings.append(
            Finding(
                "nothing_examined",
                "no enforceable rule and no registered guard: the binding check examined nothing",
            )
        )
    elif rules == 0:
        findings.append(
            Finding("nothing_examined", "no enforceable rule is loaded, so no guard can be bound")
        )
    else:
        findings.append(
            Finding(
                "guard_binding_coverage",
                f"{rules} enforceable rules, {guards} guards, checked in both directions",
                severity="info",
            )
        )
    return findings

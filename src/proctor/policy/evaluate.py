"""Evaluate a call against a PolicySet: the policy step of admission.

Rules covering the tool run in the set's fixed order. ``warn`` records a denial and goes on;
``block`` refuses and stops. A guard that raises, returns something that is not a verdict, is
not callable, or is not registered at all has *failed*: ``fail_open`` records the failure and
goes on, ``fail_closed`` refuses with code ``guard_error``. A guard returning ``None`` is a
silent pass and leaves no trace.
"""

from __future__ import annotations

from typing import Final, Literal

from proctor.contracts.values import dataclass
from proctor.core.secrets_shapes import scrub_secret_shapes
from proctor.errors import ProctorError, RefusedCall
from proctor.policy.guards import GuardContext, GuardVerdict
from proctor.policy.model import PolicyRule, PolicySet
from proctor.policy.registry import GuardRegistry

__all__ = [
    "UNRESTRICTED",
    "PolicyDecision",
    "RuleOutcome",
    "Unrestricted",
    "evaluate",
    "require_policies",
]


class Unrestricted:
    """Type of :data:`UNRESTRICTED`: an embedding application's explicit "evaluate no policy".

    Never a default. Leaving the argument out, or passing ``None``, is refused; only naming
    this object turns policy evaluation off for a call.
    """

    __slots__ = ()
    _instance: Unrestricted | None = None

    def __new__(cls) -> Unrestricted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNRESTRICTED"

    def __bool__(self) -> bool:
        # Truthiness must not read as "no policies"; callers compare by identity.
        return True


UNRESTRICTED: Final = Unrestricted()
"""Pass this instead of a PolicySet to evaluate no policy rule, on purpose."""


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """A rule's non-silent result for one call.

    Attributes:
        rule: the rule evaluated.
        verdict: the guard's verdict, or the one made for a failed guard (code ``guard_error``).
        event: ``policy_guard_check`` (the guard returned a verdict), ``policy_guard_error``
            (it raised or returned garbage) or ``policy_guard_missing`` (not registered); the
            audit writer uses it as the event name.
        effect: ``refused`` (this outcome stopped the call), ``warned`` (a denial let through by
            ``warn`` or ``fail_open``) or ``recorded`` (an allowing verdict).
    """

    rule: PolicyRule
    verdict: GuardVerdict
    event: Literal["policy_guard_check", "policy_guard_error", "policy_guard_missing"]
    effect: Literal["refused", "warned", "recorded"]


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """What the policy step decided for one call.

    Attributes:
        allowed: whether the call may go on to the next admission step.
        refusal: the outcome that refused it (also the last of ``verdicts``), or ``None``.
        verdicts: every non-silent outcome in evaluation order (warnings, recorded verdicts,
            guard failures, and the refusal).
        unrestricted: policy evaluation was switched off with ``UNRESTRICTED``.
    """

    allowed: bool
    refusal: RuleOutcome | None
    verdicts: tuple[RuleOutcome, ...]
    unrestricted: bool = False

    def raise_if_refused(self) -> None:
        """Raise the refusal as a :class:`RefusedCall` (code: the verdict's code).

        Raises:
            RefusedCall: the call was refused; ``details`` name the rule, policy and guard.
        """
        if self.refusal is None:
            return
        rule, verdict = self.refusal.rule, self.refusal.verdict
        raise RefusedCall(
            f"policy rule '{rule.id}' ({rule.source_file}) refused the call: {verdict.message}",
            code=verdict.code or "policy_violation",
            details={
                "rule_id": rule.id,
                "policy_id": rule.policy_id,
                "guard": rule.guard,
                "enforcement": rule.enforcement,
            },
        )


_ALLOWED: Final = PolicyDecision(True, None, ())
_UNRESTRICTED_DECISION: Final = PolicyDecision(True, None, (), unrestricted=True)


def require_policies(policies: object, *, argument: str = "policies") -> PolicySet | Unrestricted:
    """Check a policy argument an embedding application passed: a PolicySet or ``UNRESTRICTED``.

    Raises:
        ProctorError: code ``incomplete_context`` when it is ``None`` (or was left out, which
            callers express as ``None``) or anything else; the message names ``UNRESTRICTED``
            as the deliberate alternative.
    """
    if isinstance(policies, PolicySet | Unrestricted):
        return policies
    what = "not supplied" if policies is None else f"a {type(policies).__name__}"
    raise ProctorError(
        f"incomplete context: '{argument}' is {what}. Supply the loaded PolicySet, or "
        "proctor.UNRESTRICTED to evaluate no policy rule on purpose",
        code="incomplete_context",
        details={"argument": argument},
    )


def evaluate(
    policy_set: PolicySet | Unrestricted, ctx: GuardContext, registry: GuardRegistry
) -> PolicyDecision:
    """Run the enforceable rules covering ``ctx.tool_name`` in order (see module doc).

    Never raises for what a guard does; a failing guard is an outcome.

    Raises:
        ProctorError: ``incomplete_context`` when ``policy_set`` is neither a PolicySet nor
            ``UNRESTRICTED``.
    """
    if type(policy_set) is not PolicySet:
        if isinstance(require_policies(policy_set, argument="policy_set"), Unrestricted):
            return _UNRESTRICTED_DECISION
        assert isinstance(policy_set, PolicySet)  # a PolicySet subclass
    rules = policy_set.rules_for(ctx.tool_name)
    if not rules:
        return _ALLOWED
    own = policy_set.guards
    lookup = registry.get if not own else (lambda name: own.get(name) or registry.get(name))
    outcomes: list[RuleOutcome] | None = None
    for rule in rules:
        if rule.directives is not None and ctx.directive_id not in rule.directives:
            continue
        guard = lookup(rule.guard) if rule.guard is not None else None
        if guard is None:
            outcome = _failed(
                rule,
                "policy_guard_missing",
                f"guard '{rule.guard}' is not registered",
                {"reason": "not_registered"},
            )
        else:
            try:
                verdict = guard(ctx)  # type: ignore[operator]
            except Exception as exc:  # a guard's failure is an outcome, never a crash
                outcome = _failed(
                    rule,
                    "policy_guard_error",
                    f"guard '{rule.guard}' raised {type(exc).__name__}",
                    {
                        "reason": "raised",
                        "error_type": type(exc).__name__,
                        "error": scrub_secret_shapes(str(exc))[:300],
                    },
                )
            else:
                if verdict is None:
                    continue
                if not isinstance(verdict, GuardVerdict):
                    outcome = _failed(
                        rule,
                        "policy_guard_error",
                        f"guard '{rule.guard}' "
                        f"returned a {type(verdict).__name__}, not a "
                        "GuardVerdict or None",
                        {"reason": "bad_return"},
                    )
                elif verdict.allowed:
                    outcome = RuleOutcome(rule, verdict, "policy_guard_check", "recorded")
                elif rule.enforcement == "warn":
                    outcome = RuleOutcome(rule, verdict, "policy_guard_check", "warned")
                else:
                    outcome = RuleOutcome(rule, verdict, "policy_guard_check", "refused")
        if outcomes is None:
            outcomes = []
        outcomes.append(outcome)
        if outcome.effect == "refused":
            return PolicyDecision(False, outcome, tuple(outcomes))
    if outcomes is None:
        return _ALLOWED
    return PolicyDecision(True, None, tuple(outcomes))


def _failed(
    rule: PolicyRule,
    event: Literal["policy_guard_error", "policy_guard_missing"],
    what: str,
    metadata: dict[str, str],
) -> RuleOutcome:
    closed = rule.on_error != "fail_open"
    message = f"{what}; rule '{rule.id}' fails " + (
        "closed, so the call is refused" if closed else "open, so the call goes on"
    )
    verdict = GuardVerdict(False, message, "guard_error", {"guard": rule.guard, **metadata})
    return RuleOutcome(rule, verdict, event, "refused" if closed else "warned")

"""proctor.policy: rule loading and validation, the guard registry, shipped guards, evaluation.

Public names are re-exported here; the submodules are private and may change.
"""

from proctor.policy.bindings import Finding, check_bindings
from proctor.policy.evaluate import (
    UNRESTRICTED,
    PolicyDecision,
    RuleOutcome,
    Unrestricted,
    evaluate,
    require_policies,
)
from proctor.policy.guard_files import GuardFiles, read_guard_files
from proctor.policy.guards import DEFAULT_WRITE_BUDGET, GuardContext, GuardFn, GuardVerdict
from proctor.policy.loader import (
    PolicySource,
    load_policies,
    load_policy_set,
    load_policy_sources,
    shipped_policy_sources,
)
from proctor.policy.model import PolicyRule, PolicySet
from proctor.policy.profile import (
    SHIPPED_POSTURE,
    Drift,
    allow_unguarded,
    check_profile,
    policy_profile,
    shipped_drift,
    write_budget,
)
from proctor.policy.registry import GuardRegistry, default_registry, register_guard
from proctor.policy.user_guards import GuardTrust, trusting
from proctor.policy.workspace import (
    LoadedPolicies,
    check_workspace_policies,
    load_workspace_policies,
)

__all__ = [
    "DEFAULT_WRITE_BUDGET",
    "SHIPPED_POSTURE",
    "UNRESTRICTED",
    "Drift",
    "Finding",
    "GuardContext",
    "GuardFiles",
    "GuardFn",
    "GuardRegistry",
    "GuardTrust",
    "GuardVerdict",
    "LoadedPolicies",
    "PolicyDecision",
    "PolicyRule",
    "PolicySet",
    "PolicySource",
    "RuleOutcome",
    "Unrestricted",
    "allow_unguarded",
    "check_bindings",
    "check_profile",
    "check_workspace_policies",
    "default_registry",
    "evaluate",
    "load_policies",
    "load_policy_set",
    "load_policy_sources",
    "load_workspace_policies",
    "policy_profile",
    "read_guard_files",
    "register_guard",
    "require_policies",
    "shipped_drift",
    "shipped_policy_sources",
    "trusting",
    "write_budget",
]

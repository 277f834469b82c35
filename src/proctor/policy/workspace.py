"""Everything a run needs from policy, loaded once at its start, and the ``proctor check`` phase.

:func:`load_workspace_policies` is the one call the admission path makes before a run: it reads
the profile and write budget from the environment, loads user guards into a fresh registry,
loads shipped + workspace rules, applies the zero-rules gate and the drift check, and returns
what :func:`~proctor.policy.evaluate.evaluate` needs for every call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError, PolicyLoadError
from proctor.policy.bindings import Finding, check_bindings
from proctor.policy.evaluate import UNRESTRICTED, Unrestricted
from proctor.policy.loader import load_policy_set
from proctor.policy.model import PolicySet
from proctor.policy.profile import (
    Drift,
    Profile,
    allow_unguarded,
    check_profile,
    policy_profile,
    write_budget,
)
from proctor.policy.registry import GuardRegistry, default_registry
from proctor.policy.user_guards import (
    GuardTrust,
    load_user_guards,
    read_guard_files,
    refuse_untrusted,
)

__all__ = ["LoadedPolicies", "check_workspace_policies", "load_workspace_policies"]


@dataclass(frozen=True, slots=True)
class LoadedPolicies:
    """The policy state of one run.

    Attributes:
        policy_set: every loaded rule in evaluation order (its ``digest`` goes in receipts).
        registry: the guards (shipped, process-registered and the workspace's own).
        profile: ``default`` or ``custom``.
        drift: the drift report (extra rules named; empty under ``custom``).
        unguarded: zero enforceable rules and ``PROCTOR_ALLOW_NO_POLICIES=1``: the caller
            audits ``unguarded_mode_enabled`` once at run start.
        write_budget: the value to put in every ``GuardContext.write_budget``.
        user_guards: guard names the workspace's module registered.
    """

    policy_set: PolicySet
    registry: GuardRegistry
    profile: Profile
    drift: Drift
    unguarded: bool
    write_budget: int
    user_guards: tuple[str, ...]

    @property
    def enforced(self) -> PolicySet | Unrestricted:
        """What to pass to ``evaluate``: the set, or ``UNRESTRICTED`` in unguarded mode."""
        return UNRESTRICTED if self.unguarded else self.policy_set


def load_workspace_policies(
    workspace: Path,
    *,
    tools: Collection[str],
    environ: Mapping[str, str],
    registry: GuardRegistry | None = None,
    trust: GuardTrust = refuse_untrusted,
) -> LoadedPolicies:
    """Load and check the policy state for a run in ``workspace``.

    Args:
        workspace: the workspace root.
        tools: the registered proctor tool names (rules naming others fail to load).
        environ: the environment to read ``PROCTOR_*`` settings from.
        registry: the guards to start from (copied, never changed); default: the process's.
        trust: asked about the workspace's guard modules before any runs (default: none is
            trusted; :func:`proctor.policy.user_guards.trusting` admits one digest).

    Raises:
        ConfigError: ``guards_untrusted`` (nothing of the workspace's modules ran); a bad
            ``PROCTOR_POLICY_PROFILE`` (``bad_policy_profile``) or ``PROCTOR_WRITE_BUDGET``;
            a bad guard config or module; zero enforceable rules
            without the opt-out (``no_enforceable_policies``); shipped rules missing or changed
            under ``default`` (``policy_drift``).
        PolicyLoadError: a policy file or rule is invalid, or a user guard takes a taken name.
    """
    profile = policy_profile(environ)
    budget = write_budget(environ)
    guards = (registry or default_registry()).copy()
    added = load_user_guards(read_guard_files(workspace), guards, trust=trust)
    policy_set = load_policy_set(workspace, guards, tools)
    unguarded = allow_unguarded(policy_set, environ)
    drift = check_profile(policy_set, profile)
    return LoadedPolicies(policy_set, guards, profile, drift, unguarded, budget, added)


def check_workspace_policies(
    workspace: Path,
    *,
    tools: Collection[str],
    environ: Mapping[str, str],
    registry: GuardRegistry | None = None,
    trust: GuardTrust = refuse_untrusted,
) -> list[Finding]:
    """The policy phase of ``proctor check``: load everything, then check bindings both ways.

    Never raises for a problem it is checking: each load problem, the profile verdict and each
    binding problem is an ``error`` finding; coverage counts are ``info`` findings. A check
    that examined no enforceable rule reports an error.
    """
    findings: list[Finding] = []
    try:
        loaded = load_workspace_policies(
            workspace, tools=tools, environ=environ, registry=registry, trust=trust
        )
    except PolicyLoadError as exc:
        problems = exc.details.get("problems") or [{"code": exc.code, "message": exc.message}]
        for p in problems:
            where = f"{p.get('file')}: " if p.get("file") else ""
            findings.append(
                Finding(str(p["code"]), where + str(p["message"]), rule_id=p.get("rule"))
            )
        return findings
    except ConfigError as exc:
        return [Finding(exc.code, exc.message)]
    ps = loaded.policy_set
    files = len(ps.policy_ids)
    findings.append(
        Finding(
            "policies_loaded",
            f"{files} policy files, {len(ps.rules)} rules, "
            f"{len(ps.enforceable)} enforceable, profile {loaded.profile}",
            severity="info",
        )
    )
    findings.extend(Finding("policy_warning", w, severity="info") for w in ps.warnings)
    findings.extend(check_bindings(ps, loaded.registry))
    return findings

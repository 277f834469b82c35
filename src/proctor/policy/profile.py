"""Policy profiles, the shipped-posture drift check, and the zero-rules gate.

``PROCTOR_POLICY_PROFILE``:

- ``default`` (also when unset): every shipped enforceable rule must be loaded, enforceable, once,
  with the reviewed guard, enforcement, on_error and tools. Rules a workspace adds are fine (an
  added rule can only add a check); a missing or changed shipped rule refuses to start.
- ``custom``: that check alone is off; every rule still loads, validates and runs.
- anything else refuses to start.

The reviewed posture is pinned here, in code, not read back from the shipped files: a check
comparing the installed files with themselves would agree with any edit. A test pins that the
shipped files load to exactly this posture.

Zero enforceable rules refuse a run unless ``PROCTOR_ALLOW_NO_POLICIES=1``; then the run is
*unguarded* and the caller audits ``unguarded_mode_enabled``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from proctor.contracts.values import dataclass, field
from proctor.errors import ConfigError
from proctor.policy.guards import DEFAULT_WRITE_BUDGET
from proctor.policy.model import PolicySet

__all__ = [
    "ALLOW_NO_POLICIES_ENV",
    "POLICY_PROFILE_ENV",
    "SHIPPED_POLICY_IDS",
    "SHIPPED_POSTURE",
    "WRITE_BUDGET_ENV",
    "Drift",
    "Posture",
    "Profile",
    "allow_unguarded",
    "check_profile",
    "policy_profile",
    "shipped_drift",
    "write_budget",
]

POLICY_PROFILE_ENV = "PROCTOR_POLICY_PROFILE"
ALLOW_NO_POLICIES_ENV = "PROCTOR_ALLOW_NO_POLICIES"
WRITE_BUDGET_ENV = "PROCTOR_WRITE_BUDGET"

Profile = Literal["default", "custom"]

_FILE_TOOLS = (
    "fs.read",
    "fs.read_bundle",
    "fs.list",
    "fs.search",
    "fs.write",
    "fs.edit",
    "fs.apply_bundle",
    "fs.delete",
    "fs.restore",
)
_CHANGING = ("fs.write", "fs.edit", "fs.apply_bundle", "fs.delete", "fs.restore")


@dataclass(frozen=True, slots=True)
class Posture:
    """The reviewed shape of one shipped rule."""

    guard: str
    enforcement: str
    on_error: str
    tools: frozenset[str] | None


SHIPPED_POLICY_IDS: tuple[str, ...] = ("proctor.credentials", "proctor.files")
"""Policy ids of the shipped files."""

SHIPPED_POSTURE: dict[str, Posture] = {
    # resources/policies/proctor-credentials.yaml
    "proctor.no_secrets_in_args": Posture("check_no_secrets_in_args", "block", "fail_closed", None),
    "proctor.no_raw_credentials": Posture(
        "check_no_raw_credentials", "block", "fail_closed", frozenset({"http.request"})
    ),
    # resources/policies/proctor-files.yaml
    "proctor.sensitive_paths": Posture(
        "check_sensitive_paths", "block", "fail_closed", frozenset(_FILE_TOOLS)
    ),
    "proctor.write_budget": Posture(
        "check_write_budget", "block", "fail_closed", frozenset(_CHANGING)
    ),
    "proctor.no_bulk_writes": Posture(
        "check_no_bulk_writes",
        "warn",
        "fail_open",
        frozenset({"fs.write", "fs.edit", "fs.apply_bundle"}),
    ),
    "proctor.destructive_action": Posture(
        "check_destructive_action",
        "warn",
        "fail_open",
        frozenset({"fs.write", "fs.apply_bundle", "fs.delete", "fs.restore"}),
    ),
    "proctor.reason_for_changes": Posture(
        "check_reason_not_empty", "warn", "fail_open", frozenset({*_CHANGING, "http.request"})
    ),
}
"""Rule id -> reviewed posture of every shipped enforceable rule."""


@dataclass(frozen=True, slots=True)
class Drift:
    """How the loaded set differs from the reviewed shipped posture.

    Attributes:
        missing: shipped rule ids not loaded as enforceable rules (absent, or made advisory).
        changed: ``"rule.field: reviewed X, loaded Y"`` for each edited field.
        extra: rule ids loaded beyond the shipped ones (allowed; named for the record).
    """

    missing: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    extra: tuple[str, ...] = field(default=())

    @property
    def drifted(self) -> bool:
        """Whether the shipped posture is broken (extra rules alone are not drift)."""
        return bool(self.missing or self.changed)


def policy_profile(environ: Mapping[str, str]) -> Profile:
    """The profile ``PROCTOR_POLICY_PROFILE`` selects (``default`` when unset).

    Raises:
        ConfigError: code ``bad_policy_profile`` for any value but ``default`` and ``custom``.
    """
    value = environ.get(POLICY_PROFILE_ENV, "default")
    if value == "default":
        return "default"
    if value == "custom":
        return "custom"
    raise ConfigError(
        f"{POLICY_PROFILE_ENV}={value!r} is not a policy profile; use 'default' (the shipped "
        "rules are verified) or 'custom' (they are not)",
        code="bad_policy_profile",
    )


def shipped_drift(policy_set: PolicySet) -> Drift:
    """Compare the loaded set with :data:`SHIPPED_POSTURE` (see :class:`Drift`)."""
    by_id = {r.id: r for r in policy_set.enforceable}
    missing = tuple(sorted(rid for rid in SHIPPED_POSTURE if rid not in by_id))
    changed: list[str] = []
    for rid in sorted(SHIPPED_POSTURE):
        rule = by_id.get(rid)
        if rule is None:
            continue
        want = SHIPPED_POSTURE[rid]
        have_tools = frozenset(rule.tools) if rule.tools is not None else None
        for name, reviewed, loaded in (
            ("guard", want.guard, rule.guard),
            ("enforcement", want.enforcement, rule.enforcement),
            ("on_error", want.on_error, rule.on_error),
        ):
            if reviewed != loaded:
                changed.append(f"{rid}.{name}: reviewed {reviewed!r}, loaded {loaded!r}")
        if have_tools != want.tools:
            changed.append(
                f"{rid}.tools: reviewed {_tools(want.tools)}, loaded {_tools(have_tools)}"
            )
        if rule.directives is not None:
            changed.append(f"{rid}.directives: reviewed all, loaded {list(rule.directives)}")
    extra = tuple(sorted(r.id for r in policy_set.rules if r.id not in SHIPPED_POSTURE))
    return Drift(missing, tuple(changed), extra)


def _tools(tools: frozenset[str] | None) -> str:
    return "all tools" if tools is None else str(sorted(tools))


def check_profile(policy_set: PolicySet, profile: Profile) -> Drift:
    """Apply ``profile`` to a loaded set; returns the drift report (empty under ``custom``).

    Raises:
        ConfigError: code ``policy_drift`` under ``default`` when a shipped rule is missing or
            changed; the message names each one and the extra rules loaded beside them.
    """
    if profile == "custom":
        return Drift()
    drift = shipped_drift(policy_set)
    if drift.drifted:
        parts = []
        if drift.missing:
            parts.append(f"missing: {', '.join(drift.missing)}")
        if drift.changed:
            parts.append(f"changed: {'; '.join(drift.changed)}")
        parts.append(f"extra (allowed): {', '.join(drift.extra) or 'none'}")
        raise ConfigError(
            "the shipped policy rules are not loaded as reviewed (" + "; ".join(parts) + "). "
            f"Restore them, or set {POLICY_PROFILE_ENV}=custom to run a reviewed custom set",
            code="policy_drift",
            details={
                "missing": list(drift.missing),
                "changed": list(drift.changed),
                "extra": list(drift.extra),
            },
        )
    return drift


def allow_unguarded(policy_set: PolicySet, environ: Mapping[str, str]) -> bool:
    """Whether the run goes unguarded: ``True`` only for zero enforceable rules plus the opt-out.

    A ``True`` answer means the caller evaluates with ``UNRESTRICTED`` and audits
    ``unguarded_mode_enabled``.

    Raises:
        ConfigError: code ``no_enforceable_policies`` when no enforceable rule is loaded and
            ``PROCTOR_ALLOW_NO_POLICIES`` is not ``1``.
    """
    if policy_set.enforceable:
        return False
    if environ.get(ALLOW_NO_POLICIES_ENV) == "1":
        return True
    raise ConfigError(
        "no enforceable policy rule is loaded, so every guard would be skipped; the run is "
        f"refused. Load rules, or set {ALLOW_NO_POLICIES_ENV}=1 to run unguarded on purpose",
        code="no_enforceable_policies",
    )


def write_budget(environ: Mapping[str, str]) -> int:
    """The per-run write budget: ``PROCTOR_WRITE_BUDGET`` or 50.

    Raises:
        ConfigError: code ``bad_write_budget`` when the value is not a whole number >= 0.
    """
    raw = environ.get(WRITE_BUDGET_ENV)
    if raw is None or raw == "":
        return DEFAULT_WRITE_BUDGET
    if not raw.isdigit():
        raise ConfigError(
            f"{WRITE_BUDGET_ENV}={raw!r} is not a whole number of changing calls",
            code="bad_write_budget",
        )
    return int(raw)

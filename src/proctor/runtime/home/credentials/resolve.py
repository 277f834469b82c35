"""Resolution: which material a skill's declared credential requirement gets, decided once.

For each requirement, the first source that applies wins:

1. the explicit ``--profile`` (when its provider is the requirement's provider);
2. the project binding (the skill requirement's, then the provider's);
3. the provider's default profile in the home's ``config.json``;
4. a host-supplied handle (``request_secrets`` of the Python API, keyed by requirement name);
5. the requirement's declared environment names in the workspace snapshot (process first,
   then ``.env``). If more than one declared name has a value, it is ambiguous and refused.

A stored profile's ``auth_mode`` selects one declared delivery. Audience: when both the skill and
the profile name one, their normalized hosts must match; a profile may narrow a requirement that
names none; it can never replace the skill's own. A stored profile without an audience goes only
to the package identities it is bound to (:func:`~.bindings.check_package`,
``credential_unbound``).

:func:`readiness` answers the same question without touching material (except to decrypt
nothing at all): it names the source and profile that would be used, or the setup commands.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass
from proctor.errors import CredentialError
from proctor.runtime.home.credentials.audience import audience_host, normalize_audience
from proctor.runtime.home.credentials.bindings import Bindings, check_package, load_bindings
from proctor.runtime.home.credentials.environment import EnvSnapshot
from proctor.runtime.home.credentials.model import ResolvedCredential, Secret, Source
from proctor.runtime.home.credentials.store import CredentialStore, ProfileInfo

if TYPE_CHECKING:
    from proctor.contracts.skill import CredentialRequirement
    from proctor.runtime.boundary.sanitize import TaintSet

__all__ = ["Readiness", "readiness", "resolve_credentials", "setup_commands"]


@dataclass(frozen=True)
class _Choice:
    source: Source
    mode: str
    profile: ProfileInfo | None = None
    env: str | None = None
    host_value: str | None = None


@dataclass(frozen=True)
class Readiness:
    """One requirement's readiness, with no material in it.

    Attributes:
        name, provider, audience: the requirement as declared.
        modes: the declared auth modes and their delivery environment names.
        ready: whether a source was found.
        source, profile, mode: what would be used (``None`` when not ready).
        problem: why it is not ready (a stable code), or ``None``.
        setup: exact commands that would make it ready (empty when ready).
    """

    name: str
    provider: str
    audience: str | None
    modes: dict[str, str]
    ready: bool
    source: Source | None
    profile: str | None
    mode: str | None
    problem: str | None
    setup: list[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``skill inspect --json`` and ``needs_credential`` envelopes."""
        return {
            "credential": self.name,
            "provider": self.provider,
            "audience": self.audience,
            "modes": dict(self.modes),
            "ready": self.ready,
            "source": self.source,
            "profile": self.profile,
            "mode": self.mode,
            "problem": self.problem,
            "setup": list(self.setup),
        }


def _modes(requirement: CredentialRequirement) -> dict[str, str]:
    return {mode: auth.delivery.env for mode, auth in requirement.auth.items()}


def setup_commands(name: str, requirement: CredentialRequirement) -> list[str]:
    """The commands an operator runs to store a profile for ``requirement`` (one per mode)."""
    modes = _modes(requirement)
    commands = []
    for mode, env in modes.items():
        parts = ["proctor", "credential", "set", requirement.provider, "--profile", name]
        if len(modes) > 1:
            parts += ["--auth-mode", mode]
        if requirement.audience is not None:
            parts += ["--audience", requirement.audience]
        parts.append("--from-stdin")
        commands.append(f"printf '%s' \"${env}\" | " + shlex.join(parts))
    return commands


def _profile_mode(name: str, requirement: CredentialRequirement, profile: ProfileInfo) -> str:
    modes = _modes(requirement)
    if profile.auth_mode is not None:
        if profile.auth_mode not in modes:
            raise CredentialError(
                f"profile {profile.name!r} uses auth mode {profile.auth_mode!r}, which "
                f"credential {name!r} does not declare (declared: {', '.join(sorted(modes))})",
                code="credential_mode_unsupported",
            )
        return profile.auth_mode
    if len(modes) == 1:
        return next(iter(modes))
    raise CredentialError(
        f"profile {profile.name!r} has no auth mode and credential {name!r} declares several;"
        " store it again with --auth-mode",
        code="credential_mode_ambiguous",
    )


def _effective_audience(
    name: str, requirement: CredentialRequirement, profile: ProfileInfo | None
) -> str | None:
    declared = normalize_audience(requirement.audience) if requirement.audience else None
    narrowed = profile.audience if profile is not None else None
    if declared is not None and narrowed is not None:
        if audience_host(declared) != audience_host(narrowed):
            raise CredentialError(
                f"profile {profile.name if profile else ''!r} is bound to {narrowed}, but "
                f"credential {name!r} is declared for {declared}; a profile cannot widen or "
                "move a skill's audience",
                code="credential_audience_mismatch",
            )
        return declared
    return declared or narrowed


def _choose(
    name: str,
    requirement: CredentialRequirement,
    *,
    skill: str,
    store: CredentialStore,
    bindings: Bindings,
    env: EnvSnapshot,
    profile: str | None,
    host_secrets: Mapping[str, str],
) -> _Choice | None:
    stored_names: list[tuple[Source, str | None]] = [
        ("profile", profile),
        ("binding", bindings.profile_for(skill, name, requirement.provider)),
        ("default", store.default_for(requirement.provider)),
    ]
    for source, candidate in stored_names:
        if candidate is None:
            continue
        info = store.get(candidate)
        if info is None:
            if source == "profile":
                continue  # an explicit profile for another provider simply does not apply
            raise CredentialError(
                f"the {source} for credential {name!r} names profile {candidate!r}, which is "
                "not stored here",
                code="credential_profile_unknown",
            )
        if info.provider != requirement.provider:
            if source == "profile":
                continue
            raise CredentialError(
                f"the {source} for credential {name!r} names profile {candidate!r} of provider "
                f"{info.provider!r}, not {requirement.provider!r}",
                code="credential_provider_mismatch",
            )
        return _Choice(source, _profile_mode(name, requirement, info), profile=info)
    if name in host_secrets:
        modes = _modes(requirement)
        if len(modes) != 1:
            raise CredentialError(
                f"a host handle for credential {name!r} cannot choose among its auth modes",
                code="credential_mode_ambiguous",
            )
        return _Choice("host", next(iter(modes)), host_value=host_secrets[name])
    present = [(mode, var) for mode, var in _modes(requirement).items() if env.get(var)]
    if len(present) > 1:
        names = ", ".join(var for _mode, var in present)
        raise CredentialError(
            f"credential {name!r}: several declared environment values are set ({names}); "
            "choose one with --profile",
            code="credential_ambiguous",
        )
    if present:
        mode, var = present[0]
        return _Choice(env.origins.get(var, "env"), mode, env=var)
    return None


def readiness(
    requirements: Mapping[str, CredentialRequirement],
    *,
    skill: str,
    workspace_root: Path,
    env: EnvSnapshot,
    store: CredentialStore | None = None,
    profile: str | None = None,
    host_secrets: Mapping[str, str] | None = None,
    identity: str | None = None,
) -> list[Readiness]:
    """Each requirement's readiness and, when missing, the exact setup commands.

    Reads no material. A requirement whose configuration is wrong (an ambiguous environment,
    a profile of the wrong provider, an audience mismatch, a profile not bound to the package
    ``identity``) is reported not ready with that problem's code rather than raised.
    """
    store = store or CredentialStore()
    bindings = load_bindings(workspace_root)
    out = []
    for name, requirement in sorted(requirements.items()):
        modes = _modes(requirement)
        try:
            choice = _choose(
                name, requirement, skill=skill, store=store, bindings=bindings, env=env,
                profile=profile, host_secrets=host_secrets or {},
            )  # fmt: skip
            if choice is not None:
                _effective_audience(name, requirement, choice.profile)
                if choice.profile is not None:
                    check_package(choice.profile, identity, name)
            problem = None if choice is not None else "credential_missing"
        except CredentialError as exc:
            choice, problem = None, exc.code
            if exc.code == "credential_unbound":
                out.append(_unbound(name, requirement, exc))
                continue
        out.append(
            Readiness(
                name=name,
                provider=requirement.provider,
                audience=requirement.audience,
                modes=modes,
                ready=choice is not None,
                source=choice.source if choice else None,
                profile=choice.profile.name if choice and choice.profile else None,
                mode=choice.mode if choice else None,
                problem=problem,
                setup=[] if choice else setup_commands(name, requirement),
            )
        )
    return out


def _unbound(name: str, requirement: CredentialRequirement, exc: CredentialError) -> Readiness:
    """Not ready because the profile is not bound to the package: the setup is the binding."""
    details = exc.details or {}
    return Readiness(
        name=name,
        provider=requirement.provider,
        audience=requirement.audience,
        modes=_modes(requirement),
        ready=False,
        source=None,
        profile=details.get("profile"),
        mode=None,
        problem=exc.code,
        setup=[str(details.get("bind"))],
    )


def resolve_credentials(
    requirements: Mapping[str, CredentialRequirement],
    *,
    skill: str,
    workspace_root: Path,
    env: EnvSnapshot,
    store: CredentialStore | None = None,
    profile: str | None = None,
    host_secrets: Mapping[str, str] | None = None,
    taint: TaintSet | None = None,
    only: Iterable[str] | None = None,
    identity: str | None = None,
) -> dict[str, ResolvedCredential]:
    """Resolve requirements (all, or ``only`` those named) to material, once per command.

    Every resolved value is added to ``taint`` before this returns. ``identity`` is the
    package identity asking: a stored profile without an audience goes only to the identities
    it is bound to (``None`` matches none).

    Raises:
        CredentialError: ``needs_credential`` (details ``readiness``: what is missing and the
            setup commands), ``credential_ambiguous``, ``credential_audience_mismatch``,
            ``credential_mode_unsupported``/``_ambiguous``, ``credential_profile_unknown``,
            ``credential_provider_mismatch``, ``credential_unbound`` (a profile without an
            audience not bound to ``identity``: its material is never read),
            ``credential_decrypt_failed`` and the store's other errors. Nothing is partially
            returned.
    """
    store = store or CredentialStore()
    bindings = load_bindings(workspace_root)
    wanted = sorted(requirements) if only is None else sorted(set(only))
    resolved: dict[str, ResolvedCredential] = {}
    missing: list[Readiness] = []
    for name in wanted:
        requirement = requirements.get(name)
        if requirement is None:
            raise CredentialError(
                f"credential {name!r} is not declared by the skill",
                code="credential_undeclared",
            )
        choice = _choose(
            name, requirement, skill=skill, store=store, bindings=bindings, env=env,
            profile=profile, host_secrets=host_secrets or {},
        )  # fmt: skip
        if choice is None:
            missing.append(
                Readiness(
                    name,
                    requirement.provider,
                    requirement.audience,
                    _modes(requirement),
                    False,
                    None,
                    None,
                    None,
                    "credential_missing",
                    setup_commands(name, requirement),
                )
            )
            continue
        audience = _effective_audience(name, requirement, choice.profile)
        if choice.profile is not None:
            check_package(choice.profile, identity, name)
            secret = store.material(choice.profile.name)
        elif choice.host_value is not None:
            secret = Secret(choice.host_value)
        else:
            assert choice.env is not None
            secret = Secret(env.get(choice.env) or "")
        resolved[name] = ResolvedCredential(
            name=name,
            provider=requirement.provider,
            mode=choice.mode,
            env=_modes(requirement)[choice.mode],
            source=choice.source,
            profile=choice.profile.name if choice.profile else None,
            audience=audience,
            secret=secret,
        )
    if missing:
        first = missing[0]
        raise CredentialError(
            f"credential {first.name!r} (provider {first.provider!r}) is not configured; "
            f"run: {first.setup[0]}",
            code="needs_credential",
            details={"readiness": [m.to_dict() for m in missing]},
        )
    if taint is not None:
        for credential in resolved.values():
            taint.add(credential.secret.reveal())
    return resolved

"""Bindings: which stored profile a workspace uses, and which packages a profile may reach.

Project bindings are kept in ``<workspace>/.proctor/credentials.json`` as names only::

    {"providers": {"tracker": "work"}, "skills": {"triage": {"tracker": "work-triage"}}}

The file holds no material and may be committed when the names are not sensitive.

Package bindings are kept in the home, beside the profile (``packages``): a stored profile
without an audience goes only to the package identities a person bound it to
(:func:`check_package`), so a second package that names the same provider (or a workspace file
that binds the profile to it) is refused ``credential_unbound``. The first package to ask for it
is refused too, with the command that binds it (``proctor credential bind PROFILE IDENTITY``,
which shows the profile and identity and asks the person to confirm). A profile with an
audience goes only to that host, whichever package asks.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass, field
from proctor.errors import CredentialError, ParseError
from proctor.runtime.home.credentials.store import ProfileInfo, validate_name

__all__ = ["Bindings", "bind_provider", "bind_skill", "check_package", "load_bindings"]


@dataclass(frozen=True)
class Bindings:
    """A workspace's bindings."""

    providers: dict[str, str] = field(default_factory=dict)
    skills: dict[str, dict[str, str]] = field(default_factory=dict)

    def profile_for(self, skill: str, credential: str, provider: str) -> str | None:
        """The bound profile: the skill requirement's binding first, then the provider's."""
        return self.skills.get(skill, {}).get(credential) or self.providers.get(provider)

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON form."""
        return {
            "providers": dict(self.providers),
            "skills": {k: dict(v) for k, v in self.skills.items()},
        }


def _path(workspace_root: Path) -> Path:
    return workspace_root / ".proctor" / "credentials.json"


def _names(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise CredentialError(
            ".proctor/credentials.json must map names to profile names",
            code="credential_bindings_invalid",
        )
    return dict(value)


def load_bindings(workspace_root: Path) -> Bindings:
    """Read the workspace's bindings; empty when the file does not exist.

    Raises:
        CredentialError: (``credential_bindings_invalid``) the file is not the expected JSON.
    """
    path = _path(workspace_root)
    if not path.is_file():
        return Bindings()
    from proctor.contracts import json_strict

    try:
        # strict: a skill bound twice would get one profile here and another to any reader
        # keeping the first copy
        document = json_strict.loads(path.read_bytes(), source="credentials.json")
    except ParseError as exc:
        raise CredentialError(
            f".proctor/credentials.json is not valid JSON ({exc.code}: {exc})",
            code="credential_bindings_invalid",
        ) from None
    if not isinstance(document, dict) or set(document) - {"providers", "skills"}:
        raise CredentialError(
            ".proctor/credentials.json may hold only providers and skills",
            code="credential_bindings_invalid",
        )
    skills_raw = document.get("skills", {})
    if not isinstance(skills_raw, dict):
        raise CredentialError(
            ".proctor/credentials.json: skills must be an object",
            code="credential_bindings_invalid",
        )
    return Bindings(
        providers=_names(document.get("providers", {})),
        skills={str(k): _names(v) for k, v in skills_raw.items()},
    )


def _save(workspace_root: Path, bindings: Bindings) -> None:
    path = _path(workspace_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{secrets.token_hex(4)}.tmp")
    tmp.write_text(
        json.dumps(bindings.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)


def bind_provider(workspace_root: Path, profile: str, provider: str) -> Bindings:
    """Bind ``profile`` for every requirement of ``provider`` in this workspace."""
    validate_name("profile", profile)
    validate_name("provider", provider)
    current = load_bindings(workspace_root)
    updated = Bindings({**current.providers, provider: profile}, current.skills)
    _save(workspace_root, updated)
    return updated


def bind_skill(workspace_root: Path, profile: str, skill: str, credential: str) -> Bindings:
    """Bind ``profile`` for one named requirement of one skill; wins over a provider binding."""
    validate_name("profile", profile)
    validate_name("skill", skill)
    validate_name("credential", credential)
    current = load_bindings(workspace_root)
    skills = {k: dict(v) for k, v in current.skills.items()}
    skills.setdefault(skill, {})[credential] = profile
    updated = Bindings(current.providers, skills)
    _save(workspace_root, updated)
    return updated


def check_package(profile: ProfileInfo, identity: str | None, credential: str) -> None:
    """Let ``profile`` go to the package ``identity``: it names an audience (it goes to that
    host only), or a person bound it to this identity.

    Raises:
        CredentialError: ``credential_unbound``: the profile has no audience and is not bound
            to this package (bound to none yet, or to others); the message names the command
            that binds it. Nothing was delivered.
    """
    if profile.audience is not None or (identity is not None and identity in profile.packages):
        return
    who = identity or "a package of unknown identity"
    command = f"proctor credential bind {profile.name} {identity or 'IDENTITY'}"
    if profile.packages:
        held = ", ".join(profile.packages)
        reason = f"it is bound to {held} only"
    else:
        reason = "it is bound to no package yet"
    raise CredentialError(
        f"profile {profile.name!r} (provider {profile.provider!r}) has no audience, and "
        f"{reason}: credential {credential!r} of {who} was not given it. If this package may "
        f"use it, run: {command}",
        code="credential_unbound",
        details={"profile": profile.name, "identity": identity, "bind": command},
    )

"""Project bindings: which stored profile a workspace uses, by provider or by skill requirement.

Kept in ``<workspace>/.proctor/credentials.json`` as names only::

    {"providers": {"tracker": "work"}, "skills": {"triage": {"tracker": "work-triage"}}}

The file holds no material and may be committed when the names are not sensitive.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass, field
from proctor.errors import CredentialError
from proctor.runtime.home.credentials.store import validate_name

__all__ = ["Bindings", "bind_provider", "bind_skill", "load_bindings"]


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
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CredentialError(
            ".proctor/credentials.json is not valid JSON", code="credential_bindings_invalid"
        ) from exc
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

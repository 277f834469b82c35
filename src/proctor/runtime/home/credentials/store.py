"""Local credential profiles: metadata in the home's ``config.json``, material encrypted at rest.

Layout under the home (``PROCTOR_HOME`` or ``~/.proctor``):

- ``credentials.key``: 32 random bytes, mode 0600. A key file readable by group or others is
  refused, never repaired silently: someone may already have read it.
- ``credentials/<profile>.json``: ``{"v": 1, "nonce": ..., "ciphertext": ...}``, AES-256-GCM
  under the home key, with the profile and provider as associated data, so a file copied onto
  another profile's name does not decrypt.
- ``config.json`` key ``credentials``: ``{"profiles": {name: {provider, auth_mode, audience,
  backend}}, "defaults": {provider: name}}``; never material. Other keys of ``config.json``
  are kept as they are.

With ``PROCTOR_SECRET_BACKEND=keyring`` the material goes to the OS credential store through
the ``keyring`` package instead (service ``proctor``, user ``<provider>:<profile>``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any, Literal

from proctor.contracts.values import dataclass
from proctor.errors import CredentialError, ParseError
from proctor.runtime.home.credentials.audience import normalize_audience
from proctor.runtime.home.credentials.model import Secret, check_identity
from proctor.runtime.home.files import home_dir as home_location
from proctor.runtime.home.files import write_private

__all__ = ["CredentialStore", "ProfileInfo", "home_dir", "validate_name"]

Backend = Literal["file", "keyring"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY_FILE = "credentials.key"
_KEYRING_SERVICE = "proctor"


def home_dir() -> Path:
    """The proctor home: ``PROCTOR_HOME`` or ``~/.proctor`` (see :func:`files.home_dir`)."""
    return home_location()[0]


def validate_name(kind: str, value: str) -> str:
    """Return ``value`` if it is a safe profile/provider name (letters, digits, ``._-``).

    Raises:
        CredentialError: (``credential_name_invalid``) it is not.
    """
    if not _NAME.match(value):
        raise CredentialError(
            f"{kind} name must be 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit",
            code="credential_name_invalid",
        )
    return value


@dataclass(frozen=True)
class ProfileInfo:
    """What is known about a stored profile, without its material."""

    name: str
    provider: str
    auth_mode: str | None
    audience: str | None
    backend: Backend
    default: bool
    packages: tuple[str, ...] = ()
    """The package identities a person bound this profile to (``proctor credential bind
    PROFILE IDENTITY``); a profile without an audience goes to these and no other."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as ``proctor credential list --json`` prints it."""
        return {
            "profile": self.name,
            "provider": self.provider,
            "auth_mode": self.auth_mode,
            "audience": self.audience,
            "backend": self.backend,
            "default": self.default,
            "packages": list(self.packages),
        }


def _packages(value: Any) -> tuple[str, ...]:
    """A profile's bound package identities as ``config.json`` keeps them (anything else:
    none, so a damaged list binds nothing)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return ()
    return tuple(value)


class CredentialStore:
    """Stored profiles under one home.

    Args:
        home: the home folder (default :func:`home_dir`).
        backend: ``"file"`` (default) or ``"keyring"``; default from ``PROCTOR_SECRET_BACKEND``.

    Raises:
        CredentialError: an unknown backend (``credential_backend_unknown``).
    """

    def __init__(self, home: Path | None = None, *, backend: str | None = None) -> None:
        self.home = home if home is not None else home_dir()
        chosen = backend or os.environ.get("PROCTOR_SECRET_BACKEND", "").strip().lower() or "file"
        if chosen not in ("file", "keyring"):
            raise CredentialError(
                f"unknown PROCTOR_SECRET_BACKEND {chosen!r}; expected 'file' or 'keyring'",
                code="credential_backend_unknown",
            )
        self.backend: Backend = "keyring" if chosen == "keyring" else "file"

    # ----------------------------------------------------------------- config.json

    def _config(self) -> dict[str, Any]:
        path = self.home / "config.json"
        if not path.is_file():
            return {}
        from proctor.contracts import json_strict

        try:
            document = json_strict.loads(path.read_bytes(), source="config.json")
        except ParseError as exc:
            raise CredentialError(
                f"the home's config.json is not valid JSON ({exc.code}: {exc})",
                code="credential_config_invalid",
            ) from None
        if not isinstance(document, dict):
            raise CredentialError(
                "the home's config.json is not an object", code="credential_config_invalid"
            )
        return document

    def _section(self, config: dict[str, Any]) -> dict[str, Any]:
        section = config.setdefault("credentials", {})
        if not isinstance(section, dict):
            raise CredentialError(
                "config.json: credentials must be an object", code="credential_config_invalid"
            )
        section.setdefault("profiles", {})
        section.setdefault("defaults", {})
        return section

    def _save_config(self, config: dict[str, Any]) -> None:
        self._ensure_home()
        text = json.dumps(config, indent=2, sort_keys=True) + "\n"
        write_private(self.home / "config.json", text.encode("utf-8"))

    def _ensure_home(self) -> None:
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)

    # ----------------------------------------------------------------- key and material

    def _key(self, *, create: bool) -> bytes:
        path = self.home / _KEY_FILE
        if not path.exists():
            if not create:
                raise CredentialError(
                    "the credential key file is missing; stored profiles cannot be read",
                    code="credential_key_missing",
                )
            self._ensure_home()
            write_private(path, secrets.token_bytes(32))
        info = path.stat()
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CredentialError(
                "the credential key file is readable by others; restrict it to mode 0600 "
                "(and consider the stored credentials exposed)",
                code="credential_key_permissions",
            )
        key = path.read_bytes()
        if len(key) != 32:
            raise CredentialError(
                "the credential key file is not a 32-byte key", code="credential_key_invalid"
            )
        return key

    def _material_path(self, profile: str) -> Path:
        return self.home / "credentials" / f"{profile}.json"

    @staticmethod
    def _aad(profile: str, provider: str) -> bytes:
        return f"proctor-credential:v1:{profile}:{provider}".encode()

    def _seal(self, profile: str, provider: str, value: str) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        sealed = AESGCM(self._key(create=True)).encrypt(
            nonce, value.encode("utf-8"), self._aad(profile, provider)
        )
        document = {
            "v": 1,
            "nonce": base64.b64encode(nonce).decode("ascii"),
            "ciphertext": base64.b64encode(sealed).decode("ascii"),
        }
        folder = self.home / "credentials"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(self._material_path(profile), json.dumps(document).encode("utf-8"))

    def _open(self, profile: str, provider: str) -> str:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        path = self._material_path(profile)
        from proctor.contracts import json_strict

        try:
            document = json_strict.loads(path.read_bytes(), source="material")
            nonce = base64.b64decode(document["nonce"], validate=True)
            sealed = base64.b64decode(document["ciphertext"], validate=True)
        except FileNotFoundError as exc:
            raise CredentialError(
                f"profile {profile!r} has no stored material", code="credential_material_missing"
            ) from exc
        except (ValueError, KeyError, TypeError, ParseError) as exc:
            raise CredentialError(
                f"profile {profile!r} material file is damaged", code="credential_decrypt_failed"
            ) from exc
        try:
            plain = AESGCM(self._key(create=False)).decrypt(
                nonce, sealed, self._aad(profile, provider)
            )
        except (InvalidTag, ValueError) as exc:
            raise CredentialError(
                f"profile {profile!r} could not be decrypted with this home's key",
                code="credential_decrypt_failed",
            ) from exc
        return plain.decode("utf-8")

    @staticmethod
    def _keyring() -> Any:
        try:
            import keyring
        except ImportError as exc:
            raise CredentialError(
                "PROCTOR_SECRET_BACKEND=keyring needs the keyring package: "
                "pip install 'proctor[keyring]'",
                code="credential_backend_unavailable",
            ) from exc
        return keyring

    # ----------------------------------------------------------------- public operations

    def set(
        self,
        provider: str,
        profile: str,
        value: str,
        *,
        auth_mode: str | None = None,
        audience: str | None = None,
    ) -> ProfileInfo:
        """Store ``value`` as ``profile`` for ``provider`` and make it the provider's default.

        Raises:
            CredentialError: an invalid name, an empty value, an audience that is not an
                https URL, a profile already stored for another provider, or a backend error.
        """
        validate_name("provider", provider)
        validate_name("profile", profile)
        if auth_mode is not None:
            validate_name("auth mode", auth_mode)
        if value == "":
            raise CredentialError("the credential value is empty", code="credential_empty")
        canonical = normalize_audience(audience) if audience is not None else None
        config = self._config()
        section = self._section(config)
        existing = section["profiles"].get(profile)
        if isinstance(existing, dict) and existing.get("provider") != provider:
            raise CredentialError(
                f"profile {profile!r} already belongs to provider {existing.get('provider')!r};"
                " remove it first or choose another profile name",
                code="credential_profile_conflict",
            )
        if self.backend == "keyring":
            self._keyring().set_password(_KEYRING_SERVICE, f"{provider}:{profile}", value)
        else:
            self._seal(profile, provider, value)
        section["profiles"][profile] = {
            "provider": provider,
            "auth_mode": auth_mode,
            "audience": canonical,
            "backend": self.backend,
            # new material under the same name keeps the packages a person bound it to
            "packages": list(existing.get("packages") or []) if isinstance(existing, dict) else [],
        }
        section["defaults"][provider] = profile
        self._save_config(config)
        info = self.get(profile)
        assert info is not None
        return info

    def list(self) -> list[ProfileInfo]:
        """Every stored profile (no material), sorted by provider then name."""
        section = self._section(self._config())
        out = []
        for name, meta in section["profiles"].items():
            if not isinstance(meta, dict):
                continue
            out.append(
                ProfileInfo(
                    name=name,
                    provider=str(meta.get("provider")),
                    auth_mode=meta.get("auth_mode"),
                    audience=meta.get("audience"),
                    backend="keyring" if meta.get("backend") == "keyring" else "file",
                    default=section["defaults"].get(meta.get("provider")) == name,
                    packages=_packages(meta.get("packages")),
                )
            )
        return sorted(out, key=lambda p: (p.provider, p.name))

    def bind_package(self, profile: str, identity: str) -> ProfileInfo:
        """Bind ``profile`` to one more package identity (see
        :mod:`proctor.runtime.home.credentials.bindings`); binding it again changes nothing.

        Raises:
            CredentialError: ``credential_profile_unknown``; ``credential_identity_invalid``.
        """
        check_identity(identity)
        config = self._config()
        section = self._section(config)
        meta = section["profiles"].get(profile)
        if not isinstance(meta, dict):
            raise CredentialError(
                f"no stored profile {profile!r}", code="credential_profile_unknown"
            )
        bound = list(_packages(meta.get("packages")))
        if identity not in bound:
            meta["packages"] = [*bound, identity]
            self._save_config(config)
        info = self.get(profile)
        assert info is not None
        return info

    def get(self, profile: str) -> ProfileInfo | None:
        """One profile's metadata, or ``None``."""
        return next((p for p in self.list() if p.name == profile), None)

    def default_for(self, provider: str) -> str | None:
        """The provider's default profile name, if one is set."""
        value = self._section(self._config())["defaults"].get(provider)
        return value if isinstance(value, str) else None

    def remove(self, profile: str) -> ProfileInfo:
        """Delete a profile, its material and its default role.

        Raises:
            CredentialError: (``credential_profile_unknown``) no such profile.
        """
        info = self.get(profile)
        if info is None:
            raise CredentialError(
                f"no stored profile {profile!r}", code="credential_profile_unknown"
            )
        if info.backend == "keyring":
            keyring = self._keyring()
            # Already gone from the OS store is fine: the metadata still goes.
            with contextlib.suppress(keyring.errors.PasswordDeleteError):
                keyring.delete_password(_KEYRING_SERVICE, f"{info.provider}:{profile}")
        else:
            self._material_path(profile).unlink(missing_ok=True)
        config = self._config()
        section = self._section(config)
        section["profiles"].pop(profile, None)
        if section["defaults"].get(info.provider) == profile:
            section["defaults"].pop(info.provider)
        self._save_config(config)
        return info

    def material(self, profile: str) -> Secret:
        """Decrypt a profile's material. Call once per command, at resolution.

        Raises:
            CredentialError: unknown profile, missing or mis-permissioned key, damaged file,
                wrong key (``credential_decrypt_failed``: fails closed), or a backend error.
        """
        info = self.get(profile)
        if info is None:
            raise CredentialError(
                f"no stored profile {profile!r}", code="credential_profile_unknown"
            )
        if info.backend == "keyring":
            value = self._keyring().get_password(_KEYRING_SERVICE, f"{info.provider}:{profile}")
            if value is None:
                raise CredentialError(
                    f"profile {profile!r} is missing from the OS credential store",
                    code="credential_material_missing",
                )
            return Secret(value)
        return Secret(self._open(profile, info.provider))

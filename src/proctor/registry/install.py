"""Installing a published version into a workspace, trusting registries, resolving refs.

``install`` verifies before it writes: the manifest's two signatures under a registry key the
user trusts (``<home>/registry_keys/``), that it names exactly the requested name and version
(an older version's manifest replayed under a newer one is refused), the ``--digest`` pin, the
workspace's required tier (``.proctor/registry.json``), and that the downloaded files parse
as a package whose content digest, name and version are the manifest's. Only then are the
files staged beside their destination, re-read and repackaged, and renamed into
``.proctor/added-skills/<publisher>/<name>/<version>/`` with the manifest as
``signature.json``. A version folder is written once: installing it again is ``unchanged``
while its files still verify, and refused otherwise.

:func:`resolve_installed` maps ``<publisher>/<name>[@version]`` to an installed folder whose
signature verifies against its exact bytes, never touching the network.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proctor.errors import StoreError, UsageError
from proctor.receipts.canonical import canonical, digest, is_digest
from proctor.receipts.signing import PublicKey
from proctor.registry.client import RegistryClient
from proctor.registry.manifest import (
    Manifest,
    RegistryRefused,
    check_name,
    tier_rank,
    verify_manifest,
)
from proctor.registry.package import (
    PACKAGE_FILE,
    SIGNATURE_FILE,
    Package,
    check_version,
    file_digests,
    parse_files,
    read_folder,
)
from proctor.runtime.home.files import home_dir, write_private

__all__ = [
    "ADDED_SKILLS",
    "Installed",
    "install",
    "parse_ref",
    "required_tier",
    "resolve_installed",
    "set_required_tier",
    "trust_registry_key",
    "trusted_registry_keys",
]

ADDED_SKILLS = Path(".proctor") / "added-skills"
_KEYS_DIR = "registry_keys"
_HEX_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Installed:
    """An installed, verified version; ``status`` is ``installed``, ``unchanged`` or
    ``verified`` (found by :func:`resolve_installed`)."""

    name: str
    version: str
    tier: str
    content_digest: str
    folder: Path
    status: str

    def to_dict(self, workspace_root: Path) -> dict[str, Any]:
        """JSON-ready, with the folder relative to the workspace."""
        return {
            "name": self.name,
            "version": self.version,
            "tier": self.tier,
            "content_digest": self.content_digest,
            "folder": self.folder.relative_to(workspace_root).as_posix(),
            "status": self.status,
        }


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``(name, version or None)`` of ``<publisher>/<name>[@version]``.

    Raises:
        UsageError: ``package_name_invalid`` or ``version_invalid``.
    """
    name, sep, version = ref.partition("@")
    check_name(name)
    return name, (check_version(version) if sep else None)


# -- trust ------------------------------------------------------------------------------------


def trust_registry_key(key: PublicKey, environ: Mapping[str, str]) -> Path:
    """Trust ``key`` as a registry's signing key (idempotent); the file written.

    Raises:
        ConfigError: the home cannot be found.
    """
    home, _ = home_dir(environ)
    folder = home / _KEYS_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{key.raw.hex()}.key"
    if not path.exists():
        write_private(path, key.raw.hex().encode("ascii") + b"\n")
    return path


def trusted_registry_keys(environ: Mapping[str, str]) -> list[PublicKey]:
    """The registry keys the user trusts (files under ``<home>/registry_keys/``).

    Raises:
        ConfigError: the home cannot be found.
    """
    home, _ = home_dir(environ)
    folder = home / _KEYS_DIR
    if not folder.is_dir():
        return []
    keys = []
    for path in sorted(folder.glob("*.key")):
        text = path.read_text("ascii", errors="replace").strip()
        if _HEX_KEY.fullmatch(text) and path.stem == text:
            keys.append(PublicKey.from_raw(bytes.fromhex(text)))
    return keys


def _settings_path(workspace_root: Path) -> Path:
    return workspace_root / ".proctor" / "registry.json"


def required_tier(workspace_root: Path) -> str:
    """The lowest tier this workspace installs (``community`` when none is set).

    Raises:
        UsageError: (code ``registry_settings_invalid``) ``.proctor/registry.json`` is not
            ``{"required_tier": TIER}``.
    """
    path = _settings_path(workspace_root)
    if not path.exists():
        return "community"
    try:
        doc = json.loads(path.read_bytes())
        tier = doc["required_tier"]
        tier_rank(tier)
        if set(doc) != {"required_tier"}:
            raise ValueError("extra fields")
    except (ValueError, KeyError, TypeError, RecursionError, UsageError) as exc:
        raise UsageError(
            '.proctor/registry.json must be {"required_tier": "community" | "verified" | '
            '"first_party"}',
            code="registry_settings_invalid",
        ) from exc
    return str(tier)


def set_required_tier(workspace_root: Path, tier: str) -> None:
    """Require ``tier`` or above for installs into this workspace.

    Raises:
        UsageError: (code ``tier_invalid``) not a tier.
    """
    tier_rank(tier)
    path = _settings_path(workspace_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, json.dumps({"required_tier": tier}).encode("utf-8") + b"\n")


# -- install ----------------------------------------------------------------------------------


def _verify_folder(folder: Path, trusted: list[PublicKey]) -> tuple[Manifest, Package]:
    try:
        data = (folder / SIGNATURE_FILE).read_bytes()
    except OSError as exc:
        raise RegistryRefused(
            f"{folder.name} has no readable {SIGNATURE_FILE}", code="package_unsigned"
        ) from exc
    manifest = verify_manifest(data, trusted)
    files = read_folder(folder, skip=frozenset({SIGNATURE_FILE}), every_file=True)
    # The bytes are compared before anything parses them: an edit is named as an edit.
    package = None
    if digest(file_digests(files)) == manifest.content_digest:
        package = parse_files(files, label=folder.name)
    if package is None or files.get(PACKAGE_FILE) != canonical(package.document()) + b"\n":
        raise RegistryRefused(
            f"the files of {manifest.name}@{manifest.version} are not the ones its registry "
            "signed (a file was changed, added or removed)",
            code="package_modified",
        )
    return manifest, package


def install(
    client: RegistryClient,
    ref: str,
    *,
    workspace_root: Path,
    trusted: list[PublicKey],
    pinned_digest: str | None = None,
) -> Installed:
    """Verify and install ``ref`` (see the module docstring); nothing is written on refusal.

    Raises:
        UsageError: a malformed ref or ``--digest``.
        RegistryRefused: ``registry_untrusted``, ``signature_invalid``, ``namespace_mismatch``,
            ``manifest_mismatch`` (the manifest names another name or version: a replay),
            ``digest_mismatch`` (the pin or the downloaded files), ``tier_too_low``,
            ``version_folder_differs``, or the registry's own refusal.
        StoreError: (code ``install_failed``) the disk refused the staged write.
    """
    name, version = parse_ref(ref)
    if pinned_digest is not None and not is_digest(pinned_digest):
        raise UsageError("--digest must be sha256: and 64 hex digits", code="digest_invalid")
    if not trusted:
        raise RegistryRefused(
            "no registry key is trusted here; add the registry's with `proctor registry trust`",
            code="registry_untrusted",
        )
    needed = required_tier(workspace_root)
    answer = client.version(name, version)
    manifest = verify_manifest(answer.get("manifest") or {}, trusted)
    if manifest.name != name or (version is not None and manifest.version != version):
        raise RegistryRefused(
            f"the registry answered {name}@{version or 'latest'} with the signed manifest of "
            f"{manifest.name}@{manifest.version}",
            code="manifest_mismatch",
        )
    if pinned_digest is not None and manifest.content_digest != pinned_digest:
        raise RegistryRefused(
            f"{name}@{manifest.version} has content digest {manifest.content_digest}, not the "
            "pinned one",
            code="digest_mismatch",
        )
    if tier_rank(manifest.tier) < tier_rank(needed):
        raise RegistryRefused(
            f"{name}@{manifest.version} is tier {manifest.tier}; this workspace requires "
            f"{needed} or above",
            code="tier_too_low",
        )
    package = parse_files(client.archive(name, manifest.version), label=name)
    if (package.content_digest, package.version, package.name) != (
        manifest.content_digest,
        manifest.version,
        name.split("/")[1],
    ):
        raise RegistryRefused(
            f"the files served for {name}@{manifest.version} are not the ones its manifest "
            f"signed (their digest is {package.content_digest})",
            code="digest_mismatch",
        )
    base = workspace_root / ADDED_SKILLS
    target = base / name / manifest.version
    if target.exists():
        held, _ = _verify_folder(target, trusted)
        if held.content_digest != manifest.content_digest:
            raise RegistryRefused(
                f"{target.relative_to(workspace_root)} holds other files; a version folder is "
                "written once",
                code="version_folder_differs",
            )
        return Installed(
            name, manifest.version, manifest.tier, manifest.content_digest, target, "unchanged"
        )
    try:
        _stage_and_rename(base, target, package, manifest, trusted)
    except OSError as exc:
        if target.is_dir():  # another install renamed the same version into place first
            held, _ = _verify_folder(target, trusted)
            if held.content_digest == manifest.content_digest:
                return Installed(
                    name,
                    manifest.version,
                    manifest.tier,
                    manifest.content_digest,
                    target,
                    "unchanged",
                )
        raise StoreError(
            f"{name}@{manifest.version} could not be written into .proctor/added-skills "
            f"({type(exc).__name__}); nothing was installed",
            code="install_failed",
        ) from exc
    return Installed(
        name, manifest.version, manifest.tier, manifest.content_digest, target, "installed"
    )


def _stage_and_rename(
    base: Path, target: Path, package: Package, manifest: Manifest, trusted: list[PublicKey]
) -> None:
    base.mkdir(parents=True, exist_ok=True)
    attributes = base / ".gitattributes"
    if not attributes.exists():
        # A CRLF checkout must never change the signed bytes.
        attributes.write_text("* -text\n", encoding="utf-8")
    stage = base / f".staging-{secrets.token_hex(6)}"
    try:
        for rel, data in package.files.items():
            path = stage / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (stage / PACKAGE_FILE).write_bytes(canonical(package.document()) + b"\n")
        (stage / SIGNATURE_FILE).write_bytes(canonical(dict(manifest.document)) + b"\n")
        held, _ = _verify_folder(stage, trusted)
        if held.content_digest != manifest.content_digest:  # pragma: no cover - re-read check
            raise RegistryRefused("the staged files did not repackage", code="digest_mismatch")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(stage, target)
    finally:
        if stage.exists():
            shutil.rmtree(stage)


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+-]", version))


def resolve_installed(ref: str, *, workspace_root: Path, trusted: list[PublicKey]) -> Installed:
    """The installed folder ``<publisher>/<name>[@version]`` names, verified against its exact
    bytes (newest installed version when none is named). Never uses the network.

    Raises:
        UsageError: a malformed ref.
        RegistryRefused: ``package_not_installed``, ``package_unsigned``,
            ``registry_untrusted``, ``signature_invalid``, ``manifest_mismatch`` (the
            signature names another package or version than its folder), ``package_modified``
            (the files differ from what was signed: an edited copy is not that package).
    """
    name, version = parse_ref(ref)
    folder = workspace_root / ADDED_SKILLS / name
    if version is None:
        held = (
            sorted((p.name for p in folder.iterdir() if p.is_dir()), key=_version_key)
            if folder.is_dir()
            else []
        )
        if not held:
            raise RegistryRefused(f"{name} is not installed here", code="package_not_installed")
        version = held[-1]
    target = folder / version
    if not target.is_dir():
        raise RegistryRefused(
            f"{name}@{version} is not installed here", code="package_not_installed"
        )
    manifest, _ = _verify_folder(target, trusted)
    if (manifest.name, manifest.version) != (name, version):
        raise RegistryRefused(
            f"the signature in {name}/{version} is for {manifest.name}@{manifest.version}",
            code="manifest_mismatch",
        )
    return Installed(name, version, manifest.tier, manifest.content_digest, target, "verified")

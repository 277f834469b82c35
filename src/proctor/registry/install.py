"""Installing a published version into a workspace, trusting registries, resolving refs.

``install`` verifies before it writes: the manifest's two signatures under a registry key the
user trusts (``<home>/registry_keys/``), that it names exactly the requested name and version
(an older version's manifest replayed under a newer one is refused), the ``--digest`` pin, the
workspace's required tier (``.proctor/registry.json``), and that the downloaded files parse
as a package whose content digest, name and version are the manifest's. Only then are the
files staged beside their destination, re-read and repackaged, and renamed into
``.proctor/added-skills/<publisher>/<name>/<version>/`` (a connector package, signed as one:
``.proctor/added-connectors/<publisher>/<name>/<version>/``) with the manifest as
``signature.json``. A version folder is written once: installing it again is ``unchanged``
while its files still verify, and refused otherwise.

:func:`resolve_installed` (in :mod:`proctor.runtime.packages.installed`, re-exported here) maps
``<publisher>/<name>[@version]`` to an installed folder whose signature verifies against its
exact bytes, never touching the network. The ``proctor/`` namespace is the core skills'
(``namespace_reserved``): nothing is installed under it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

from proctor.errors import StoreError, UsageError
from proctor.receipts.canonical import canonical, is_digest
from proctor.receipts.signing import PublicKey
from proctor.registry.client import RegistryClient
from proctor.runtime.home.files import write_private
from proctor.runtime.packages.installed import (
    ADDED_CONNECTORS,
    ADDED_SKILLS,
    REGISTRY_SETTINGS,
    Installed,
    check_tier,
    parse_ref,
    required_tier,
    resolve_installed,
    trust_registry_key,
    trusted_registry_keys,
    verify_folder,
)
from proctor.runtime.packages.manifest import Manifest, RegistryRefused, tier_rank, verify_manifest
from proctor.runtime.packages.package import PACKAGE_FILE, SIGNATURE_FILE, Package, parse_files

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

RESERVED_NAMESPACE = "proctor"
"""The core skills' namespace: never installed (``proctor/<name>`` always names a core skill)."""


def set_required_tier(workspace_root: Path, tier: str) -> None:
    """Require ``tier`` or above for installs into this workspace.

    Raises:
        UsageError: (code ``tier_invalid``) not a tier.
    """
    tier_rank(tier)
    path = workspace_root / REGISTRY_SETTINGS
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, json.dumps({"required_tier": tier}).encode("utf-8") + b"\n")


# -- install ----------------------------------------------------------------------------------


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
        RegistryRefused: ``namespace_reserved`` (``proctor/...``), ``registry_untrusted``,
            ``signature_invalid``, ``namespace_mismatch``,
            ``manifest_mismatch`` (the manifest names another name or version: a replay),
            ``digest_mismatch`` (the pin or the downloaded files), ``tier_too_low``,
            ``version_folder_differs``, or the registry's own refusal.
        StoreError: (code ``install_failed``) the disk refused the staged write.
    """
    name, version = parse_ref(ref)
    if name.split("/")[0] == RESERVED_NAMESPACE:
        raise RegistryRefused(
            f"{name}: the proctor/ namespace names the core skills shipped with proctor; "
            "nothing is installed under it",
            code="namespace_reserved",
        )
    if pinned_digest is not None and not is_digest(pinned_digest):
        raise UsageError("--digest must be sha256: and 64 hex digits", code="digest_invalid")
    if not trusted:
        raise RegistryRefused(
            "no registry key is trusted here; add the registry's with `proctor registry trust`",
            code="registry_untrusted",
        )
    required_tier(workspace_root)  # a malformed setting is refused before anything is fetched
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
    check_tier(name, manifest.version, manifest.tier, workspace_root, at="install")
    package = parse_files(client.archive(name, manifest.version), label=name)
    if (package.content_digest, package.version, package.name, package.kind) != (
        manifest.content_digest,
        manifest.version,
        name.split("/")[1],
        manifest.kind,
    ):
        raise RegistryRefused(
            f"the files served for {name}@{manifest.version} are not the ones its manifest "
            f"signed (their digest is {package.content_digest})",
            code="digest_mismatch",
        )
    base = workspace_root / (ADDED_CONNECTORS if manifest.kind == "connector" else ADDED_SKILLS)
    target = base / name / manifest.version
    if target.exists():
        held, _ = verify_folder(target, trusted)
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
            held, _ = verify_folder(target, trusted)
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
            f"{name}@{manifest.version} could not be written into {base.name} "
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
        held, _ = verify_folder(stage, trusted)
        if held.content_digest != manifest.content_digest:  # pragma: no cover - re-read check
            raise RegistryRefused("the staged files did not repackage", code="digest_mismatch")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(stage, target)
    finally:
        if stage.exists():
            shutil.rmtree(stage)

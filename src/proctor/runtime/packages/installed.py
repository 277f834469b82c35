"""Installed registry packages: trusted registry keys, folder verification, resolving refs.

A package installed from a registry lives in
``.proctor/added-skills/<publisher>/<name>/<version>/`` with the registry's signed manifest as
``signature.json``. :func:`verify_folder` re-reads every byte of such a folder and refuses it
unless the manifest verifies under a registry key the user trusts and the files are exactly
the ones it signed; :func:`resolve_installed` maps ``<publisher>/<name>[@version]`` to such a
folder, never touching the network, and refuses it when its tier is below the workspace's
required tier (:func:`required_tier`, ``.proctor/registry.json``), checked at every load and
not only at install: a package installed before the requirement was raised, or committed into
``.proctor/added-skills`` by anyone, does not run under it. The registry client
(``proctor.registry.install``) writes these folders; the run engine reads them through
:mod:`.resolve`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.contracts import json_strict
from proctor.contracts.values import dataclass
from proctor.errors import ParseError, UsageError
from proctor.receipts.canonical import canonical, digest
from proctor.receipts.signing import PublicKey
from proctor.runtime.home.files import home_dir, write_private
from proctor.runtime.packages.manifest import (
    Manifest,
    RegistryRefused,
    check_name,
    tier_rank,
    verify_manifest,
)
from proctor.runtime.packages.package import (
    PACKAGE_FILE,
    SIGNATURE_FILE,
    Package,
    check_version,
    file_digests,
    parse_files,
    read_folder,
)

__all__ = [
    "ADDED_CONNECTORS",
    "ADDED_SKILLS",
    "REGISTRY_SETTINGS",
    "Installed",
    "check_tier",
    "installed_refs",
    "parse_ref",
    "required_tier",
    "resolve_installed",
    "trust_registry_key",
    "trusted_registry_keys",
    "verify_folder",
]

ADDED_SKILLS = Path(".proctor") / "added-skills"
ADDED_CONNECTORS = Path(".proctor") / "added-connectors"
"""Where installed connector packages live: ``<publisher>/<name>/<version>/``."""
REGISTRY_SETTINGS = Path(".proctor") / "registry.json"


def required_tier(workspace_root: Path) -> str:
    """The lowest tier this workspace installs and runs (``community`` when none is set).

    Raises:
        UsageError: (code ``registry_settings_invalid``) ``.proctor/registry.json`` is not
            ``{"required_tier": TIER}``.
    """
    path = workspace_root / REGISTRY_SETTINGS
    if not path.exists():
        return "community"
    try:
        # strict: a setting that names its tier twice is refused, never read one way
        doc = json_strict.loads(path.read_bytes(), source=str(REGISTRY_SETTINGS))
        tier = doc["required_tier"]
        tier_rank(tier)
        if set(doc) != {"required_tier"}:
            raise ValueError("extra fields")
    except (ParseError, ValueError, KeyError, TypeError, UsageError, OSError) as exc:
        raise UsageError(
            '.proctor/registry.json must be {"required_tier": "community" | "verified" | '
            '"first_party"}',
            code="registry_settings_invalid",
        ) from exc
    return str(tier)


def check_tier(name: str, version: str, tier: str, workspace_root: Path, *, at: str) -> None:
    """Refuse a package whose ``tier`` is below the workspace's required tier; ``at`` says
    what was being done (``install`` or ``load``), so the message says how to go on.

    Raises:
        RegistryRefused: ``tier_too_low``.
        UsageError: ``registry_settings_invalid`` (see :func:`required_tier`).
    """
    needed = required_tier(workspace_root)
    if tier_rank(tier) >= tier_rank(needed):
        return
    message = f"{name}@{version} is tier {tier}; this workspace requires {needed} or above"
    if at == "load":
        message += (
            f" (it was installed before, or put in {ADDED_SKILLS.as_posix()} by hand): remove "
            f"{(ADDED_SKILLS / name / version).as_posix()} or lower the requirement with "
            "`proctor registry require-tier`"
        )
    raise RegistryRefused(message, code="tier_too_low")


def installed_refs(workspace_root: Path, kind: str = "skill") -> list[str]:
    """Every ``<publisher>/<name>@<version>`` folder under ``.proctor/added-skills`` (or
    ``added-connectors`` for ``kind`` connector), sorted (what is there, verified or not;
    links are not followed)."""
    base = workspace_root / (ADDED_CONNECTORS if kind == "connector" else ADDED_SKILLS)
    refs: list[str] = []
    for publisher in _folders(base):
        for name in _folders(base / publisher):
            refs += [f"{publisher}/{name}@{v}" for v in _folders(base / publisher / name)]
    return refs


def _folders(path: Path) -> list[str]:
    try:
        return sorted(p.name for p in path.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


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
    manifest_digest: str = ""
    """The digest of the canonical signed manifest (``signature.json``); empty when unknown."""

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


def verify_folder(folder: Path, trusted: list[PublicKey]) -> tuple[Manifest, Package]:
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
    if package.kind != manifest.kind:
        raise RegistryRefused(
            f"{manifest.name}@{manifest.version} was signed as a {manifest.kind}, and its files "
            f"are a {package.kind}",
            code="manifest_mismatch",
        )
    return manifest, package


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.+-]", version))


def _newest_allowed(
    name: str, folder: Path, workspace_root: Path, trusted: list[PublicKey], kind: str
) -> Installed:
    """The newest installed version of ``name`` that verifies and that the workspace's
    required tier allows; when none does, the newest one's refusal."""
    held = sorted(_folders(folder), key=_version_key, reverse=True)
    if not held:
        raise RegistryRefused(f"{name} is not installed here", code="package_not_installed")
    first: RegistryRefused | None = None
    for version in held:
        try:
            return resolve_installed(
                f"{name}@{version}", workspace_root=workspace_root, trusted=trusted, kind=kind
            )
        except RegistryRefused as exc:
            if exc.code != "tier_too_low":
                raise  # an altered or unsigned copy is named, never passed over
            first = first or exc
    assert first is not None
    raise first


def resolve_installed(
    ref: str, *, workspace_root: Path, trusted: list[PublicKey], kind: str = "skill"
) -> Installed:
    """The installed folder ``<publisher>/<name>[@version]`` names, verified against its exact
    bytes. Without a version, the newest installed version the workspace's required tier
    allows (an older one that qualifies is taken over a newer one below the tier; a newer one
    that fails verification is refused, not passed over). Never uses the network. ``kind``
    ``connector`` looks in ``.proctor/added-connectors`` for a package signed as a connector.

    Raises:
        UsageError: a malformed ref.
        RegistryRefused: ``package_not_installed``, ``package_unsigned``,
            ``registry_untrusted``, ``signature_invalid``, ``manifest_mismatch`` (the
            signature names another package or version than its folder), ``package_modified``
            (the files differ from what was signed: an edited copy is not that package),
            ``tier_too_low`` (below the workspace's required tier, see :func:`check_tier`).
    """
    name, version = parse_ref(ref)
    folder = workspace_root / (ADDED_CONNECTORS if kind == "connector" else ADDED_SKILLS) / name
    if version is None:
        return _newest_allowed(name, folder, workspace_root, trusted, kind)
    target = folder / version
    if not target.is_dir():
        raise RegistryRefused(
            f"{name}@{version} is not installed here", code="package_not_installed"
        )
    manifest, _ = verify_folder(target, trusted)
    if (manifest.name, manifest.version, manifest.kind) != (name, version, kind):
        raise RegistryRefused(
            f"the signature in {name}/{version} is for the {manifest.kind} "
            f"{manifest.name}@{manifest.version}",
            code="manifest_mismatch",
        )
    check_tier(name, version, manifest.tier, workspace_root, at="load")
    return Installed(
        name,
        version,
        manifest.tier,
        manifest.content_digest,
        target,
        "verified",
        digest(dict(manifest.document)),
    )

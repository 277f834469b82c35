"""Any skill reference to a loaded package: core skills, installed packages, local folders.

A reference is ``WHAT[#METHOD]``, where ``WHAT`` is read in this order:

- ``proctor/<name>``: a core skill (:mod:`.core`), always; a folder of that name in the
  workspace, in its ``skills/`` catalog or under ``.proctor/added-skills/proctor/`` is never
  what runs (write ``./proctor/<name>`` to mean a local folder);
- ``<publisher>/<name>@<version>``, or ``registry:<publisher>/<name>[@<version>]``: a package
  installed from a registry (:mod:`.installed`), verified against its signature and its exact
  bytes on every load; an edited copy is refused ``package_modified`` and nothing runs. Without
  a version, the newest installed version the workspace's required tier allows. Never the
  network;
- ``<publisher>/<name>`` without a version: the installed package, when no local folder of
  that path answers it (``./<publisher>/<name>`` or ``skills/<publisher>/<name>``: the
  workspace's own copy wins, as a folder the workspace holds is its own);
- anything else: a local folder (:func:`proctor.runtime.skills.load_skill`): a path, or a
  name in ``skills/``. A local folder binds no registry name, even when it is an installed
  package's folder.

A loaded core or installed package carries its ``origin`` (``source``, ``ref``, ``name``,
``version``, ``content_digest``, ``manifest_digest``, ``tier``): the run records it, and its
receipt binds the name only while the package still verifies when the run seals.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.values import replace
from proctor.errors import UsageError
from proctor.parser.skill import parse_ref
from proctor.runtime.skills import LoadedSkill, load_skill

__all__ = ["is_named_ref", "reload_skill", "resolve_skill", "verify_named_refs", "verify_origin"]

CORE_NAMESPACE = "proctor"
REGISTRY_PREFIX = "registry:"
_INSTALLED = re.compile(r"[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9._-]*@[^#/\s]+")
_BARE_NAME = re.compile(r"[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9._-]*")


def _kind(what: str) -> str:
    if what.startswith(CORE_NAMESPACE + "/"):
        return "core"
    if what.startswith(REGISTRY_PREFIX) or _INSTALLED.fullmatch(what):
        return "registry"
    return "path"


def _installed_unless_local(what: str, cwd: Path, workspace_root: Path) -> bool:
    """A bare ``<publisher>/<name>`` names the installed package when no local folder answers
    it and the package is installed (otherwise it is a path, as before)."""
    from proctor.runtime.packages.installed import ADDED_SKILLS

    if not _BARE_NAME.fullmatch(what):
        return False
    local = (cwd / what, workspace_root / "skills" / what)
    if any(os.path.lexists(folder) for folder in local):
        return False
    return (workspace_root / ADDED_SKILLS / what).is_dir()


def is_named_ref(ref: str) -> bool:
    """Whether ``ref`` names a core skill or an installed package by its name (not a local
    folder; a bare ``<publisher>/<name>`` counts as a path here)."""
    return _kind(ref.partition("#")[0]) != "path"


def resolve_skill(
    ref: str,
    *,
    cwd: Path,
    workspace_root: Path,
    environ: Mapping[str, str] | None = None,
) -> LoadedSkill:
    """Locate, verify, read and parse the package ``ref`` names (see the module docstring).

    ``environ`` says where the home is (core skills, trusted registry keys).

    Raises:
        UsageError: ``ref_invalid``, ``skill_not_found``, ``not_a_package``,
            ``core_skill_unknown``, ``package_name_invalid``, ``version_invalid``.
        RegistryRefused: ``package_not_installed``, ``package_unsigned``,
            ``registry_untrusted``, ``signature_invalid``, ``manifest_mismatch``,
            ``package_modified`` (an edited installed package or core skill: nothing runs).
        ParseError: SKILL.md or run.yaml is invalid.
    """
    what, method = parse_ref(ref)
    kind = _kind(what)
    if kind == "path" and _installed_unless_local(what, cwd, workspace_root):
        kind = "registry"
    if kind == "path":
        return load_skill(ref, cwd=cwd, workspace_root=workspace_root)
    # the verifiers are imported here: loading a local folder never pays for them
    if kind == "core":
        from proctor.runtime.packages.core import core_skill

        short = what.removeprefix(CORE_NAMESPACE + "/")
        core = core_skill(short, environ)
        folder = core.folder
        origin: dict[str, Any] = {
            "source": "core",
            "ref": core.name,
            "name": core.name,
            "version": core.version,
            "content_digest": core.content_digest,
            "manifest_digest": None,
            "tier": "first_party",
        }
    else:
        from proctor.runtime.packages.installed import resolve_installed

        installed = resolve_installed(
            what.removeprefix(REGISTRY_PREFIX),
            workspace_root=workspace_root,
            trusted=_trusted(environ),
        )
        folder = installed.folder
        origin = {
            "source": "registry",
            "ref": f"{installed.name}@{installed.version}",
            "name": installed.name,
            "version": installed.version,
            "content_digest": installed.content_digest,
            "manifest_digest": installed.manifest_digest,
            "tier": installed.tier,
        }
    loaded = load_skill(str(folder), cwd=folder, workspace_root=workspace_root)
    name = str(origin["name"])
    identity = (
        f"core:{name.removeprefix(CORE_NAMESPACE + '/')}"
        if kind == "core"
        else (f"registry:{name}")
    )
    if kind == "core" and loaded.package_digest != origin["content_digest"]:
        # the same digest over the same folder: a copy changed between its check and its read
        from proctor.runtime.packages.manifest import RegistryRefused

        raise RegistryRefused(f"{origin['ref']} changed while it was read", code="package_modified")
    return replace(
        loaded, label=str(origin["ref"]), method=method, origin=origin, identity=identity
    )


def _trusted(environ: Mapping[str, str] | None) -> list[Any]:
    from proctor.runtime.packages.installed import trusted_registry_keys

    return trusted_registry_keys(os.environ if environ is None else environ)


def verify_origin(
    origin: Mapping[str, Any], *, workspace_root: Path, environ: Mapping[str, str] | None = None
) -> LoadedSkill:
    """Load the package a run's recorded ``origin`` names again, verifying it as on its first
    load, and refuse it unless it is the same version with the same content.

    Raises:
        RegistryRefused / UsageError: as :func:`resolve_skill`; ``package_modified`` when the
            package now verifies with other content than the run recorded.
    """
    ref = origin.get("ref")
    if not isinstance(ref, str) or not is_named_ref(ref):
        raise UsageError("the run's record names no package origin", code="origin_invalid")
    skill = resolve_skill(ref, cwd=workspace_root, workspace_root=workspace_root, environ=environ)
    held = skill.origin or {}
    if held.get("content_digest") != origin.get("content_digest"):
        from proctor.runtime.packages.manifest import RegistryRefused

        raise RegistryRefused(
            f"{ref} now has other content than when the run started", code="package_modified"
        )
    return skill


def reload_skill(
    data: Mapping[str, Any], *, workspace_root: Path, environ: Mapping[str, str] | None = None
) -> LoadedSkill:
    """The package a run's record names (``origin``, else ``package_folder``), for a resume.

    Raises:
        UsageError: the record names no package.
        ProctorError: as :func:`resolve_skill` and :func:`verify_origin`.
    """
    origin = data.get("origin")
    if isinstance(origin, Mapping):
        return verify_origin(origin, workspace_root=workspace_root, environ=environ)
    folder = data.get("package_folder")
    if not isinstance(folder, str):
        raise UsageError("the run's record names no package", code="origin_invalid")
    recorded = data.get("package_digest")
    return load_skill(
        folder,
        cwd=workspace_root,
        workspace_root=workspace_root,
        recorded_digest=recorded if isinstance(recorded, str) else None,
    )


def verify_named_refs(
    method: Any, *, base: Path, workspace_root: Path, environ: Mapping[str, str] | None = None
) -> None:
    """Verify every core skill and installed package ``method``'s steps name (``skill:``,
    ``calls.skills``, ``context.skills``) before its run starts, so a run whose package would
    be refused later is refused now, with no run and no step; each is verified again when used.

    Raises:
        RegistryRefused / UsageError / ParseError: as :func:`resolve_skill`.
    """
    refs: list[str] = []
    for step in method.steps:
        named = getattr(step, "skill", None)
        if isinstance(named, str):
            refs.append(named)
        agent = getattr(step, "agent", None)
        if agent is not None:
            refs += agent.calls.skills
            refs += agent.context.skills if agent.context is not None else []
    for ref in dict.fromkeys(refs):
        if is_named_ref(ref):
            resolve_skill(ref, cwd=base, workspace_root=workspace_root, environ=environ)

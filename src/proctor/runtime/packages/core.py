"""The core skills: shipped in the wheel, materialised into the home, verified on every use.

The wheel carries each core skill under ``proctor/resources/core_skills/<name>/``. A run cannot
point a package at a wheel's folder (it may be read-only, zipped or shared), so on first use the
skill's files are copied into ``<home>/core-skills/<name>/<proctor version>-<digest prefix>/``:
staged under a fresh name, then renamed into place whole, so a reader sees all of it or none.
The folder name carries the content digest, so an upgrade of proctor (other bytes) lands in a
new folder and never reads the old one.

Every use re-reads both the shipped files and the materialised copy and compares their package
digests; a copy that differs (a file edited, added or removed in the home) is refused
``package_modified`` and never runs. Nothing in a workspace can stand in for a core skill:
``proctor/<name>`` is resolved here and only here (:mod:`.resolve`).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path

from proctor._version import __version__
from proctor.contracts.values import dataclass
from proctor.errors import StoreError, UsageError
from proctor.runtime.home.files import home_dir
from proctor.runtime.packages.manifest import RegistryRefused
from proctor.runtime.skills import read_package

__all__ = ["CORE_NAMESPACE", "CoreSkill", "core_skill", "core_skill_names", "shipped_folder"]

CORE_NAMESPACE = "proctor"  # the same value as resolve.CORE_NAMESPACE, which reads refs
_HOME_FOLDER = "core-skills"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


@dataclass(frozen=True, slots=True)
class CoreSkill:
    """A core skill's verified materialised copy: ``name`` is ``proctor/<name>``."""

    name: str
    version: str
    content_digest: str
    folder: Path


def _shipped_root() -> Path:
    from importlib.resources import files

    return Path(str(files("proctor") / "resources" / "core_skills"))


def core_skill_names() -> list[str]:
    """The short names of the core skills this proctor ships (``receipt-audit``, ...)."""
    root = _shipped_root()
    if not root.is_dir():
        return []
    return sorted(
        p.name for p in root.iterdir() if _NAME.fullmatch(p.name) and (p / "SKILL.md").is_file()
    )


def shipped_folder(short: str) -> Path:
    """The wheel's folder of core skill ``short`` (read it, never run it in place).

    Raises:
        UsageError: (code ``core_skill_unknown``) this proctor ships no such core skill.
    """
    if not _NAME.fullmatch(short) or short not in core_skill_names():
        known = ", ".join(f"{CORE_NAMESPACE}/{n}" for n in core_skill_names())
        raise UsageError(
            f"{CORE_NAMESPACE}/{short} is not a core skill of proctor {__version__} "
            f"(core skills: {known or 'none'})",
            code="core_skill_unknown",
        )
    return _shipped_root() / short


def core_skill(short: str, environ: Mapping[str, str] | None = None) -> CoreSkill:
    """Core skill ``short``, materialised into the home on first use and verified on each.

    Raises:
        UsageError: ``core_skill_unknown``.
        ConfigError: ``home_missing``.
        RegistryRefused: (code ``package_modified``) the home's copy differs from what this
            proctor ships; it is not run (remove the folder named to have it written again).
        StoreError: (code ``core_skill_unwritable``) the home refused the copy.
    """
    source = shipped_folder(short)
    name = f"{CORE_NAMESPACE}/{short}"
    _, shipped = read_package(source, name)
    home, shown = home_dir(environ)
    base = home / _HOME_FOLDER / short
    target = base / f"{__version__}-{shipped.removeprefix('sha256:')[:16]}"
    if not target.is_dir():
        try:
            _materialise(source, base, target)
        except OSError as exc:
            raise StoreError(
                f"{name} could not be written into {shown}/{_HOME_FOLDER} "
                f"({type(exc).__name__}); nothing ran",
                code="core_skill_unwritable",
            ) from exc
    _, held = read_package(target, name)
    if held != shipped:
        raise RegistryRefused(
            f"the copy of {name} in {shown}/{_HOME_FOLDER}/{short}/{target.name} is not what "
            f"proctor {__version__} ships (a file was changed, added or removed); it was not "
            "run. Remove that folder to have it written again",
            code="package_modified",
        )
    return CoreSkill(name, __version__, shipped, target)


def _materialise(source: Path, base: Path, target: Path) -> None:
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    stage = base / f".staging-{secrets.token_hex(6)}"
    try:
        shutil.copytree(
            source,
            stage,
            symlinks=False,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        for dirpath, _dirs, filenames in os.walk(stage):
            for filename in filenames:  # read-only: an edit is a deliberate act, and is caught
                os.chmod(Path(dirpath) / filename, stat.S_IRUSR | stat.S_IRGRP)
        try:
            os.rename(stage, target)
        except OSError:
            if not target.is_dir():  # not another process winning the same rename
                raise
    finally:
        if stage.exists():
            shutil.rmtree(stage)  # read-only files go: removal needs the folder's permission

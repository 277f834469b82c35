"""Packages as published: the exact files, their digests, and the package document.

A package is a skill (``SKILL.md`` at its root) or a connector published on its own
(``connector.yaml`` at its root; its :attr:`Package.kind` is ``connector``): both are
packaged, signed, published and installed alike. A package is every regular file under the
folder (names starting with ``.`` such as
``.env``, ``.git`` and ``.proctor``, and ``__pycache__`` and ``node_modules`` left out;
connectors the skill keeps under ``connectors/`` travel with it), plus
``proctor.package.json`` at its root, which marks the root and lists each file's digest.

The **content digest** is :func:`proctor.receipts.canonical.digest` of the mapping
``relative path -> sha256:<hex of the file's bytes>`` over every file but
``proctor.package.json`` itself, so it depends on names and bytes only: the same folder gives
the same digest on any machine. The version is the one SKILL.md's frontmatter names
(``version:``), else (and always for a connector) ``sha-`` and the first 12 hex digits of the
content digest.

:func:`parse_files` is the one parser of a package's file set (from a folder, an upload or a
download): it refuses a name that could leave the package folder, a reserved name, and a
package past the size limits.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import UsageError
from proctor.parser.skill import build_package
from proctor.receipts.canonical import digest

__all__ = [
    "CONNECTOR_FILE",
    "MAX_FILES",
    "MAX_PACKAGE_BYTES",
    "MAX_TRANSFER_BYTES",
    "PACKAGE_FILE",
    "SIGNATURE_FILE",
    "Package",
    "check_version",
    "file_digests",
    "package_folder",
    "parse_files",
    "read_folder",
]

PACKAGE_FILE = "proctor.package.json"
CONNECTOR_FILE = "connector.yaml"
SIGNATURE_FILE = "signature.json"
MAX_FILES = 2_000
MAX_PACKAGE_BYTES = 16 * 1024 * 1024
# A package sent over HTTP: base64 grows the files by a third; room for names and a statement.
MAX_TRANSFER_BYTES = MAX_PACKAGE_BYTES * 4 // 3 + 1024 * 1024
_SKIP_DIRS = frozenset({"__pycache__", "node_modules"})
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
_MAX_PATH = 255


@dataclass(frozen=True, slots=True)
class Package:
    """A package's files, checked: names are safe relative POSIX paths, sizes in bounds.

    ``files`` excludes ``proctor.package.json`` (which :meth:`document` rebuilds);
    ``digests`` maps each name to ``sha256:<hex>`` of its bytes.
    """

    name: str
    description: str
    version: str
    files: Mapping[str, bytes]
    digests: Mapping[str, str]
    content_digest: str
    kind: str = "skill"
    """``skill`` or ``connector``."""

    @property
    def size(self) -> int:
        """Total bytes of the package's files."""
        return sum(len(data) for data in self.files.values())

    def document(self) -> dict[str, Any]:
        """The ``proctor.package.v1`` document written as ``proctor.package.json`` (``kind``
        only for a connector, so a skill's document is as it always was)."""
        kind = {} if self.kind == "skill" else {"kind": self.kind}
        return {
            "schema": "proctor.package.v1",
            **kind,
            "name": self.name,
            "description": self.description,
            "version": self.version,
            "content_digest": self.content_digest,
            "files": dict(sorted(self.digests.items())),
        }


def check_version(version: object) -> str:
    """``version`` when it is a valid package version (letters, digits, ``. _ + -``, 1-64).

    Raises:
        UsageError: (code ``version_invalid``) anything else.
    """
    if not isinstance(version, str) or _VERSION.fullmatch(version) is None:
        raise UsageError(
            f"package version {str(version)[:80]!r} is not 1-64 letters, digits, '.', '_', "
            "'+' or '-' starting with a letter or digit",
            code="version_invalid",
        )
    return version


def _check_name(rel: object) -> str:
    if not isinstance(rel, str) or not rel or len(rel) > _MAX_PATH:
        raise UsageError(
            "a package file name must be a non-empty relative path of at most 255 characters",
            code="package_path_invalid",
        )
    shown = repr(rel[:80])
    if (
        rel.startswith("/")
        or "\\" in rel
        or any(unicodedata.category(ch).startswith("C") for ch in rel)
        or unicodedata.normalize("NFC", rel) != rel
    ):
        raise UsageError(
            f"package file name {shown} is absolute, holds a backslash or control character, "
            "or is not NFC-normalised",
            code="package_path_invalid",
        )
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise UsageError(
            f"package file name {shown} has an empty, '.' or '..' part (it could leave the "
            "package folder)",
            code="package_path_invalid",
        )
    if rel == SIGNATURE_FILE:
        raise UsageError(
            f"{SIGNATURE_FILE} is reserved at a package's root for the registry's signed manifest",
            code="package_path_invalid",
        )
    return rel


def file_digests(files: Mapping[str, bytes]) -> dict[str, str]:
    """``{name: sha256:<hex of its bytes>}`` for every file but ``proctor.package.json``; the
    content digest is :func:`proctor.receipts.canonical.digest` of this mapping."""
    return {
        rel: "sha256:" + hashlib.sha256(data).hexdigest()
        for rel, data in files.items()
        if rel != PACKAGE_FILE
    }


def parse_files(files: Mapping[str, bytes], *, label: str = "package") -> Package:
    """Check a package's file set and compute its digests, name and version.

    ``proctor.package.json`` in ``files`` is ignored (it is derived). Names are checked
    before anything else, so a refused set is never partly used.

    Raises:
        UsageError: ``package_path_invalid`` (a name that is absolute, has ``..``/``.``/empty
            parts, a backslash or control character, clashes with another as file and folder,
            or is reserved), ``package_too_large`` (over 2,000 files or 16 MiB),
            ``not_a_package`` (neither a UTF-8 SKILL.md nor a connector.yaml at the root),
            ``version_invalid``.
        ParseError: SKILL.md, run.yaml or connector.yaml does not parse.
    """
    kept: dict[str, bytes] = {}
    total = 0
    for rel, data in files.items():
        _check_name(rel)
        if not isinstance(data, bytes):
            raise UsageError(f"package file {rel!r} is not bytes", code="package_path_invalid")
        if rel == PACKAGE_FILE:
            continue
        total += len(data)
        kept[rel] = data
        if len(kept) > MAX_FILES or total > MAX_PACKAGE_BYTES:
            raise UsageError(
                f"{label} is too large (over {MAX_FILES} files or "
                f"{MAX_PACKAGE_BYTES // (1024 * 1024)} MiB)",
                code="package_too_large",
            )
    folders = {"/".join(rel.split("/")[:i]) for rel in kept for i in range(1, rel.count("/") + 1)}
    clash = sorted(folders & kept.keys())
    if clash:
        raise UsageError(
            f"package file name {clash[0][:80]!r} is both a file and a folder",
            code="package_path_invalid",
        )
    if "SKILL.md" not in kept and CONNECTOR_FILE in kept:
        return _connector_package(kept, label)
    texts: dict[str, str] = {rel: "" for rel in kept}
    for rel in ("SKILL.md", "run.yaml"):
        if rel in kept:
            try:
                texts[rel] = kept[rel].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UsageError(f"{label}/{rel} is not UTF-8 text", code="not_a_package") from exc
    skill = build_package(label, texts)
    digests = file_digests(kept)
    content_digest = digest(digests)
    named = skill.frontmatter.get("version")
    version = check_version(str(named)) if named is not None else "sha-" + content_digest[7:19]
    return Package(
        name=skill.name,
        description=skill.description,
        version=version,
        files=dict(sorted(kept.items())),
        digests=dict(sorted(digests.items())),
        content_digest=content_digest,
    )


def _connector_package(kept: dict[str, bytes], label: str) -> Package:
    from proctor.parser.connector import parse_connector

    try:
        text = kept[CONNECTOR_FILE].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{label}/{CONNECTOR_FILE} is not UTF-8 text", code="not_a_package"
        ) from exc
    connector = parse_connector(text, f"{label}/{CONNECTOR_FILE}")
    digests = file_digests(kept)
    content_digest = digest(digests)
    return Package(
        name=connector.name,
        description=connector.description or "",
        version="sha-" + content_digest[7:19],
        files=dict(sorted(kept.items())),
        digests=dict(sorted(digests.items())),
        content_digest=content_digest,
        kind="connector",
    )


def package_folder(
    folder: Path, *, skip: frozenset[str] = frozenset(), every_file: bool = False
) -> Package:
    """Read and check the package rooted at ``folder`` (see :func:`read_folder`).

    Raises:
        UsageError / ParseError: from :func:`read_folder` and :func:`parse_files`.
    """
    return parse_files(read_folder(folder, skip=skip, every_file=every_file), label=folder.name)


def read_folder(
    folder: Path, *, skip: frozenset[str] = frozenset(), every_file: bool = False
) -> dict[str, bytes]:
    """The files of the package rooted at ``folder``, by relative name (not yet checked).

    Names starting with ``.`` (``.env``, ``.git/``) are left out of what is published, so a
    local secret file never travels; ``every_file`` reads them too, which verifying an
    installed copy needs (an added ``.hidden`` file is then a change, not invisible).
    ``skip`` names extra root-level files to leave out (an installed package's
    ``signature.json``).

    Raises:
        UsageError: ``not_a_package`` (no folder), ``package_symlink`` (a symbolic link in the
            package: its target is not part of it), ``package_too_large``.
    """
    if not folder.is_dir():
        raise UsageError(f"{folder.name or folder} is not a folder", code="not_a_package")
    files: dict[str, bytes] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        for name in dirnames:
            if (here / name).is_symlink():
                raise UsageError(
                    f"{(here / name).relative_to(folder).as_posix()} is a symbolic link; a "
                    "package holds only regular files",
                    code="package_symlink",
                )
        if not every_file:
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS]
        dirnames.sort()
        for name in sorted(filenames):
            full = here / name
            rel = full.relative_to(folder).as_posix()
            if rel in skip or (name.startswith(".") and not every_file):
                continue
            if full.is_symlink():
                raise UsageError(
                    f"{rel} is a symbolic link; a package holds only regular files",
                    code="package_symlink",
                )
            if not full.is_file():
                continue
            size = full.stat().st_size
            total += size
            if total > MAX_PACKAGE_BYTES or len(files) >= MAX_FILES:
                raise UsageError(
                    f"{folder.name} is too large (over {MAX_FILES} files or "
                    f"{MAX_PACKAGE_BYTES // (1024 * 1024)} MiB)",
                    code="package_too_large",
                )
            files[rel] = full.read_bytes()
    return files

"""Find and read skill packages from disk; the parsing itself is :mod:`proctor.parser.skill`.

A reference is ``PATH[#METHOD]`` (a package folder, or its ``SKILL.md``) or ``NAME[#METHOD]``
naming a folder of the workspace's ``skills/`` catalog.

A package with only ``SKILL.md`` (the published Agent Skills format) is given one agent method,
``main``, from its frontmatter (:mod:`proctor.parser.agent_skills`); its ``allowed-tools``
mapping is kept beside it (:attr:`LoadedSkill.tool_mapping`).

Parsed packages are cached per process by content: every load computes the digest of the
package's bytes (a run records it; a file unchanged since this process read it is not read
again: :mod:`proctor.runtime.skill_files`), and a package whose folder, label and digest match
one parsed before is not parsed again. An edited file changes the digest, so the next load parses
the new text; nothing of a run (approvals, credentials, leases) is ever part of a cached entry.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import Any

from proctor.contracts.skill import SkillPackage
from proctor.contracts.values import dataclass, replace
from proctor.errors import UsageError
from proctor.parser.agent_skills import ToolMapping, agent_skill_profile
from proctor.parser.skill import build_package, package_dir_for, parse_ref
from proctor.receipts.canonical import digest
from proctor.runtime.real_paths import real_path
from proctor.runtime.skill_files import SeenFiles

SKIP_DIRS = frozenset({".git", ".proctor", "__pycache__", "node_modules", ".venv"})
"""Folders the package reader does not walk (nor does :mod:`.engine.held_skills`)."""
_MAX_FILES = 2_000
_MAX_BYTES = 64 * 1024 * 1024
_PARSED = frozenset({"SKILL.md", "run.yaml"})
_SEEN = SeenFiles()


@dataclass(frozen=True)
class LoadedSkill:
    """A package read from disk, with where it lives and the digest of every file in it."""

    package: SkillPackage
    folder: Path
    label: str
    package_digest: str
    method: str | None
    tool_mapping: ToolMapping | None = None
    """An Agent Skills package's ``allowed-tools`` as proctor tools (``None``: it has run.yaml)."""
    origin: dict[str, Any] | None = None
    """Where a core skill or an installed package came from (``None``: a local folder); see
    :mod:`proctor.runtime.packages.resolve`."""
    identity: str = ""
    """The package's identity, decided by where it came from and never by its own text:
    ``core:<name>``, ``registry:<publisher>/<name>`` or ``local:<workspace-relative path>``
    (``local:outside/<digest>`` for a folder outside the workspace). Every per-package namespace
    (state, connector and store idempotency keys, reuse) is keyed by it, never by the name in
    SKILL.md, which any package may choose."""


_PUBLISHED_NAME = re.compile(r"[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9._-]*")


def local_identity(folder: Path, workspace_root: Path) -> str:
    """The identity of a package read from ``folder``: its path in the workspace; a folder
    outside the workspace is named by a digest of its absolute path (no host path is
    recorded). Moving the folder makes it another package."""
    return _identity_of_real(real_path(folder), workspace_root)


def _identity_of_real(real: str, workspace_root: Path) -> str:
    """:func:`local_identity` of a folder already resolved to ``real`` (:func:`locate`'s)."""
    base = real_path(workspace_root)
    if real == base:
        return "local:."
    if not real.startswith(base.rstrip("/") + "/"):
        return "local:outside/" + hashlib.sha256(real.encode()).hexdigest()[:16]
    return "local:" + real[len(base.rstrip("/")) + 1 :]


def locate(ref: str, *, cwd: Path, workspace_root: Path) -> tuple[Path, str, str | None]:
    """The package folder a reference names, its display label, and the method named.

    Raises:
        UsageError: ``ref_invalid``, ``skill_not_found`` or ``not_a_package``.
    """
    real, label, method = located(ref, cwd=cwd, workspace_root=workspace_root)
    return Path(real), label, method


def located(ref: str, *, cwd: Path, workspace_root: Path) -> tuple[str, str, str | None]:
    """:func:`locate`, the folder as its real path's text (a run's start compares it as text:
    no :class:`Path` built to be turned back into one).

    Raises:
        UsageError: ``ref_invalid``, ``skill_not_found`` or ``not_a_package``.
    """
    path_part, method = parse_ref(ref)
    plain = "/" not in path_part and os.sep not in path_part
    if plain and path_part not in ("", ".", "..") and "\0" not in path_part:
        # a plain name (most runs): the texts Path's joins give, without building Paths
        here, root = str(cwd).rstrip("/"), str(workspace_root).rstrip("/")  # "/" as Path joins it
        candidates = [f"{here}/{path_part}", f"{root}/skills/{path_part}"]
    else:
        candidates = [str(cwd / path_part)]
        if plain or _PUBLISHED_NAME.fullmatch(path_part):
            # a name, or a publisher/name whose own copy the workspace keeps in skills/
            candidates.append(str(workspace_root / "skills" / path_part))
    for candidate in candidates:
        try:
            st = _stat(candidate)
        except OSError as exc:  # a name too long for the file system, say: nothing is there
            raise UsageError(
                f"no skill package at {_shown(path_part)} ({exc.strerror})",
                code="skill_not_found",
            ) from None
        if st is not None:
            folder = package_dir_for(candidate, is_dir=S_ISDIR(st.st_mode))
            real = real_path(folder)
            base = str(workspace_root)
            if real == base:
                label = "."
            elif real.startswith(base.rstrip("/") + "/"):  # Path.relative_to, by its text
                label = real[len(base.rstrip("/")) + 1 :]
            else:
                label = os.path.basename(real) or real
            return real, label, method
    raise UsageError(
        f"no skill package at {path_part!r} (looked in the current folder and the workspace's"
        " skills/)",
        code="skill_not_found",
    )


def _stat(path: str) -> os.stat_result | None:
    """``os.stat`` of ``path``, ``None`` where :meth:`Path.exists` says it is not there (no
    such entry, a file on the way, a link loop, a NUL in the name); one call for both of
    :meth:`Path.exists` and :meth:`Path.is_dir`.

    Raises:
        OSError: any other failure (a name too long for the file system, say)."""
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return None
        raise
    except ValueError:
        return None


def _shown(path_part: str) -> str:
    """A reference's path as an error message shows it: quoted, and cut past 200 characters."""
    return repr(path_part) if len(path_part) <= 200 else repr(path_part[:200]) + "..."


def read_package(folder: Path, label: str) -> tuple[dict[str, str], str]:
    """The texts of SKILL.md and run.yaml (other files listed with empty text) and the package
    digest: ``sha256`` over the canonical mapping of every file's relative path to the digest
    of its bytes.

    Raises:
        UsageError: ``package_too_large`` past 2,000 files or 64 MiB (a file whose size takes
            the package past the cap is refused unread, and none is read past it);
            ``not_a_package`` when SKILL.md is not UTF-8; ``package_unreadable`` naming a file
            that cannot be read.
    """
    files: dict[str, str] = {}
    digests: dict[str, str] = {}
    total = 0
    base = os.path.join(os.fspath(folder), "")
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if not S_ISREG(st.st_mode):  # a link, a folder's name, a device: not a file of it
                continue
            rel = full[len(base) :]
            if len(digests) >= _MAX_FILES:
                raise _too_large(label)
            left = _MAX_BYTES - total
            parsed = rel in _PARSED
            held = _SEEN.get(full, st, text=parsed)
            if held is not None:  # the same file, unchanged since it was read (.skill_files)
                if st.st_size > left:
                    raise _too_large(label)
                total += st.st_size
                digests[rel], files[rel] = held[0], held[1] or ""
                continue
            made = time.time_ns()
            try:
                with open(full, "rb") as handle:
                    # refused before it is read when its size says so, and never read past
                    # the cap (a size can grow while it is read)
                    opened = os.fstat(handle.fileno())
                    if opened.st_size > left:
                        raise _too_large(label)
                    data = _read_to_cap(handle, opened.st_size, left)
            except OSError as exc:
                raise UsageError(
                    f"{label}/{rel} could not be read: {exc.strerror}", code="package_unreadable"
                ) from None
            total += len(data)
            if total > _MAX_BYTES:
                raise _too_large(label)
            digests[rel] = "sha256:" + hashlib.sha256(data).hexdigest()
            text = None
            if parsed:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise UsageError(
                        f"{label}/{rel} is not UTF-8 text", code="not_a_package"
                    ) from exc
            files[rel] = text or ""
            if len(data) == opened.st_size:  # not one that changed size while it was read
                _SEEN.put(full, opened, made, digests[rel], text)
    return files, digest(digests)


def _read_to_cap(handle: Any, size: int, left: int) -> bytes:
    """The file's bytes up to its end, or ``left + 1`` of them when it holds more: read for
    its size first (a buffer of the cap's size costs a mapping of 64 MiB per file), then on
    when it grew while it was read."""
    want = size + 1
    data: bytes = handle.read(want)
    if len(data) == want and want <= left:
        data += handle.read(left + 1 - want)
    return data


def _too_large(label: str) -> UsageError:
    return UsageError(
        f"skill package {label} is too large (over {_MAX_FILES} files or 64 MiB)",
        code="package_too_large",
    )


class _PackageCache:
    """Parsed packages by ``(folder, label, package digest)``, the most recent ``limit`` kept.

    An entry remembers whether its declared schemas were checked: one parsed for a run record's
    digest (``check_schemas=False``) is never handed to a load that wants them checked.
    """

    def __init__(self, limit: int = 256) -> None:
        self._limit = limit
        self._entries: OrderedDict[tuple[str, str, str], tuple[LoadedSkill, bool]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str], *, checked: bool) -> LoadedSkill | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or (checked and not entry[1]):
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: tuple[str, str, str], skill: LoadedSkill, *, checked: bool) -> None:
        with self._lock:
            held = self._entries.get(key)
            if held is not None and held[1] and not checked:
                return  # never replace a checked entry by an unchecked one
            self._entries[key] = (skill, checked)
            self._entries.move_to_end(key)
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)


_PACKAGES = _PackageCache()


def load_skill(
    ref: str, *, cwd: Path, workspace_root: Path, recorded_digest: str | None = None
) -> LoadedSkill:
    """Locate, read and parse a skill package (a package parsed before with the same bytes is
    taken from the per-process cache).

    ``recorded_digest`` is the package digest a run record holds: when the files read now have
    exactly that digest, their declared schemas passed the draft-07 check when the run started
    and are not checked again (every schema is checked again when it is compiled for use). A
    different digest is loaded as any other package: the caller decides what a change means.

    Raises:
        UsageError: the reference does not name a package.
        ParseError: SKILL.md or run.yaml is invalid (the message names file:line:column).
    """
    folder, label, method = locate(ref, cwd=cwd, workspace_root=workspace_root)
    files, package_digest = read_package(folder, label)
    check = recorded_digest != package_digest
    key = (str(folder), label, package_digest)
    skill = _PACKAGES.get(key, checked=check)
    if skill is None:
        package = build_package(label, files, check_schemas=check)
        mapping = None
        if package.profile is None:  # an Agent Skills package: one agent method from SKILL.md
            profile, mapping = agent_skill_profile(package.frontmatter, f"{label}/SKILL.md")
            package = package.model_copy(update={"profile": profile})
        skill = LoadedSkill(package, folder, label, package_digest, None, mapping)
        _PACKAGES.put(key, skill, checked=check)
    identity = _identity_of_real(str(folder), workspace_root)  # locate resolved the folder
    return replace(skill, method=method or skill.method, identity=identity)


def package_authority_files(skill: LoadedSkill, workspace_root: Path) -> frozenset[str]:
    """Workspace-relative SKILL.md/run.yaml of the run's own package (never written by it)."""
    folder, root = str(skill.folder), str(workspace_root).rstrip("/")
    if folder == str(workspace_root):
        prefix = ""
    elif folder.startswith(root + "/"):  # Path.relative_to, by the paths' text
        prefix = folder[len(root) + 1 :] + "/"
    else:
        return frozenset()
    return frozenset(prefix + name for name in _PARSED if name in skill.package.files)

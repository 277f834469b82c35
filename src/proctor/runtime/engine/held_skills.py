"""The packages a session's runs and turn calls run under, kept while nothing of them changed.

Every host turn call (:meth:`proctor.runtime.engine.session.Session.turn_call`; every call of
an MCP client session) reloads the run's package and refuses the call ``package_changed`` when
its digest is not the one the run started with. A session keeps the package it loaded, with
the stat identity (device, inode, size, mode, modification and change times in nanoseconds) of
the package folder, of every folder and file under it that the package reader walks, and the
real paths of the folder and the workspace; a later call of the same run (same folder, digest
and method) takes the kept package when every one of those is as it was, and loads it again
otherwise.

Why that is safe (git's rule for "racily clean" index entries, as in
:mod:`proctor.runtime.skill_files`): a write to a file, and an entry added to, removed from or
renamed in a folder, set the change time (``ctime``) of what they change to the file system's
clock, which no call sets back. The identities are taken before the package is read, so a
write after that is stamped later than a change that came :data:`RACY_NS` before it, and the
identity differs. A folder swapped under the package's path is another inode, or another real
path.

An entry whose folder or file changed within :data:`RACY_NS` of its stamp (a write might share
that change's tick, and leave every identity as it was) is "racy": it is taken only after the
package's files are read again and their digest is the run's (git's answer to the same
question: compare the content), which costs a read of the files but not their parsing. Once
that check begins :data:`RACY_NS` after the newest change, the entry is no longer racy: any
later write moves a change time past the ones stamped.

The runs a session starts (:meth:`HeldSkills.resolve`) are held the same way: the package a
reference resolved to from a folder is kept with its stamps, and taken again when the
reference locates the same real folder (looked up again at every start: a folder that now
answers the reference first, or a link swapped, is another folder) and nothing stamped
changed, or, while racy, the files' digest is the kept package's. So the package a run
records, and its receipt binds, is always the one whose files are there when it starts.

A package whose record names an ``origin`` (a core skill, an installed package) is never kept:
its verification asks the home's registry trust on every call.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import ProctorError
from proctor.runtime.boundary.real import real_path
from proctor.runtime.packages.resolve import is_named_ref, resolve_skill
from proctor.runtime.skill_files import RACY_NS
from proctor.runtime.skills import SKIP_DIRS, LoadedSkill, located, read_package

__all__ = ["RACY_NS", "HeldSkills", "Stamped", "stamp_package"]

_LIMIT = 64

Stamp = tuple[tuple[str, tuple[int, ...]], ...]


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True)
class Stamped:
    """What :func:`stamp_package` saw, before the package was read."""

    made_ns: int  # this host's clock when it began
    reals: tuple[str, str]  # the real paths of the package folder and the workspace
    stamps: Stamp
    newest: int  # the newest change time among them


def stamp_package(folder: str, root: str) -> Stamped | None:
    """The real paths of ``folder`` and the workspace ``root``, the identity of ``folder`` and
    of every name the package reader sees under it (the folders it walks, their files and
    links), and the newest change among them; ``None`` when one cannot be looked at (the
    package is then loaded, never kept)."""
    made_ns = time.time_ns()
    reals = (real_path(folder), real_path(root))
    stamps: list[tuple[str, tuple[int, ...]]] = []
    newest = 0
    try:
        for dirpath, dirnames, filenames in os.walk(folder, onerror=_raise):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for path in [dirpath, *(os.path.join(dirpath, n) for n in filenames)]:
                st = os.lstat(path)
                stamps.append((path, _identity(st)))
                newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        return None
    return Stamped(made_ns, reals, tuple(stamps), newest)


def _raise(exc: OSError) -> None:
    raise exc


def _same_digest(folder: str, recorded: str) -> bool:
    """Whether the package files under ``folder`` read now have the digest ``recorded``
    (False when they cannot be read: the package is then loaded again, and refused)."""
    try:
        return read_package(Path(folder), os.path.basename(folder))[1] == recorded
    except (ProctorError, OSError):
        return False


def _unchanged(stamps: Stamp) -> bool:
    for path, identity in stamps:
        try:
            if _identity(os.lstat(path)) != identity:
                return False
        except OSError:
            return False
    return True


class HeldSkills:
    """The packages one session loaded: for its turn calls by (folder, digest, method), and
    for the runs it starts by (``"ref"``, reference, current folder, workspace)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, ...], tuple[Stamped, Any]] = {}
        self._lock = threading.Lock()

    def get(
        self, key: tuple[str, ...], root: str, *, folder: str | None = None,
        digest: str | None = None, real_root: str | None = "",
    ) -> Any | None:  # fmt: skip
        """The kept value when the package folder (``folder``: a real path; by default
        ``key[0]`` resolved) and the workspace resolve to the paths they did and nothing
        stamped changed (and, for a racy entry, the files' digest is still ``digest``, default
        ``key[1]``); ``None`` otherwise. ``real_root``: the workspace's real folder as the
        run resolved it at its start (``None``: not a folder; ``""``, the default: resolved
        here)."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        stamped, loaded = entry
        began = time.time_ns()
        # a folder given is the real path locate just resolved: not asked of the kernel twice
        reals = (
            real_path(key[0]) if folder is None else folder,
            real_path(root) if real_root == "" else real_root,
        )
        if reals != stamped.reals or not _unchanged(stamped.stamps):
            self._drop(key, entry)
            return None
        if stamped.newest >= stamped.made_ns - RACY_NS:
            if not _same_digest(stamped.reals[0], key[1] if digest is None else digest):
                self._drop(key, entry)
                return None
            if stamped.newest < began - RACY_NS:  # no longer racy from here on
                aged = Stamped(began, stamped.reals, stamped.stamps, stamped.newest)
                with self._lock:
                    if self._entries.get(key) is entry:
                        self._entries[key] = (aged, loaded)
        return loaded

    def resolve(
        self, ref: str, *, cwd: Path, root: Path, environ: Mapping[str, str],
        real_root: str | None = "",
    ) -> LoadedSkill:  # fmt: skip
        """:func:`~proctor.runtime.packages.resolve.resolve_skill` of ``ref`` from ``cwd``, or
        the package this session resolved for it before: kept for a local folder (a core or
        installed package is verified on every load) while ``ref`` still locates the same real
        folder and nothing under it changed (the rules of :meth:`get`), so what runs is
        always the package whose digest the run records. ``real_root``: as :meth:`get`'s.

        Raises:
            ProctorError: as :func:`~proctor.runtime.packages.resolve.resolve_skill`.
        """
        if is_named_ref(ref):
            return resolve_skill(ref, cwd=cwd, workspace_root=root, environ=environ)
        key, base = ("ref", ref, str(cwd), str(root)), str(root)
        try:
            folder = located(ref, cwd=cwd, workspace_root=root)[0]
        except ProctorError:  # a bare publisher/name may still name an installed package
            return resolve_skill(ref, cwd=cwd, workspace_root=root, environ=environ)
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None:
            skill: LoadedSkill = entry[1]
            if str(skill.folder) == folder:
                held = self.get(
                    key, base, folder=folder, digest=skill.package_digest, real_root=real_root
                )
                if held is not None:
                    return held  # type: ignore[no-any-return]
        stamped = stamp_package(folder, base)  # before the package is read
        skill = resolve_skill(ref, cwd=cwd, workspace_root=root, environ=environ)
        if skill.origin is None and str(skill.folder) == folder:
            self.put(key, stamped, skill)
        return skill

    def _drop(self, key: tuple[str, ...], entry: tuple[Stamped, Any]) -> None:
        with self._lock:
            if self._entries.get(key) is entry:
                del self._entries[key]

    def put(self, key: tuple[str, ...], stamped: Stamped | None, loaded: Any) -> None:
        """Keep ``loaded`` (read after ``stamped`` was taken; a racy one is checked by its
        files' digest whenever it is taken, see the module's text)."""
        if stamped is None:
            return
        entry = (stamped, loaded)
        with self._lock:
            if len(self._entries) >= _LIMIT and key not in self._entries:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = entry

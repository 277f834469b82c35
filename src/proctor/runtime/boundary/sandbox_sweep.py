"""Host-side clean-up after a command: what a sandboxed process made that a run may never write.

The seam: :mod:`.sandbox_paths` builds the view of one process call before it starts; this
module acts on the host after every process of that sandbox has ended. An entry a run may never
write that does not exist when the process starts cannot be covered without creating it on the
host, so :class:`Sweep` records each writable root's top-level names (and those of its
top-level dot-folders) before the process and, afterwards, removes any such entry the process
created (the call then fails); it does the same with the git host code the process created
anywhere in the roots (a new ``.git/commondir``, a nested repository's config that names a
program, a ``.git`` file: :mod:`.sandbox_git`), and with the absent paths it was told to keep
absent (a hooks folder a config names, a signing key). A long-lived process's supervisor runs
the same sweep from its JSON form (:meth:`Sweep.to_json`) once its tree has ended.
"""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass, field
from proctor.core.paths import authority_reason
from proctor.runtime.boundary.fds import changed, kinds_below, lstat_below, remove_below
from proctor.runtime.boundary.sandbox_git import fresh, git_entries, host_code, removable

__all__ = ["Sweep", "top_names"]


@dataclass
class Sweep:
    """The top-level names of each writable root before a process ran, to remove afterwards
    what it created that a run may never write."""

    before: dict[Path, frozenset[str]] = field(default_factory=dict)
    absent: tuple[Path, ...] = ()
    state_shut: frozenset[Path] = frozenset()
    """Roots whose ``.proctor/`` was hidden whole: what appears in there was made by proctor
    itself, never by the process, and stays."""
    git: dict[Path, frozenset[str]] = field(default_factory=dict)
    """The git host code of each root before the process (bound read-only meanwhile): any
    other that appears was made by the process (:mod:`.sandbox_git`)."""
    git_partial: frozenset[Path] = frozenset()
    """Roots whose walk for ``.git`` stopped at its bound: there, new host code counts as made
    by the process only if it changed since :attr:`git_since_ns`, since a walk after the
    process may reach a repository the one before did not."""
    git_since_ns: int = 0

    def to_json(self) -> dict[str, Any]:
        """The sweep as JSON, for a supervisor that runs it once a long-lived process ends
        (``process.start``): it is kept where the process cannot reach (``.proctor/``)."""
        return {
            "before": {str(root): sorted(names) for root, names in self.before.items()},
            "absent": [str(p) for p in self.absent],
            "state_shut": sorted(str(p) for p in self.state_shut),
            "git": {str(root): sorted(names) for root, names in self.git.items()},
            "git_partial": sorted(str(p) for p in self.git_partial),
            "git_since_ns": self.git_since_ns,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Sweep:
        """Read back :meth:`to_json`."""
        return cls(
            before={Path(r): frozenset(n) for r, n in dict(doc.get("before", {})).items()},
            absent=tuple(Path(p) for p in doc.get("absent", [])),
            state_shut=frozenset(Path(p) for p in doc.get("state_shut", [])),
            git={Path(r): frozenset(n) for r, n in dict(doc.get("git", {})).items()},
            git_partial=frozenset(Path(p) for p in doc.get("git_partial", [])),
            git_since_ns=int(doc.get("git_since_ns", 0)),
        )

    def run(self) -> list[str]:
        """Remove what appeared; return the names removed (root-relative, ``$``-free).

        Everything is reached from each root through descriptors (:mod:`.fds`): no link is
        followed, so a link or a ``.git`` pointer the process planted, or a folder swapped for
        a link meanwhile, never makes this read or remove anything outside the roots. A link
        found on the way to what is to be removed was made by the process (the path was
        decided link-free), and is itself what is removed; a path in no root is left alone."""
        removed: list[str] = []
        for root, names in self.before.items():
            for rel in sorted(top_names(root) - names):
                if root in self.state_shut and rel.startswith(".proctor/"):
                    continue
                if authority_reason(rel) is not None:
                    removed += _remove(root, rel)
        for path in self.absent:
            where = _root_of(path, list(self.before))
            if where is None:
                continue
            root, rel = where
            if _lexists(root, rel) or _link_on_way(root, rel) is not None:
                gone = _remove(root, rel)
                removed += [path.name] if gone == [rel] else gone
        for root, before in self.git.items():
            removed += self._git_made(root, before)
        return removed

    def _git_made(self, root: Path, before: frozenset[str]) -> list[str]:
        """Remove the git host code the process made in ``root``; again until nothing new is
        found, since a config removed may let git list an index it could not read before (and
        find the nested repositories its gitlinks name)."""
        removed: list[str] = []
        judged = set(before)
        while True:
            found, partial = git_entries(root)
            made = {rel for dot_git in found for rel in host_code(root, dot_git)} - judged
            if partial or root in self.git_partial:
                made = {rel for rel in made if fresh(root, rel, self.git_since_ns)}
            if not made:
                return removed
            judged |= made
            for rel in sorted(made):
                for gone in removable(root, rel):
                    removed += _remove(root, gone)


def top_names(root: Path) -> frozenset[str]:
    """The root's entries and, inside its top-level dot-folders, theirs (``.github/x``), listed
    through descriptors (a dot-folder that is a link is not looked into)."""
    base = str(root)
    try:
        kinds = kinds_below(base, ".")
    except OSError:
        return frozenset()
    names = set(kinds)
    for name, kind in kinds.items():
        if name.startswith(".") and kind == stat.S_IFDIR:
            with contextlib.suppress(OSError):
                names.update(f"{name}/{child}" for child in kinds_below(base, name))
    return frozenset(names)


def _root_of(path: Path, roots: list[Path]) -> tuple[Path, str] | None:
    """The root ``path`` lies in (the innermost) and its relative path there."""
    for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
        if path != root and path.is_relative_to(root):
            return root, path.relative_to(root).as_posix()
    return None


def _lexists(root: Path, rel: str) -> bool:
    try:
        lstat_below(str(root), rel)
    except OSError:
        return False
    return True


def _link_on_way(root: Path, rel: str) -> str | None:
    """The first folder on the way to ``root/rel`` that is a link (root-relative), if any."""
    parts = rel.split("/")
    for end in range(1, len(parts)):
        prefix = "/".join(parts[:end])
        try:
            info = lstat_below(str(root), prefix)
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode):
            return prefix
        if not stat.S_ISDIR(info.st_mode):
            return None
    return None


def _remove(root: Path, rel: str) -> list[str]:
    """Remove ``root/rel`` through descriptors and return what was removed: ``rel``, or, when
    a link now stands on the way to it, that link (made by the process: it would lead the
    host's tools elsewhere), never what it points to."""
    try:
        remove_below(str(root), rel)
        return [rel]
    except OSError as exc:
        if not changed(exc):
            return []
    link = _link_on_way(root, rel)
    if link is None:
        return []
    with contextlib.suppress(OSError):
        remove_below(str(root), link)
        return [link]
    return []

"""The policy state a session loaded, kept while no file it was built from changed.

:meth:`proctor.runtime.engine.session.Session.policy` is asked on every run start, resume and
turn call; :func:`proctor.policy.cache.run_policies` reads and hashes every file the state is
built from each time (the state itself is kept per process by their content). A session keeps
the state it loaded with the stat identity (device, inode, mode, size, modification and change
times in nanoseconds, or its absence; each as a link and as what it names) of what decides it:
the workspace's ``policies`` folder and every entry in it, and the guard config files
(``proctor.toml``, ``.proctor/config``), and what ``.proctor`` is (device, inode, mode: the
run store and the audit log change its times on every run); with the real path of the
workspace and the ``PROCTOR_*`` settings. A later ask takes the kept state when all are as they
were, and loads it again otherwise.

Not kept: a state whose config names guard modules (each module's name is resolved among
candidate files; that state is loaded as before, every time); a state any of whose files
changed within :data:`~proctor.runtime.skill_files.RACY_NS` before it was loaded (a
write might share the change's tick: git's "racily clean" rule, as in :mod:`.held_skills`);
a load that failed (each ask refuses again until the files are fixed).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Mapping
from typing import Any

from proctor.runtime.boundary.real import real_path
from proctor.runtime.skill_files import RACY_NS

__all__ = ["HeldPolicy"]

_CONFIG_FILES = ("proctor.toml", ".proctor/config")
_ON_THE_WAY = ".proctor"  # a folder a config file is read through: what it is, not its times

_ACCESS_OWN = os.access in os.supports_follow_symlinks  # asked of a name, not what it names

Look = tuple[tuple[int, ...] | None, tuple[int, ...] | None]


def _look(path: str, *, times: bool = True, rare: bool = True) -> tuple[Look, int]:
    """``path``'s identity as a link and as what it names (``None`` when absent), and the
    newest change time among them; without ``times``, what it is (device, inode, mode) only.
    One ``lstat`` unless it is a link (what is not a link names itself; what ``lstat`` cannot
    find, ``stat`` cannot either); a ``rare`` name (a config file: most workspaces have none)
    is first asked of ``access``, which tells an absent one without the exception a failing
    ``stat`` makes."""
    if rare and _ACCESS_OWN and not os.access(path, os.F_OK, follow_symlinks=False):
        return (None, None), 0  # absent (most config names): said without an exception made
    try:
        own = os.stat(path, follow_symlinks=False)
    except OSError:
        return (None, None), 0
    named: os.stat_result | None = own
    if stat.S_ISLNK(own.st_mode):
        try:
            named = os.stat(path)
        except OSError:
            named = None
    found: list[tuple[int, ...] | None] = []
    newest = 0
    for st in (own, named):
        if st is None:
            found.append(None)
        elif not times:
            found.append((st.st_dev, st.st_ino, st.st_mode))
        else:
            found.append((st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns,
                          st.st_ctime_ns))  # fmt: skip
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    return (found[0], found[1]), newest


def _stamp(root: str) -> tuple[tuple[tuple[str, bool, Look], ...], int]:
    # the run store, the audit log and its mark live in .proctor/ and change it on every
    # run: a config file created, removed or replaced there is its own entry's change, and a
    # folder replaced (by another, or by a link) is another inode or mode
    way = os.path.join(root, _ON_THE_WAY)
    stamps: list[tuple[str, bool, Look]] = [(way, False, _look(way, times=False, rare=False)[0])]
    paths = [os.path.join(root, p) for p in _CONFIG_FILES]
    folder = os.path.join(root, "policies")
    paths.append(folder)
    listed: list[str] = []
    with contextlib.suppress(OSError):  # absent, or not a folder: its own identity says so
        listed = sorted(os.path.join(folder, n) for n in os.listdir(folder))
    newest = 0
    for n, path in enumerate(paths + listed):
        look, changed = _look(path, rare=n < len(paths))  # a listed name is there
        stamps.append((path, True, look))
        newest = max(newest, changed)
    return tuple(stamps), newest


Settings = tuple[frozenset[tuple[str, str]], dict[str, str] | None]


def _settings(environ: Mapping[str, str]) -> Settings:
    """The ``PROCTOR_*`` settings in ``environ``, and a copy of the whole of it when it is a
    plain ``dict`` (:func:`_same_settings` compares an equal one without picking them)."""
    return _picked(environ), dict(environ) if type(environ) is dict else None


def _same_settings(environ: Mapping[str, str], held: Settings) -> bool:
    """Whether ``environ``'s ``PROCTOR_*`` settings are the ones ``held``: at once when it is a
    ``dict`` equal to the one they were picked from (equal mappings hold equal settings; one
    comparison in C, not a pick of every variable), else by picking them again."""
    picked, whole = held
    if whole is not None and type(environ) is dict and environ == whole:
        return True
    return _picked(environ) == picked


def _picked(environ: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset({(k, v) for k, v in environ.items() if k.startswith("PROCTOR_")})


class HeldPolicy:
    """The policy state one session loaded (see the module's text)."""

    def __init__(self) -> None:
        self._entry: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    def get(self, root: str, environ: Mapping[str, str], real_root: str | None = "") -> Any | None:
        """The kept state when the workspace and everything stamped are as they were
        (``real_root``: the workspace's real folder as the run resolved it at its start,
        ``None`` when it was not one; ``""``, the default: resolved here)."""
        with self._lock:
            entry = self._entry
        if entry is None:
            return None
        real, settings, stamps, loaded = entry
        if (real_path(root) if real_root == "" else real_root) != real or not _same_settings(
            environ, settings
        ):
            return None
        for path, times, look in stamps:  # one absent when stamped: asked of access first
            if _look(path, times=times, rare=look[0] is None)[0] != look:
                return None
        return loaded

    def stamp(self, root: str, environ: Mapping[str, str]) -> tuple[Any, ...]:
        """What decides the state now, taken before it is loaded."""
        made = time.time_ns()
        return (made, real_path(root), _settings(environ), *_stamp(root))

    def put(self, stamped: tuple[Any, ...], loaded: Any, *, guard_modules: bool) -> None:
        """Keep ``loaded`` (loaded after ``stamped`` was taken), unless its config names guard
        modules or something stamped changed within :data:`RACY_NS` of the stamp."""
        made, real, settings, stamps, newest = stamped
        if guard_modules or newest >= made - RACY_NS:
            with self._lock:
                self._entry = None
            return
        with self._lock:
            self._entry = (real, settings, stamps, loaded)

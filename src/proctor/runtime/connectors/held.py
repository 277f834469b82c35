"""The connectors a run found, kept while the folders they were read from are as they were.

Every run (and every turn call: a driver is built per call) asks :func:`.catalog.find_connectors`
for the connectors of its package and its workspace, which looks at three folders and reads
and parses every manifest in them. :func:`held_connectors` keeps what it found, by workspace,
package folder and label, with the stat identity (device, inode, mode, size, modification and
change times in nanoseconds, or absence) of what decides it: each ``connectors`` folder, every
entry in it and every ``connector.yaml`` below, and what the workspace and the package folder
are (whether they are one folder). A later ask takes the kept answer when every identity is as
it was; a manifest edited in place, even to the same size in the same second, has a new change
time (``ctime``), which no call sets back.

Not kept (found again on every ask, as before): an answer any of whose identities changed
within :data:`~proctor.runtime.skill_files.RACY_NS` before it was stamped (a write might share
that change's tick: git's "racily clean" rule, as in :mod:`proctor.runtime.skill_files`); a
workspace with installed connectors (each verifies against the home's registry trust on every
read); a ``connectors`` folder of more entries than the catalog reads; a refusal.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

from proctor.runtime.connectors.catalog import MAX_CONNECTORS, LoadedConnector, find_connectors
from proctor.runtime.packages.installed import ADDED_CONNECTORS
from proctor.runtime.skill_files import RACY_NS

__all__ = ["held_connectors"]

_LIMIT = 64
_ADDED = str(ADDED_CONNECTORS)

Look = tuple[int, ...] | None
Stamps = tuple[tuple[str, Look], ...]

_ACCESS_OWN = os.access in os.supports_follow_symlinks  # asked of a name, not what it names

_held: OrderedDict[tuple[str, str, str], tuple[Stamps, dict[str, LoadedConnector]]] = OrderedDict()
_lock = threading.Lock()


def _look(path: str, *, follow: bool = False, rare: bool = True) -> tuple[Look, int]:
    try:
        if (
            rare
            and (follow or _ACCESS_OWN)
            and not os.access(path, os.F_OK, follow_symlinks=follow)
        ):
            return None, 0  # absent (most connectors folders): told without an exception made
        st = os.stat(path, follow_symlinks=follow)
    except (OSError, ValueError):
        return None, 0
    m, c = st.st_mtime_ns, st.st_ctime_ns
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, m, c), m if m > c else c


def _stamps(root: str, package: str) -> tuple[Stamps, int] | None:
    """What decides the connectors of ``package`` in ``root`` now, and the newest change among
    it; ``None`` when the answer is not to be kept (installed connectors, too many entries)."""
    added = f"{root}/{_ADDED}"
    look, newest = _look(added, follow=True)
    if look is not None and stat.S_ISDIR(look[2]):
        return None
    stamps: list[tuple[str, Look]] = [(added, look)]
    for base in (root, package):  # followed: whether they are one folder
        look, _changed = _look(base, follow=True, rare=False)  # there: one stat
        stamps.append((base, None if look is None else look[:2]))
        where = f"{base}/connectors"
        look, changed = _look(where)
        stamps.append((where, look))
        newest = newest if newest > changed else changed
        if look is None or not stat.S_ISDIR(look[2]):
            continue
        try:
            names = sorted(os.listdir(where))
        except OSError:
            return None
        if len(names) > MAX_CONNECTORS:
            return None
        for name in names:
            child = os.path.join(where, name)
            manifest = os.path.join(child, "connector.yaml")
            # the entry and its manifest as themselves, and the manifest as what it names
            for path, follow in ((child, False), (manifest, False), (manifest, True)):
                look, changed = _look(path, follow=follow, rare=False)  # listed: there
                stamps.append((path, look))
                newest = max(newest, changed)
    return tuple(stamps), newest


def held_connectors(
    workspace_root: Path, package: Path, package_label: str, environ: Mapping[str, str]
) -> dict[str, LoadedConnector]:
    """:func:`.catalog.find_connectors` of ``package`` in ``workspace_root``, or the answer
    found before while nothing it was read from changed (see the module's text).

    Raises:
        ParseError, RegistryRefused: as :func:`.catalog.find_connectors` (never kept).
    """
    key = (str(workspace_root), str(package), package_label)
    made = time.time_ns()
    stamped = _stamps(key[0], key[1])
    if stamped is not None:
        with _lock:
            entry = _held.get(key)
        if entry is not None and entry[0] == stamped[0]:
            return dict(entry[1])
    found = find_connectors(workspace_root, package, package_label, environ=environ)
    if stamped is not None and stamped[1] < made - RACY_NS:
        with _lock:
            _held[key] = (stamped[0], dict(found))
            _held.move_to_end(key)
            while len(_held) > _LIMIT:
                _held.popitem(last=False)
    return found

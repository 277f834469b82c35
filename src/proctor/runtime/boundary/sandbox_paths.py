"""What a run's sandbox hides, binds and re-binds read-only (``docs/sandbox.md``).

:func:`run_sandbox` builds the :class:`~proctor.runtime.boundary.sandbox.SandboxSpec` of one
process call from the run's workspace and the session's environment:

- **visible**: only what :mod:`.sandbox_view` allows (the system folders, the toolchains, the
  declared folders) and the roots below; the rest of the host is absent;
- **writable**: the workspace root and every root the run reaches (``reach: inputs``); ``/tmp``
  is a fresh empty tmpfs;
- **read-only inside the writable roots**: every top-level entry a run may never write
  (:func:`proctor.core.paths.authority_reason`: ``policies/``, ``directives/``,
  ``proctor.toml`` ...), the same inside the top-level dot-folders (``.github/workflows`` and
  the like), the skill packages' ``SKILL.md`` and ``run.yaml`` (``Workspace.authority_files``;
  in every other root, its packages and tool-config paths at any depth,
  :func:`proctor.runtime.boundary.rules.discovered`),
  and the git settings that make the host's git run programs (``.git/config``, ``hooks``,
  ``commondir`` ... of every repository at any depth, :mod:`.sandbox_git`);
- **pinned**: every folder between a writable root and a path covered inside it is bound onto
  itself (still writable), so it cannot be renamed: moving a hidden home or a package's folder
  aside and planting another in its place would otherwise leave proctor loading the plant;
- **hidden**: proctor's home (``PROCTOR_HOME`` or ``~/.proctor``), the signing key
  (``PROCTOR_SIGNING_KEY``), the configured run database, audit log and receipt folder, every
  root's ``.proctor/`` state folder, the sensitive files of every root at any depth (``.env``,
  ``.npmrc``, key files ...), ``/etc``'s secrets and a toolchain's top-level sensitive files:
  each only where it lies inside something shown;
- **scratch**: the home folder (``HOME`` and the user's home) becomes an empty writable tmpfs;
  toolchains that live there are bound back read-only inside it.

An entry a run may never write that does not exist when the process starts cannot be covered
without creating it on the host, so the call's :class:`~.sandbox_sweep.Sweep` (the host-side
clean-up once every process of the sandbox is gone, :mod:`.sandbox_sweep`) removes any such
entry the process created, and the git host code it created anywhere in the roots.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from proctor.core.paths import authority_reason, sensitive_reason
from proctor.runtime.boundary.fds import kinds_below, lstat_below, stats_below, walk
from proctor.runtime.boundary.rules import WALK_MAX_DEPTH, WALK_MAX_DIRS, WALK_SKIP, discovered
from proctor.runtime.boundary.sandbox import SandboxSpec
from proctor.runtime.boundary.sandbox_git import config_refs, git_entries, host_code
from proctor.runtime.boundary.sandbox_sweep import Sweep
from proctor.runtime.boundary.sandbox_sweep import top_names as _top_names
from proctor.runtime.boundary.sandbox_view import (
    account_homes,
    declared_reads,
    etc_secrets,
    system_view,
    toolchain_secrets,
    toolchains,
)

if TYPE_CHECKING:
    from proctor.runtime.boundary.workspace import Workspace

__all__ = ["Sweep", "host_hidden", "run_sandbox"]

_CLOCK_LAG_NS = 100_000_000
_DB_SIDE_FILES = ("", "-wal", "-shm", "-journal", "-checked", "-damaged", "-checking")
# Companions of the run database a process must not plant while they are absent: a rollback
# journal (the store keeps its log in -wal, so a -journal is never proctor's, and the next
# opener would roll a planted one into the database), the quick-check mark and the record of
# damage a full check found (a planted one would refuse the store). Never -wal or -shm:
# another proctor may make those meanwhile, and removing them would lose its writes.
_DB_PLANTABLE = ("-journal", "-checked", "-damaged")


def _real(path: str | Path) -> Path | None:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None


def _inside(path: Path, folder: Path) -> bool:
    inner, outer = str(path), str(folder)
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _settings(environ: Mapping[str, str], name: str) -> list[str]:
    """A setting as the session and as this process see it (both are hidden)."""
    return [v for v in {environ.get(name, ""), os.environ.get(name, "")} if v]


def host_hidden(environ: Mapping[str, str]) -> tuple[list[Path], list[Path], list[Path]]:
    """The host paths every sandbox hides, the home folders it replaces with scratch, and the
    proctor homes among the hidden paths.

    ``environ`` is the session's environment; this process's own is read too, so a home or a
    key named in either is hidden.
    """
    homes: list[str | Path] = [*_settings(environ, "HOME")]
    with contextlib.suppress(RuntimeError, KeyError):
        homes.append(Path.home())
    proctor_homes: list[str | Path] = [*_settings(environ, "PROCTOR_HOME")]
    proctor_homes += [Path(h) / ".proctor" for h in homes]
    hidden: list[str | Path] = [*proctor_homes, *_settings(environ, "PROCTOR_SIGNING_KEY")]
    hidden += _settings(environ, "PROCTOR_RECEIPT_DIR") + _settings(environ, "PROCTOR_AUDIT_LOG")
    for db in _settings(environ, "PROCTOR_DATABASE_PATH"):
        hidden += [db + suffix for suffix in _DB_SIDE_FILES]
    hidden += _settings(environ, "SSH_AUTH_SOCK")
    return _unique(hidden), _unique(homes), _unique(proctor_homes)


def _unique(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        real = _real(raw)
        if real is not None and real != Path("/") and real not in out:
            out.append(real)
    return out


def _deep_sensitive(root: Path) -> list[str]:
    """The sensitive entries below the root's top level (``app/.env``, ``deploy/id_rsa``,
    ``svc/.aws``), by a walk bounded like the authority walk (20,000 folders, 12 levels, no
    symlink followed, ``.git``/``.proctor``/dependency folders skipped); a sensitive folder is
    listed whole and not walked into. Every folder is listed through descriptors
    (:func:`~.fds.kinds_below`): one swapped for a link meanwhile is not listed."""
    base = str(root)
    found: list[str] = []
    pending: list[tuple[str, int]] = [("", 0)]
    visited = 0
    while pending and visited < WALK_MAX_DIRS:
        rel, depth = pending.pop()
        visited += 1
        try:
            kinds = kinds_below(base, rel or ".")
        except OSError:
            continue
        for name, kind in sorted(kinds.items()):
            if kind == stat.S_IFDIR and name in WALK_SKIP:
                continue
            if not rel:  # the top level is judged by the caller
                if kind == stat.S_IFDIR:
                    pending.append((name, 1))
                continue
            path = f"{rel}/{name}"
            if sensitive_reason(path) is not None:
                found.append(path)  # a folder is hidden whole, not walked into
            elif kind == stat.S_IFDIR and depth < WALK_MAX_DEPTH:
                pending.append((path, depth + 1))
    return found


def _linked_files(covered: Iterable[Path], devices: set[int]) -> set[tuple[int, int]]:
    """The (device, inode) of every regular file with more than one name among ``covered``
    and in the folders it holds (a folder's own files and one level below: policies, a home,
    ``.proctor``; the artifact store's depths are not searched). Only what lies on one of
    ``devices`` (the writable roots' file systems) is looked at: a hard link never crosses
    from one file system to another, so nothing elsewhere can have a name a process writes.
    Each covered path is resolved as the kernel would (:func:`~.fds.walk`) and then reached
    through descriptors from ``/`` with no link on the way, so a folder swapped for a link
    meanwhile is not looked into."""
    found: set[tuple[int, int]] = set()

    def note(info: os.stat_result) -> None:
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            found.add((info.st_dev, info.st_ino))

    for path in covered:
        try:
            # a covered path in a linked folder (a package, say) is looked at where the link
            # leads, each link's text read and none opened through; the path itself is not
            # followed
            *folders, name = [p for p in str(path).split("/") if p]
            inner = f"{walk('/', folders).strip('/')}/{name}".lstrip("/")
            info = lstat_below("/", inner)
        except (OSError, ValueError):
            continue
        if info.st_dev not in devices:
            continue
        if not stat.S_ISDIR(info.st_mode):
            note(info)
            continue
        try:
            level = stats_below("/", inner)
        except OSError:
            continue
        for name, entry in level.items():
            note(entry)
            if stat.S_ISDIR(entry.st_mode):
                with contextlib.suppress(OSError):
                    for below in stats_below("/", f"{inner}/{name}").values():
                        note(below)
    return found


def _second_names(root: Path, linked: set[tuple[int, int]]) -> list[tuple[Path, tuple[int, int]]]:
    """Every other name in ``root`` of a file in ``linked`` (a hard link made before the run
    would otherwise let a process write a policy or read a key through it), by a walk bounded
    like the others that skips nothing but symlinks, through descriptors."""
    base = str(root)
    out: list[tuple[Path, tuple[int, int]]] = []
    pending, visited = [("", 0)], 0
    while pending and visited < WALK_MAX_DIRS:
        rel, depth = pending.pop()
        visited += 1
        try:
            entries = stats_below(base, rel or ".")
        except OSError:
            continue
        for name, info in entries.items():
            path = f"{rel}/{name}" if rel else name
            if stat.S_ISDIR(info.st_mode):
                if depth + 1 < WALK_MAX_DEPTH:
                    pending.append((path, depth + 1))
            elif stat.S_ISREG(info.st_mode):
                key = (info.st_dev, info.st_ino)
                if key in linked:
                    out.append((root / path, key))
    return out


def _pins(covered: list[Path], writable: list[Path], shut: list[Path]) -> list[Path]:
    """The folders between a writable root and each path covered inside it, each to be bound
    onto itself: a mount point cannot be renamed, so the process cannot move a hidden home (or a
    read-only package) aside and plant another where proctor looks for it. A folder inside a
    hidden or read-only one (``shut``) is left alone: binding it would open it again."""
    pins: list[Path] = []
    for path in covered:
        for root in writable:
            if path == root or not _inside(path, root):
                continue
            folder = path.parent
            while folder != root and _inside(folder, root):
                if folder not in pins and not any(_inside(folder, h) for h in shut):
                    pins.append(folder)
                folder = folder.parent
    return pins


def _config_named(root: Path, code: Mapping[str, list[str]]) -> list[Path]:
    """What the config of each repository names (:func:`config_refs`), given the host code of
    each ``.git`` (:func:`host_code`)."""
    out: list[Path] = []
    for dot_git, rels in code.items():
        top = root / dot_git[: -len(".git")] if dot_git != ".git" else root
        for rel in rels:
            if rel.rsplit("/", 1)[-1] in ("config", "config.worktree"):
                out += config_refs(root, rel, top)
    return out


def run_sandbox(
    workspace: Workspace,
    *,
    environ: Mapping[str, str],
    env: Mapping[str, str],
    cwd: Path,
    network: bool,
    argv0: str | None = None,
) -> tuple[SandboxSpec, Sweep]:
    """The spec of one process call in ``workspace`` (its roots included), and its sweep.

    A proctor home or receipt folder that lies inside a writable root and does not exist yet is
    created (0700, as proctor creates it), so it can be hidden: a process must not plant a
    signing key where proctor would load one, nor a receipt store. A signing key, a rollback
    journal or quick-check mark of the run database that is absent is swept if the process
    creates it.
    """
    hidden, homes, proctor_homes = host_hidden(environ)
    writable = [
        r
        for r in _unique([workspace.root, *workspace.roots.values()])
        if not any(_inside(r, h) for h in hidden)
    ]
    read_only: list[Path] = []
    named: list[Path] = []  # what the repositories' configs name: hooks folders, includes
    # a file's times come from the kernel's coarse clock, which may lag this one by a tick
    sweep = Sweep(git_since_ns=time.time_ns() - _CLOCK_LAG_NS)
    for root in writable:
        names = _top_names(root)
        sweep.before[root] = names
        covered: set[str] = set()
        for rel in sorted(names):
            top = rel.split("/")[0]
            if top in covered:
                continue  # inside a folder already covered whole
            if authority_reason(rel) is not None:
                covered.add(rel)
                (hidden if top == ".proctor" else read_only).append(root / rel)
            elif "/" not in rel and rel != ".git" and sensitive_reason(rel) is not None:
                covered.add(rel)
                hidden.append(root / rel)
        if ".proctor" in covered:
            # proctor's state folder is hidden whole (an empty read-only folder inside): the
            # process can plant nothing there, so the sweep never removes what proctor itself
            # adds meanwhile (another run's seal, a sibling child's locks)
            sweep.state_shut |= {root}
        # below the top level: hidden unless a read-only or hidden folder covers it already
        hidden += [root / rel for rel in _deep_sensitive(root) if rel.split("/")[0] not in covered]
        # git host code (.git/config, hooks, commondir ... at any depth): read-only while it
        # exists, removed afterwards when the process made it
        found, partial = git_entries(root)
        code = {dot_git: host_code(root, dot_git) for dot_git in found}
        git_code = frozenset(rel for rels in code.values() for rel in rels)
        sweep.git[root] = git_code
        if partial:
            sweep.git_partial |= {root}
        read_only += [root / rel for rel in sorted(git_code)]
        named += _config_named(root, code)
        if root != workspace.root:
            # another project the run reaches: its packages and tools' code-running config
            # at any depth, found as the workspace's own are (those come with its settings)
            read_only += [root / rel for rel in sorted(discovered(root))]
    read_only += [workspace.root / rel for rel in sorted(workspace.authority_files)]
    keys = _unique(_settings(environ, "PROCTOR_SIGNING_KEY"))
    keys += _unique(
        db + suffix
        for db in _settings(environ, "PROCTOR_DATABASE_PATH")
        for suffix in _DB_PLANTABLE
    )
    folders = [*proctor_homes, *_unique(_settings(environ, "PROCTOR_RECEIPT_DIR"))]
    for path in _unique(named):
        if any(_inside(path, r) for r in writable):
            if os.path.lexists(path):
                read_only.append(path)
            else:
                sweep.absent += (path,)  # a hooks folder or include the process must not make
    for path in [*folders, *keys]:
        if not any(_inside(path, r) for r in writable) or os.path.lexists(path):
            continue
        if path in folders:
            # created (as proctor creates them) so they can be hidden: a process must not
            # plant a home with a key of its choosing, nor a receipt store
            with contextlib.suppress(OSError):
                os.makedirs(path, mode=0o700, exist_ok=True)
        else:
            # a key proctor would load but never creates: removed if the process plants one
            # (proctor's own state files, created as it runs, are never swept)
            sweep.absent += (path,)
    spec_env = dict(env)
    if "TMPDIR" in spec_env:
        spec_env["TMPDIR"] = "/tmp"  # the host's may be read-only or hidden in here
    # a file covered here that has another name in a writable root is covered there too
    devices = set()
    for root in writable:
        with contextlib.suppress(OSError):
            devices.add(os.stat(root).st_dev)
    hidden_links = _linked_files(hidden, devices)
    ro_links = _linked_files(read_only, devices) - hidden_links
    if hidden_links or ro_links:
        for root in writable:
            for path, key in _second_names(root, hidden_links | ro_links):
                (hidden if key in hidden_links else read_only).append(path)
    shown = [p for p in _unique(read_only) if not any(_inside(p, h) for h in hidden)]
    pins = _pins([*hidden, *shown, *sweep.absent], writable, [*hidden, *shown])
    system, links = system_view()
    tools = toolchains(
        env=env,
        argv0=argv0,
        cwd=cwd,
        workspace_root=workspace.root,
        declared=declared_reads(workspace.root),
        shown=[*system, *writable],
        homes=account_homes(environ),
        hidden=hidden,
    )
    if network:
        resolver = _real("/etc/resolv.conf")  # a link into /run on systemd-resolved hosts
        if resolver is not None and not any(_inside(resolver, f) for f in [*system, *tools]):
            tools.append(resolver.parent)
    hidden += etc_secrets() + toolchain_secrets(tools)
    # only what lies in a folder the sandbox shows needs hiding: the rest is absent already
    mounted = [*system, *tools, *writable, *shown]
    spec = SandboxSpec(
        cwd=cwd,
        writable=tuple(writable) + tuple(pins),
        read_only=tuple(shown),
        hidden=tuple(h for h in dict.fromkeys(hidden) if any(_inside(h, m) for m in mounted)),
        scratch=tuple(h for h in homes if h not in hidden),
        system=tuple(system),
        links=tuple(links),
        toolchains=tuple(tools),
        network=network,
        env=spec_env,
    )
    return spec, sweep

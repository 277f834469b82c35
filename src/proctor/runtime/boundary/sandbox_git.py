"""Git settings a sandboxed process must not leave for the host's ``git`` (``docs/sandbox.md``).

The person's own ``git``, run later in a workspace outside proctor, runs programs that a
repository's files name: hooks, and the commands of its config (``core.fsmonitor``, filter and
diff drivers, ``core.hooksPath`` ...). A process can write the workspace, so everything in a
git folder that can bring such code in is **host code**:

- ``config``, ``config.worktree`` and ``hooks``: the code itself;
- ``commondir``: makes git read the config and hooks of another folder (one the process
  wrote); ``modules`` and ``worktrees``: the git folders of submodules and linked worktrees,
  each with a config and hooks of its own;
- a ``.git`` that is a file (``gitdir: ...``) or a link: it points git at a git folder
  anywhere, named anything.

Git visits nested repositories too: ``git status`` recurses into every submodule (a gitlink in
the index, which a process may write) and runs its config. So for every ``.git`` of a writable
root (:func:`git_entries`: found by a walk bounded like the others, and every gitlink's at any
depth, dependency folders included), the host code that exists before the process starts is
bound read-only, and the host code it creates is removed afterwards (:func:`removable`), except
the config ``git init`` writes (:func:`inert_config`): a command may make a new repository, not
put a program in one.

A repository's own config may also name a file or folder in the worktree: ``core.hooksPath``
(husky's ``.husky/_``), an ``include.path``. What those name (:func:`config_refs`) is host code
as well: read-only when it exists, removed if the process creates it.

Every look here is host-side path work on a tree a process may have changed, so it goes
through directory descriptors from the root (:mod:`.fds`): no link is followed on the way, a
``.git`` file or link is followed (its text read, links on the way resolved by reading them,
never by opening through them) only to a git folder inside the root, a config outside the root
is named but never read, and git lists an index from a descriptor of its folder. A pointer or
link a process plants toward a repository elsewhere therefore never makes proctor look into
it, nor remove its hooks or config.

Not host code: ``info/attributes`` (and ``.gitattributes``) only choose drivers the config
defines, and the built-in attributes run nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from proctor.runtime.boundary.fds import (
    DIR_FLAGS,
    kinds_below,
    lstat_below,
    open_below,
    parent_of,
    read_below,
    walk,
)
from proctor.runtime.boundary.rules import WALK_MAX_DEPTH, WALK_MAX_DIRS, WALK_SKIP

__all__ = [
    "GIT_ISOLATED_ENV",
    "HOST_CODE",
    "config_refs",
    "fresh",
    "git_entries",
    "gitlinks",
    "host_code",
    "inert_config",
    "removable",
]

HOST_CODE = ("config", "config.worktree", "commondir", "hooks", "modules", "worktrees")
"""The entries of a git folder that bring code the host's git runs (see the module)."""

# Keys ``git init`` and ``git clone`` write, and the identity a commit takes: none of them
# names a program (a remote's url is fetched from only when a person asks, and git refuses the
# transports that run one, ``ext::``, unless told otherwise).
_INERT_KEYS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.logallrefupdates",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "extensions.objectformat",
        "user.name",
        "user.email",
        "remote.*.url",
        "remote.*.fetch",
        "branch.*.remote",
        "branch.*.merge",
    }
)
_SECTION = re.compile(r'\[([A-Za-z]+)(?: "([A-Za-z0-9._/-]+)")?\]')
# A value without quotes, escapes, comments or a continuation: git reads it as written.
_ENTRY = re.compile(r"([A-Za-z][A-Za-z0-9-]*)[ \t]*=[ \t]*([^\"\\;#\x00-\x1f\x7f]*)")
_MAX_CONFIG = 64 * 1024
_GITLINK = "160000"
GIT_ISOLATED_ENV = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
}
"""What every git proctor runs on the host starts from: a fixed locale, no system or global
config, no prompt, no optional lock (a read never writes the index). The caller adds a
``HOME`` and ``XDG_CONFIG_HOME`` of its own (:mod:`proctor.runtime.tools.git_run` too)."""
# git run on the host only to list an index: no config of the user's, nothing the
# repository's config names (fsmonitor, hooks) run
_LIST_ENV = {
    **GIT_ISOLATED_ENV,
    "HOME": "/nonexistent",
    "XDG_CONFIG_HOME": "/nonexistent",
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "core.fsmonitor",
    "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath",
    "GIT_CONFIG_VALUE_1": "/dev/null",
}
_LISTED: dict[str, tuple[tuple[int, ...], frozenset[str]]] = {}
"""The gitlinks of each index seen, by its path, kept while the index is unchanged."""
_NAMED: dict[str, tuple[tuple[int, ...], tuple[tuple[str, str], ...]]] = {}
"""The paths each config seen names (``core.hookspath``, includes), kept while it is unchanged."""
_MAX_INCLUDES = 10
_MAX_NAMED_CONFIG = 1024 * 1024  # a config larger than this is not read for what it names
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def inert_config(text: str) -> bool:
    """Whether a git config holds only keys that name no program (what ``git init`` and
    ``git clone`` write: ``core.bare``, ``remote.<name>.url`` ..., and ``user.name`` and
    ``user.email``), in the plainest syntax: a ``[section]`` or ``[section "name"]`` line, a
    ``key = value`` line with no quote, backslash or comment, a blank or comment line. Any other
    line (an include, a continuation, an odd subsection name) makes it not inert, so git cannot
    read a key there that this reading missed."""
    section = ""
    for raw in text.split("\n"):
        line = raw.rstrip("\r").strip(" \t")
        if not line or line[0] in "#;":
            continue
        head = _SECTION.fullmatch(line)
        if head is not None:
            section = head.group(1).lower() + (".*" if head.group(2) is not None else "")
            continue
        entry = _ENTRY.fullmatch(line)
        if entry is None or not section:
            return False
        if f"{section}.{entry.group(1).lower()}" not in _INERT_KEYS:
            return False
    return True


def git_entries(root: Path) -> tuple[list[str], bool]:
    """The root-relative path of every ``.git`` of ``root`` (the top level's included): those
    a walk finds (bounded to ``WALK_MAX_DIRS`` folders and ``WALK_MAX_DEPTH`` levels, following
    no link, skipping ``.git``, ``.proctor`` and dependency folders), and, at any depth, that of
    every gitlink in the index of a repository found so (the nested repositories the host's git
    visits), each existing now; and whether the walk stopped at its bound of folders (then what
    it finds depends on what else the folders hold).

    Every folder is listed through descriptors (:func:`~.fds.kinds_below`): a folder swapped
    for a link meanwhile is not entered, and nothing outside ``root`` is listed."""
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
        for name, kind in kinds.items():
            if name == ".git":
                found.append(f"{rel}/.git" if rel else ".git")
            elif depth + 1 < WALK_MAX_DEPTH and name not in WALK_SKIP and kind == stat.S_IFDIR:
                pending.append((f"{rel}/{name}" if rel else name, depth + 1))
    partial = bool(pending)
    seen = set(found)
    for dot_git in found:  # grows as nested repositories' own gitlinks are found
        top = dot_git[: -len(".git")]
        git_dir = _git_folder(root, dot_git)
        if git_dir is None:
            continue
        for link in sorted(gitlinks(root, git_dir)):
            nested = f"{top}{link}/.git"
            if nested not in seen and _lexists(root, nested):
                seen.add(nested)
                found.append(nested)
    return found, partial


def _lexists(root: Path, rel: str) -> bool:
    """Whether ``root/rel`` exists, reached with no link on the way (itself may be one)."""
    try:
        lstat_below(str(root), rel)
    except OSError:
        return False
    return True


def _git_folder(root: Path, dot_git: str) -> str | None:
    """The root-relative git folder of a ``.git``: itself when it is a folder, else the one it
    points to when that lies in ``root`` (:func:`_pointed`)."""
    try:
        info = lstat_below(str(root), dot_git)
    except OSError:
        return None
    return dot_git if stat.S_ISDIR(info.st_mode) else _pointed(root, dot_git)


def fresh(root: Path, rel: str, since_ns: int) -> bool:
    """Whether host code ``rel``, or the git folder that holds it, was created, renamed or
    changed at or after ``since_ns`` (its change time, which no process can set back)."""
    paths = [rel] if rel.rsplit("/", 1)[-1] == ".git" else [rel, rel.rsplit("/", 1)[0]]
    for path in paths:
        try:
            if lstat_below(str(root), path).st_ctime_ns >= since_ns:
                return True
        except OSError:
            continue
    return False


def gitlinks(root: Path, git_dir: str) -> frozenset[str]:
    """The paths of the gitlinks (submodules) in the index of the git folder ``git_dir``
    (root-relative), as the host's ``git ls-files`` lists them with nothing of the repository's
    run; none when there is no index, no git, or git cannot read it. Kept while the index is
    unchanged, so a call pays for a listing only after git wrote the index; never a listing git
    failed to make (a config git cannot read may be removed meanwhile, and the host's git then
    reads the index).

    git is given the folder and the index as descriptors opened with no link on the way (its
    working folder ``/proc/self/fd/<n>``, ``GIT_INDEX_FILE`` another): a folder swapped for a
    link meanwhile sends it nowhere else."""
    try:
        folder = open_below(str(root), git_dir, DIR_FLAGS)
    except OSError:
        return frozenset()
    try:
        try:
            index = os.open("index", os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=folder)
        except OSError:
            return frozenset()
        try:
            info = os.fstat(index)
            if not stat.S_ISREG(info.st_mode):
                return frozenset()
            mark = _mark(info)
            key = f"{root}/{git_dir}/index"
            known = _LISTED.get(key)
            if known is not None and known[0] == mark:
                return known[1]
            env = {"GIT_DIR": ".", "GIT_INDEX_FILE": f"/proc/self/fd/{index}"}
            done = _git(["ls-files", "--stage", "-z"], env, f"/proc/self/fd/{folder}", (index,))
        finally:
            os.close(index)
    finally:
        os.close(folder)
    if done is None:
        return frozenset()
    links = frozenset(
        line.split("\t", 1)[1]
        for line in done.stdout.decode("utf-8", "surrogateescape").split("\0")
        if line.startswith(_GITLINK + " ") and "\t" in line
    )
    if done.returncode == 0:
        _LISTED[key] = (mark, links)
    return links


def _mark(info: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is written or replaced: a cached reading of it is kept while
    this is the same."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def config_refs(root: Path, config: str, work_tree: Path) -> list[Path]:
    """What the config ``root/config`` of a repository names that git runs or reads as config:
    the ``core.hooksPath`` folder (a relative one from ``work_tree``) and every ``include.path``
    and ``includeIf.<condition>.path`` file (a relative one from the including file's folder),
    through includes of includes (at most 10 files), as the host's ``git config`` reads each.

    Only a file inside ``root`` is read (through descriptors, :func:`~.fds.read_below`): an
    include that leads out of it (``..``, an absolute path, a link) is named but not opened."""
    out: list[Path] = []
    first = root / config
    pending, seen = [first], {first}
    while pending and len(seen) <= _MAX_INCLUDES:
        current = pending.pop()
        for key, value in _named(root, current):
            path = Path(os.path.expanduser(value))
            if key == "core.hookspath":
                out.append(work_tree / path)
                continue
            included = current.parent / path
            out.append(included)
            if included not in seen:
                seen.add(included)
                pending.append(included)
    return out


def _inside_rel(root: Path, path: Path) -> str | None:
    """``path`` relative to ``root`` as the kernel would resolve it (every link's text read
    through descriptors, :func:`~.fds.walk`), or None when it leads out of ``root``."""
    base = str(root)
    try:
        real = walk("/", [p for p in str(path).split("/") if p])
    except OSError:
        return None
    if real == base:
        return "."
    if not real.startswith(base.rstrip("/") + "/"):
        return None
    return real[len(base.rstrip("/")) + 1 :]


def _named(root: Path, config: Path) -> tuple[tuple[str, str], ...]:
    rel = _inside_rel(root, config)
    if rel is None or rel == ".":
        return ()
    try:
        info = lstat_below(str(root), rel)
        if not stat.S_ISREG(info.st_mode):
            return ()
        mark = _mark(info)
        key = f"{root}/{rel}"
        known = _NAMED.get(key)
        if known is not None and known[0] == mark:
            return known[1]
        data = read_below(str(root), rel, _MAX_NAMED_CONFIG)
    except OSError:
        return ()
    if len(data) > _MAX_NAMED_CONFIG:
        return ()
    done = _git(["config", "--no-includes", "--file", "-", "--list", "-z"], {}, "/", (), data)
    if done is None:
        return ()
    named: list[tuple[str, str]] = []
    for item in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        key_, _, value = item.partition("\n")
        key_ = key_.lower()
        wanted = key_ in ("core.hookspath", "include.path")
        if (wanted or (key_.startswith("includeif.") and key_.endswith(".path"))) and value:
            named.append((key_, value))
    if done.returncode == 0:
        _NAMED[key] = (mark, tuple(named))
    return tuple(named)


def _git(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    fds: tuple[int, ...] = (),
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes] | None:
    """Run the host's git with nothing of a repository's run (see ``_LIST_ENV``), in ``cwd``
    (a ``/proc/self/fd/<n>`` there is entered before git starts), ``fds`` kept open for it."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        return subprocess.run(
            [git, *argv],
            cwd=cwd,
            env={**_LIST_ENV, **env},
            input=stdin if stdin is not None else b"",
            capture_output=True,
            timeout=60,
            check=False,
            pass_fds=fds,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def host_code(root: Path, dot_git: str) -> list[str]:
    """The host code (root-relative) of one ``.git`` that exists now: each :data:`HOST_CODE`
    entry in it; or, when it is a file or a link, the ``.git`` itself and the host code of the
    git folder it points to when that lies in the root too (``git init --separate-git-dir``).
    Looked at through descriptors: a link on the way is not followed (nothing is found)."""
    base = str(root)
    try:
        if stat.S_ISDIR(lstat_below(base, dot_git).st_mode):
            names = kinds_below(base, dot_git)
            return [f"{dot_git}/{name}" for name in HOST_CODE if name in names]
    except OSError:
        return []
    out = [dot_git]
    target = _pointed(root, dot_git)
    if target is not None and target != ".":
        try:
            names = kinds_below(base, target)
        except OSError:
            return out
        out += [f"{target}/{name}" for name in HOST_CODE if name in names]
    return out


def _pointed(root: Path, dot_git: str) -> str | None:
    """The root-relative git folder a ``.git`` file (``gitdir: ...``) or link names, when it is
    a folder inside ``root``: the pointer is read through descriptors and followed as the
    kernel would (:func:`~.fds.walk`, which reads each link's text and opens none), so a
    pointer out of ``root`` is never looked into."""
    base = str(root)
    try:
        info = lstat_below(base, dot_git)
        if stat.S_ISLNK(info.st_mode):
            with parent_of(base, dot_git) as (fd, name):
                named = os.readlink(name, dir_fd=fd)
        else:
            head = read_below(base, dot_git, 4096)[:4096].decode("utf-8", "replace")
            if not head.startswith("gitdir: "):
                return None
            named = head[len("gitdir: ") :].split("\n", 1)[0].rstrip("\r")
    except (OSError, ValueError):
        return None
    if not named:
        return None
    parent = dot_git.rsplit("/", 1)[0] if "/" in dot_git else ""
    start = named if named.startswith("/") else f"{base}/{parent}/{named}"
    rel = _inside_rel(root, Path(start))
    if rel is None:
        return None
    try:
        if rel != "." and not stat.S_ISDIR(lstat_below(base, rel).st_mode):
            return None
    except OSError:
        return None
    return rel


def removable(root: Path, rel: str) -> list[str]:
    """What to remove of host code ``rel`` that a process created: all of it, except a config
    :func:`inert_config` accepts (a regular file) and, in a new ``hooks`` folder, the
    ``*.sample`` files git never runs. Read through descriptors: a link on the way to ``rel``
    makes it nothing to remove here (nothing outside the root is looked at)."""
    base = str(root)
    try:
        info = lstat_below(base, rel)
    except OSError:
        return []
    name = rel.rsplit("/", 1)[-1]
    if name == "config" and stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_CONFIG:
        try:
            text = read_below(base, rel, _MAX_CONFIG).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return [rel]
        return [] if len(text) <= _MAX_CONFIG and inert_config(text) else [rel]
    if name == "hooks" and stat.S_ISDIR(info.st_mode):
        try:
            kinds = kinds_below(base, rel)
        except OSError:
            return [rel]
        return [
            f"{rel}/{n}"
            for n, kind in kinds.items()
            if not (n.endswith(".sample") and kind == stat.S_IFREG)
        ]
    return [rel]

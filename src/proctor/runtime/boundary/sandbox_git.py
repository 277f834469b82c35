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
    it finds depends on what else the folders hold)."""
    found: list[str] = []
    pending: list[tuple[str, int]] = [("", 0)]
    visited = 0
    while pending and visited < WALK_MAX_DIRS:
        rel, depth = pending.pop()
        visited += 1
        try:
            with os.scandir(root / rel if rel else root) as entries:
                for entry in entries:
                    name = entry.name
                    if name == ".git":
                        found.append(f"{rel}/.git" if rel else ".git")
                    elif (
                        depth + 1 < WALK_MAX_DEPTH
                        and name not in WALK_SKIP
                        and entry.is_dir(follow_symlinks=False)
                    ):
                        pending.append((f"{rel}/{name}" if rel else name, depth + 1))
        except OSError:
            continue
    partial = bool(pending)
    seen = set(found)
    for dot_git in found:  # grows as nested repositories' own gitlinks are found
        top = dot_git[: -len(".git")]
        git_dir = root / dot_git
        if not git_dir.is_dir() or git_dir.is_symlink():
            git_dir = _pointed(git_dir) or git_dir
        for link in sorted(gitlinks(git_dir, root / top if top else root)):
            nested = f"{top}{link}/.git"
            if nested not in seen and os.path.lexists(root / nested):
                seen.add(nested)
                found.append(nested)
    return found, partial


def fresh(root: Path, rel: str, since_ns: int) -> bool:
    """Whether host code ``rel``, or the git folder that holds it, was created, renamed or
    changed at or after ``since_ns`` (its change time, which no process can set back)."""
    paths = [rel] if rel.rsplit("/", 1)[-1] == ".git" else [rel, rel.rsplit("/", 1)[0]]
    for path in paths:
        try:
            if os.lstat(root / path).st_ctime_ns >= since_ns:
                return True
        except OSError:
            continue
    return False


def gitlinks(git_dir: Path, work_tree: Path) -> frozenset[str]:
    """The paths of the gitlinks (submodules) in the index of ``git_dir``, as the host's
    ``git ls-files`` lists them with nothing of the repository's run; none when there is no
    index, no git, or git cannot read it. Kept while the index is unchanged, so a call pays for
    a listing only after git wrote the index; never a listing git failed to make (a config git
    cannot read may be removed meanwhile, and the host's git then reads the index)."""
    index = git_dir / "index"
    try:
        info = os.lstat(index)
    except OSError:
        return frozenset()
    if not stat.S_ISREG(info.st_mode):
        return frozenset()
    mark = _mark(info)
    known = _LISTED.get(str(index))
    if known is not None and known[0] == mark:
        return known[1]
    env = {"GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(work_tree)}
    done = _git(["ls-files", "--stage", "-z"], env, work_tree)
    if done is None:
        return frozenset()
    links = frozenset(
        line.split("\t", 1)[1]
        for line in done.stdout.decode("utf-8", "surrogateescape").split("\0")
        if line.startswith(_GITLINK + " ") and "\t" in line
    )
    if done.returncode == 0:
        _LISTED[str(index)] = (mark, links)
    return links


def _mark(info: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is written or replaced: a cached reading of it is kept while
    this is the same."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def config_refs(config: Path, work_tree: Path) -> list[Path]:
    """What a repository's config names that git runs or reads as config: the
    ``core.hooksPath`` folder (a relative one from ``work_tree``) and every ``include.path``
    and ``includeIf.<condition>.path`` file (a relative one from the including file's folder),
    through includes of includes (at most 10 files), as the host's ``git config`` reads each."""
    out: list[Path] = []
    pending, seen = [config], {config}
    while pending and len(seen) <= _MAX_INCLUDES:
        current = pending.pop()
        for key, value in _named(current):
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


def _named(config: Path) -> tuple[tuple[str, str], ...]:
    try:
        info = os.stat(config)
    except OSError:
        return ()
    if not stat.S_ISREG(info.st_mode):
        return ()
    mark = _mark(info)
    known = _NAMED.get(str(config))
    if known is not None and known[0] == mark:
        return known[1]
    done = _git(["config", "--file", str(config), "--list", "-z"], {}, config.parent)
    if done is None:
        return ()
    named: list[tuple[str, str]] = []
    for item in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        key, _, value = item.partition("\n")
        key = key.lower()
        wanted = key in ("core.hookspath", "include.path")
        if (wanted or (key.startswith("includeif.") and key.endswith(".path"))) and value:
            named.append((key, value))
    if done.returncode == 0:
        _NAMED[str(config)] = (mark, tuple(named))
    return tuple(named)


def _git(
    argv: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[bytes] | None:
    """Run the host's git with nothing of a repository's run (see ``_LIST_ENV``)."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        return subprocess.run(
            [git, *argv],
            cwd=cwd,
            env={**_LIST_ENV, **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def host_code(root: Path, dot_git: str) -> list[str]:
    """The host code (root-relative) of one ``.git`` that exists now: each :data:`HOST_CODE`
    entry in it; or, when it is a file or a link, the ``.git`` itself and the host code of the
    git folder it points to when that lies in the root too (``git init --separate-git-dir``)."""
    path = root / dot_git
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return [f"{dot_git}/{name}" for name in HOST_CODE if os.path.lexists(path / name)]
    except OSError:
        return []
    out = [dot_git]
    target = _pointed(path)
    if target is not None and target != root and target.is_relative_to(root):
        rel = target.relative_to(root).as_posix()
        out += [f"{rel}/{name}" for name in HOST_CODE if os.path.lexists(target / name)]
    return out


def _pointed(dot_git: Path) -> Path | None:
    """The real path of the git folder a ``.git`` file (``gitdir: ...``) or link names."""
    try:
        if dot_git.is_symlink():
            target = Path(os.path.realpath(dot_git))
        else:
            with open(dot_git, "rb") as handle:
                head = handle.read(4096).decode("utf-8", "replace")
            if not head.startswith("gitdir: "):
                return None
            named = head[len("gitdir: ") :].split("\n", 1)[0].rstrip("\r")
            if not named:
                return None
            target = Path(os.path.realpath(dot_git.parent / named))
    except (OSError, ValueError):
        return None
    return target if target.is_dir() else None


def removable(root: Path, rel: str) -> list[str]:
    """What to remove of host code ``rel`` that a process created: all of it, except a config
    :func:`inert_config` accepts (a regular file) and, in a new ``hooks`` folder, the
    ``*.sample`` files git never runs."""
    path = root / rel
    try:
        info = os.lstat(path)
    except OSError:
        return []
    name = rel.rsplit("/", 1)[-1]
    if name == "config" and stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_CONFIG:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return [rel]
        return [] if inert_config(text) else [rel]
    if name == "hooks" and stat.S_ISDIR(info.st_mode):
        try:
            with os.scandir(path) as entries:
                return [
                    f"{rel}/{e.name}"
                    for e in entries
                    if not (e.name.endswith(".sample") and e.is_file(follow_symlinks=False))
                ]
        except OSError:
            return [rel]
    return [rel]

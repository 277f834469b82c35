"""How the ``git.*`` tools run git: read-only, bounded, and with nothing of the repository's
own code or configuration executed.

A repository's ``.git/config`` is written by whoever made the repository, and git runs programs
it names: a pager, an external diff, textconv and filter drivers, an fsmonitor hook, hooks. Every
git call here:

- runs ``git`` with an exact argv (no shell) and an environment of its own: ``PATH`` and a fixed
  locale only, ``HOME`` and ``XDG_CONFIG_HOME`` an empty temporary folder, no system or global
  config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``), no prompts, no optional
  locks (so a read never writes the index), ``GIT_DIR``, ``GIT_COMMON_DIR`` and
  ``GIT_WORK_TREE`` the workspace's own (a ``core.worktree`` in the config cannot point
  elsewhere, nor a ``commondir`` file in ``.git`` at another repository), no parent repository;
- refuses a repository whose history is not all its own (a ``.git/commondir`` file,
  ``.git/objects`` not a real folder, an ``objects/info/alternates`` or ``http-alternates``
  file): git would read the refs or objects of whatever repository those name, outside the
  workspace (a command the run starts may write them: the sandbox keeps only git's host code,
  ``config``, ``hooks``, ``commondir`` ..., read-only, never ``objects``);
- passes config overrides as ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_<n>`` /
  ``GIT_CONFIG_VALUE_<n>`` pairs, which win over every config file and keep a name and its
  value apart (a ``-c name=value`` is split at its first ``=``, so a driver named ``a=b``
  would escape its override): hooks at ``/dev/null``, no pager, no fsmonitor, no external diff,
  no colour, no signature checks, submodules shown by commit only, and, for every filter, diff
  and merge driver the repository's config names, an empty command (git then runs none);
- passes ``--no-ext-diff --no-textconv`` where git would diff;
- keeps at most ``max_bytes`` of output and kills git past that or past its timeout.

Refusals: ``not_a_repository`` (the workspace root has no ``.git`` folder of its own, or one
whose history lives elsewhere), ``git_failed`` (git exited non-zero; its first line of
complaint, host paths removed), ``git_timeout``, ``git_unavailable`` (no ``git`` on the PATH).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from proctor.contracts.values import dataclass
from proctor.core.paths import content_reason, sensitive_reason
from proctor.errors import ToolFailed
from proctor.runtime.boundary.fds import DIR_FLAGS, open_below
from proctor.runtime.boundary.sandbox_git import GIT_ISOLATED_ENV
from proctor.runtime.boundary.workspace import Workspace

__all__ = ["GitOutput", "chunks_without_keys", "hidden", "run_git"]

_TIMEOUT = 30.0
# Config keys whose value git runs as a program (per driver name): emptied on every call.
_DRIVER_KEYS = re.compile(
    r"^(filter\.(?P<f>.+)\.(clean|smudge|process)|diff\.(?P<d>.+)\.(command|textconv)"
    r"|merge\.(?P<m>.+)\.driver|gpg\.(?P<g>.+)\.program)$",
    re.IGNORECASE,
)
_FIXED = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.untrackedCache=false",
    "core.sshCommand=",
    "core.askPass=",
    "core.editor=",
    "credential.helper=",
    "diff.external=",
    "gpg.program=",
    "log.showSignature=false",
    "color.ui=false",
    "status.showUntrackedFiles=all",
    "submodule.recurse=false",
    "protocol.allow=never",
    "diff.submodule=short",
    "status.submoduleSummary=false",
)
_ALTERNATES = ("alternates", "http-alternates")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class GitOutput:
    """What git printed (at most the bound) and whether more was cut."""

    data: bytes
    truncated: bool


def _git_dir(ws: Workspace) -> Path:
    """``root/.git``, a real folder whose history is all its own.

    Examined through descriptors with no-follow (``.git`` and ``.git/objects`` must be real
    folders, not links), so the answer is about these folders and not about where a link leads.

    Raises:
        ToolFailed: ``not_a_repository``: no ``.git`` folder, or one that borrows another
            repository's objects or refs (``commondir``, ``objects/info/alternates``).
    """
    try:
        fd = open_below(str(ws.root), ".git", DIR_FLAGS)
    except OSError as exc:
        raise ToolFailed(
            "the workspace is not the top of a git repository (it has no .git folder of its "
            "own; linked worktrees and submodules are not read)",
            code="not_a_repository",
        ) from exc
    try:
        foreign = _foreign(fd)
    finally:
        os.close(fd)
    if foreign:
        raise ToolFailed(
            f"the repository reads history from another one (.git/{foreign}); git tools read "
            "only the workspace's own repository",
            code="not_a_repository",
        )
    return ws.root / ".git"


def _foreign(git_fd: int) -> str | None:
    """The first entry of the ``.git`` folder open at ``git_fd`` that makes git read another
    repository, or None."""
    if _exists_in(git_fd, "commondir"):
        return "commondir"
    try:
        objects = os.open("objects", DIR_FLAGS | _NOFOLLOW, dir_fd=git_fd)
    except FileNotFoundError:
        return None  # git itself refuses a repository without objects
    except OSError:
        return "objects"  # a link (ELOOP / ENOTDIR) or unreadable
    try:
        for name in _ALTERNATES:
            if _exists_in(objects, f"info/{name}"):
                return f"objects/info/{name}"
    finally:
        os.close(objects)
    return None


def _exists_in(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # cannot be examined: treated as there
    return True


def _env(home: str, root: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        **GIT_ISOLATED_ENV,
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_DIR": str(root / ".git"),
        "GIT_COMMON_DIR": str(root / ".git"),
        "GIT_WORK_TREE": str(root),
        "GIT_CEILING_DIRECTORIES": str(root.parent),
    }


def _unavailable(exc: OSError) -> ToolFailed:
    """``git_unavailable``: no ``git`` on the PATH, or one that cannot be started."""
    return ToolFailed(
        f"git cannot be started ({exc.strerror or type(exc).__name__}); install git, or leave"
        " the git tools out of this run",
        code="git_unavailable",
    )


def _overrides(env: dict[str, str], root: Path) -> dict[str, str]:
    """``GIT_CONFIG_*`` pairs: the fixed ones, and an empty command for every driver the
    config names (each name kept whole, whatever characters its driver's name holds)."""
    try:
        listing = subprocess.run(
            ["git", "config", "--includes", "--list", "--name-only", "-z"],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolFailed(
            f"git ran past {_TIMEOUT:g} s listing the repository's config and was stopped",
            code="git_timeout",
        ) from None
    except OSError as exc:
        raise _unavailable(exc) from None
    pairs = [tuple(pair.split("=", 1)) for pair in _FIXED]
    for name in listing.stdout.decode("utf-8", "surrogateescape").split("\0"):
        lower = name.lower()
        if _DRIVER_KEYS.match(name):
            pairs.append((name, ""))
        if lower.startswith("filter.") and lower.endswith(".required"):
            pairs.append((name, "false"))
        if lower.startswith("pager."):
            pairs.append((name, "false"))
    out = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for index, (key, value) in enumerate(pairs):
        out[f"GIT_CONFIG_KEY_{index}"] = key
        out[f"GIT_CONFIG_VALUE_{index}"] = value
    return out


def _read_bounded(pipe: IO[bytes], keep: int, out: bytearray, over: threading.Event | None) -> None:
    """Keep the first ``keep`` bytes; past them, stop (``over`` set: git is killed) or, with
    no ``over``, read on and drop the rest so git never blocks on a full pipe."""
    with pipe:
        while chunk := pipe.read(65536):
            room = keep - len(out)
            if room > 0:
                out += chunk[:room]
            if len(chunk) > room and over is not None:
                over.set()
                return


def run_git(ws: Workspace, args: Sequence[str], *, max_bytes: int) -> GitOutput:
    """Run ``git <args>`` read-only in the workspace's repository, keeping ``max_bytes``.

    Raises:
        ToolFailed: ``not_a_repository``, ``git_failed``, ``git_timeout``,
            ``git_unavailable`` (no git to start).
    """
    _git_dir(ws)
    root = ws.root
    with tempfile.TemporaryDirectory(prefix="proctor-git-") as home:
        env = _env(home, root)
        env.update(_overrides(env, root))
        argv = ["git", "--no-pager", *args]
        try:
            proc = subprocess.Popen(
                argv,
                cwd=root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise _unavailable(exc) from None
        out, err, over = bytearray(), bytearray(), threading.Event()
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            threading.Thread(target=_read_bounded, args=(proc.stdout, max_bytes, out, over)),
            threading.Thread(target=_read_bounded, args=(proc.stderr, 4096, err, None)),
        ]
        for reader in readers:
            reader.daemon = True
            reader.start()
        readers[0].join(_TIMEOUT)
        timed_out = readers[0].is_alive()
        if over.is_set() or timed_out:
            proc.kill()
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        for reader in readers:
            reader.join(timeout=5)
    if timed_out:
        raise ToolFailed(f"git ran past {_TIMEOUT:g} s and was stopped", code="git_timeout")
    if code != 0 and not over.is_set():
        first = bytes(err).decode("utf-8", "replace").strip().splitlines()[:1]
        why = (first[0] if first else f"status {code}").replace(str(root), ".")
        raise ToolFailed(f"git refused: {why[:300]}", code="git_failed")
    return GitOutput(bytes(out), over.is_set())


def hidden(ws: Workspace, rel: str) -> bool:
    """Whether a repository path is one a run never sees: sensitive, or proctor's state."""
    if sensitive_reason(rel) is not None:
        return True
    top = rel.split("/", 1)[0]
    if top == ".proctor":
        return True
    return any(rel == s or rel.startswith(s + "/") for s in ws.state_files)


def chunks_without_keys(patch: str) -> tuple[str, int]:
    """``patch`` with every file's part that holds a private key block left out, and how many
    parts were left out (a key committed under an innocent name is still a key)."""
    parts = re.split(r"(?m)^(?=diff --git |diff --cc |diff --combined )", patch)
    kept = [p for p in parts if content_reason(p.encode("utf-8", "replace")) is None]
    return "".join(kept), len(parts) - len(kept)

"""The working tree's side of a ``git.diff``: shown only when it is bytes proctor may read.

Git reads working-tree files by name and follows nothing but its own rules: a tracked file
replaced by a hard link to ``.env`` or to ``.proctor/runs.sqlite`` is, to git, just a modified
file, and its patch would carry the secret. So a patch against the working tree is asked for
with ``--full-index`` and each file's part is kept only when the blob id git gives for the
working-tree side is the id of bytes proctor itself read of that file, through containment's
open (:func:`proctor.runtime.boundary.fds.open_below`: no symlink on the way, a regular file
with one link, no private key block) or, for a symlink, of its text. A part git read from any
other file, or that changed meanwhile, does not match and is left out (counted as hidden), as is
one whose working-tree bytes git converted (end-of-line attributes): the check is on content,
so a file swapped between the check and git's read is never shown either. A submodule's part
(mode ``160000``) names commits only and is kept.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat

from proctor.core.paths import content_reason
from proctor.runtime.boundary.fds import open_below, parent_of
from proctor.runtime.boundary.workspace import Workspace

__all__ = ["WORKTREE_FLAGS", "worktree_parts"]

WORKTREE_FLAGS = ["--full-index"]
"""What a patch against the working tree is asked for with (full blob ids on ``index``)."""

_MAX_FILE = 64 * 1024 * 1024  # larger working-tree files are not read: their part is left out
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_INDEX = re.compile(
    r"(?m)^index ([0-9a-f]{40}|[0-9a-f]{64})\.\.([0-9a-f]{40}|[0-9a-f]{64})(?: ([0-7]{6}))?$"
)
_GITLINK = re.compile(r"(?m)^(?:new file mode|new mode) 160000$")
_CONTENT = re.compile(r"(?m)^(@@|Binary files |GIT binary patch)")
_SPLIT = re.compile(r"(?m)^(?=diff --git |diff --cc |diff --combined )")


def _blob_id(data: bytes, width: int) -> str:
    algorithm = hashlib.sha1 if width == 40 else hashlib.sha256
    return algorithm(b"blob %d\0" % len(data) + data).hexdigest()


def _readable(ws: Workspace, rel: str) -> bytes | None:
    """The bytes a run may see at the working-tree path ``rel``: a regular file's content (one
    link, no key block) or a symlink's text; None for anything else."""
    root = str(ws.root)
    try:
        fd = open_below(root, rel, os.O_RDONLY | _NONBLOCK)
    except OSError:
        try:
            with parent_of(root, rel) as (dir_fd, name):
                if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    return os.fsencode(os.readlink(name, dir_fd=dir_fd))
        except OSError:
            pass
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size > _MAX_FILE:
            return None
        chunks, size = [], 0
        while chunk := os.read(fd, 1024 * 1024):
            chunks.append(chunk)
            size += len(chunk)
            if size > _MAX_FILE:
                return None
        data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if content_reason(data) is not None else data


def worktree_parts(ws: Workspace, patch: str, kept: list[str]) -> tuple[str, int]:
    """``patch`` (a ``--full-index`` diff against the working tree of the files ``kept``) with
    every file's part left out whose working-tree side is not bytes proctor read of one of
    those files; and how many parts were left out."""
    first = _INDEX.search(patch)
    width = len(first.group(2)) if first is not None else 0  # one repository, one hash
    allowed: set[str] = set()
    for rel in kept if width else ():
        data = _readable(ws, rel)
        if data is not None:
            allowed.add(_blob_id(data, width))
    parts = _SPLIT.split(patch)
    out, dropped = [], 0
    for part in parts:
        if not part.startswith("diff "):
            out.append(part)
            continue
        found = _INDEX.search(part)
        if found is None:
            keep = _CONTENT.search(part) is None  # a mode change, or a part cut short
        else:
            after = found.group(2)
            # a submodule's part names commits only ("Subproject commit ..."): no file's bytes
            gitlink = found.group(3) == "160000" or _GITLINK.search(part) is not None
            keep = gitlink or set(after) == {"0"} or after in allowed
        if keep:
            out.append(part)
        else:
            dropped += 1
    return "".join(out), dropped

"""``git.status``, ``git.log``, ``git.show`` and ``git.diff``: the workspace's history, read-only.

Each runs git through :func:`proctor.runtime.tools.git_run.run_git` (no hook, pager, external
diff, textconv or filter of the repository executed; bounded output). What a run sees goes
through the same rules as ``fs.*``:

- a sensitive path (``.env``, keys, credentials ...) or proctor's state is never listed, shown
  or diffed: ``git.status`` and ``git.log`` leave such entries out (``hidden`` counts them),
  ``git.diff`` and ``git.show`` restrict the patch to the other files, and any file's part of a
  patch that holds a private key block is left out too;
- ``git.show {rev, path}`` reads one file at a revision: the path is judged by containment
  like an ``fs.read`` of it, and its content is refused when it holds a private key block;
- a revision is a name, never an option or a ``rev:path`` (``rev_invalid``): it may not start
  with ``-`` and may not hold ``:`` or whitespace, and ``--end-of-options`` precedes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from proctor.core.paths import content_reason
from proctor.errors import RefusedCall, ToolFailed
from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.fs import PATH_SCHEMA
from proctor.runtime.tools.fsutil import os_errors_refused
from proctor.runtime.tools.git_run import chunks_without_keys, hidden, run_git
from proctor.runtime.tools.git_worktree import WORKTREE_FLAGS, worktree_parts

__all__ = ["git_tools"]

DEFAULT_MAX_BYTES = 256 * 1024
MAX_BYTES = 4 * 1024 * 1024
_MAX_FILES = 500
REV_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_./@{}~^+-]{0,255}$"
_REV = re.compile(REV_PATTERN)
_HASH = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?\x1f")
_REV_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": 256,
    "description": "a revision: a commit id, branch, tag, HEAD~2 ... (never an option)",
}
_BYTES_SCHEMA: dict[str, Any] = {"type": "integer", "minimum": 1024, "maximum": MAX_BYTES}
_FILES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["status", "path"],
        "properties": {"status": {"type": "string"}, "path": {"type": "string"}},
    },
}


def _rev(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not _REV.match(value):
        raise RefusedCall(
            f"{key} is not a revision name (it may not start with '-' or hold ':' or spaces); "
            "name a commit, branch or tag",
            code="rev_invalid",
            details={"argument": key},
        )
    return value


def _path(ctx: ToolContext, args: Mapping[str, Any], access: Access) -> str | None:
    path = args.get("path")
    if path is None:
        return None
    target = ctx.workspace.resolve(path, access)
    if target.root:
        raise RefusedCall(
            "git tools read the workspace's repository; the path is in another root",
            code="path_outside_workspace",
            details={"path": target.rel},
        )
    return target.rel


def _pathspec(rel: str | None) -> list[str]:
    return ["--", f":(literal){rel}"] if rel not in (None, ".") else ["--"]


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _paths_part(ctx: ToolContext, names: list[str]) -> tuple[list[str], int]:
    kept = [n for n in names if n and not hidden(ctx.workspace, n)]
    return kept, len([n for n in names if n]) - len(kept)


def _limit(args: Mapping[str, Any]) -> int:
    return int(args.get("max_bytes", DEFAULT_MAX_BYTES))


# -- git.status ----------------------------------------------------------------------------------


def _status(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    out = run_git(
        ctx.workspace,
        ["status", "--porcelain=v1", "-z", "--branch", "--no-renames", "--ignore-submodules=all"],
        max_bytes=_limit(args),
    )
    fields = _text(out.data).split("\0")
    branch = fields[0][3:] if fields and fields[0].startswith("## ") else None
    entries, hid = [], 0
    for field in fields[1 if branch is not None else 0 :]:
        if len(field) < 4:
            continue
        rel = field[3:]
        if hidden(ctx.workspace, rel.rstrip("/")):
            hid += 1
            continue
        entries.append({"index": field[0], "worktree": field[1], "path": rel})
    return {"branch": branch, "entries": entries, "hidden": hid, "truncated": out.truncated}


# -- git.log -------------------------------------------------------------------------------------

_LOG_FORMAT = "--format=%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%s"


def _records(text: str) -> list[str]:
    """Commit records; a separator inside a subject does not start a record of its own."""
    records: list[str] = []
    for part in text.split("\x1e"):
        if _HASH.match(part) or not records:
            records.append(part)
        else:
            records[-1] += "\x1e" + part
    return [r for r in records if r]


def _commit(ctx: ToolContext, record: str) -> dict[str, Any]:
    head, _, rest = record.partition("\0")
    fields = head.split("\x1f")
    fields += [""] * (6 - len(fields))
    names = rest.lstrip("\n").split("\0")
    files, hid = [], 0
    for status, rel in zip(names[0::2], names[1::2], strict=False):
        if hidden(ctx.workspace, rel):
            hid += 1
        elif rel:
            files.append({"status": status, "path": rel})
    return {
        "commit": fields[0],
        "parents": [p for p in fields[1].split(" ") if p],
        "author_name": fields[2],
        "author_email": fields[3],
        "author_date": fields[4],
        "subject": "\x1f".join(fields[5:]).rstrip("\n"),
        "files": files,
        "hidden_files": hid,
    }


def _log(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    rev = _rev(args, "rev")
    rel = _path(ctx, args, "list")
    argv = ["log", _LOG_FORMAT, "-z", "--name-status", "--no-renames", "--no-ext-diff"]
    argv += ["--no-textconv", f"--max-count={int(args.get('max_count', 20))}"]
    argv += ["--end-of-options", *([rev] if rev else []), *_pathspec(rel)]
    out = run_git(ctx.workspace, argv, max_bytes=_limit(args))
    commits = [_commit(ctx, r) for r in _records(_text(out.data))]
    if out.truncated and commits:
        commits.pop()  # the last record may be cut short
    return {"commits": commits, "truncated": out.truncated}


# -- git.diff and git.show -----------------------------------------------------------------------


def _argv(base: list[str], extra: list[str], revs: list[str], spec: list[str]) -> list[str]:
    return [*base, *extra, "--end-of-options", *revs, *spec]


def _changed(
    ctx: ToolContext, base: list[str], revs: list[str], rel: str | None
) -> tuple[list[str], int, bool]:
    """The files a diff touches, those a run may see, how many were hidden, and whether the
    list was cut at :data:`_MAX_FILES`."""
    argv = _argv(base, ["--name-only", "-z"], revs, _pathspec(rel))
    out = run_git(ctx.workspace, argv, max_bytes=MAX_BYTES)
    names = [n for n in _text(out.data).split("\0") if n]
    kept, hid = _paths_part(ctx, names)
    cut = out.truncated or len(kept) > _MAX_FILES
    return kept[:_MAX_FILES], hid, cut


def _patch(
    ctx: ToolContext,
    base: list[str],
    revs: list[str],
    rel: str | None,
    limit: int,
    *,
    worktree: bool = False,
) -> dict[str, Any]:
    """The patch of the files a run may see; ``worktree``: its new side is the working tree,
    shown only where git read what containment lets a run read
    (:func:`proctor.runtime.tools.git_worktree.worktree_parts`)."""
    kept, hid, cut = _changed(ctx, base, revs, rel)
    if not kept:
        return {"files": [], "patch": "", "hidden_files": hid, "truncated": cut}
    spec = ["--", *(f":(literal){n}" for n in kept)] if hid or cut else _pathspec(rel)
    extra = ["--patch", *(WORKTREE_FLAGS if worktree else [])]
    out = run_git(ctx.workspace, _argv(base, extra, revs, spec), max_bytes=limit)
    patch, dropped = chunks_without_keys(_text(out.data))
    if worktree:
        patch, unread = worktree_parts(ctx.workspace, patch, kept)
        dropped += unread
    return {
        "files": [{"status": "changed", "path": n} for n in kept],
        "patch": patch,
        "hidden_files": hid + dropped,
        "truncated": cut or out.truncated,
    }


# --ignore-submodules=dirty: a submodule is compared by its commit only; git would otherwise
# run `git status` inside it, under that repository's own config (its filter drivers)
_DIFF_FLAGS = [
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--no-color",
    "--submodule=short",
    "--ignore-submodules=dirty",
]


def _diff(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    rev_a = _rev(args, "rev_a") or "HEAD"
    rev_b = _rev(args, "rev_b")
    rel = _path(ctx, args, "list")
    revs = [rev_a, *([rev_b] if rev_b else [])]
    return _patch(ctx, ["diff", *_DIFF_FLAGS], revs, rel, _limit(args), worktree=rev_b is None)


def _show(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    rev = _rev(args, "rev")
    assert rev is not None
    rel = _path(ctx, args, "read")
    if rel is not None:
        return _show_file(ctx, rev, rel, _limit(args))
    meta = run_git(
        ctx.workspace,
        ["show", "-s", _LOG_FORMAT, "-z", "--end-of-options", rev],
        max_bytes=64 * 1024,
    )
    records = _records(_text(meta.data))
    if not records:
        raise ToolFailed(f"no commit {rev!r}", code="git_failed")
    commit = _commit(ctx, records[0])
    base = ["show", "--format=", *_DIFF_FLAGS]
    return {**commit, **_patch(ctx, base, [commit["commit"]], None, _limit(args))}


def _show_file(ctx: ToolContext, rev: str, rel: str, limit: int) -> dict[str, Any]:
    commit = run_git(
        ctx.workspace,
        ["rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}"],
        max_bytes=200,
    )
    commit_id = _text(commit.data).strip()
    out = run_git(ctx.workspace, ["cat-file", "blob", f"{commit_id}:{rel}"], max_bytes=limit)
    if content_reason(out.data) is not None:
        raise RefusedCall(
            f"'{rel}' at {rev} holds a private key block; runs never read it",
            code="sensitive_path",
            details={"path": rel, "rule": "private_key_content"},
        )
    try:
        content = out.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not out.truncated or exc.start < len(out.data) - 4:
            raise ToolFailed(
                f"'{rel}' at {rev} is not UTF-8 text", code="binary_file", details={"path": rel}
            ) from exc
        content = out.data[: exc.start].decode("utf-8")
    return {"commit": commit_id, "path": rel, "content": content, "truncated": out.truncated}


# -- the tools -----------------------------------------------------------------------------------


def _paths(access: Access) -> Any:
    def paths(args: Mapping[str, Any]) -> list[tuple[str, Access]]:
        path = args.get("path") if isinstance(args, Mapping) else None
        if path is None:
            return []
        return [(path if isinstance(path, str) else "", access)]

    return paths


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required or [],
        "properties": {**properties, "max_bytes": _BYTES_SCHEMA},
    }


_PATCH_OUT: dict[str, Any] = {
    "type": "object",
    "required": ["files", "patch", "hidden_files", "truncated"],
    "properties": {
        "files": _FILES_SCHEMA,
        "patch": {"type": "string"},
        "hidden_files": {"type": "integer", "minimum": 0},
        "truncated": {"type": "boolean"},
    },
}


def git_tools() -> tuple[Tool, ...]:
    """The four read-only git tools."""
    return (
        Tool(
            name="git.status",
            description="List the repository's changed and untracked files (sensitive files "
            "left out).",
            schema=_schema({}),
            effect="read",
            handler=os_errors_refused(_status),
            output_schema={
                "type": "object",
                "required": ["branch", "entries", "hidden", "truncated"],
                "properties": {
                    "branch": {"type": ["string", "null"]},
                    "entries": {"type": "array"},
                    "hidden": {"type": "integer"},
                    "truncated": {"type": "boolean"},
                },
            },
        ),
        Tool(
            name="git.log",
            description="List commits (newest first) with the files each changed, optionally "
            "of one path or from one revision.",
            schema=_schema(
                {
                    "path": PATH_SCHEMA,
                    "rev": _REV_SCHEMA,
                    "max_count": {"type": "integer", "minimum": 1, "maximum": 1000},
                }
            ),
            effect="read",
            handler=os_errors_refused(_log),
            paths=_paths("list"),
            output_schema={
                "type": "object",
                "required": ["commits", "truncated"],
                "properties": {"commits": {"type": "array"}, "truncated": {"type": "boolean"}},
            },
        ),
        Tool(
            name="git.show",
            description="Show one commit with its patch, or one file's text at a revision (path).",
            schema=_schema({"rev": _REV_SCHEMA, "path": PATH_SCHEMA}, ["rev"]),
            effect="read",
            handler=os_errors_refused(_show),
            paths=_paths("read"),
            output_schema={"type": "object", "required": ["commit", "truncated"]},
        ),
        Tool(
            name="git.diff",
            description="The patch from rev_a (HEAD by default) to rev_b (the working tree by "
            "default), optionally of one path; sensitive files left out.",
            schema=_schema({"rev_a": _REV_SCHEMA, "rev_b": _REV_SCHEMA, "path": PATH_SCHEMA}),
            effect="read",
            handler=os_errors_refused(_diff),
            paths=_paths("list"),
            output_schema=_PATCH_OUT,
        ),
    )

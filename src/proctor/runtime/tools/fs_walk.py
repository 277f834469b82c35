"""``fs.list`` and ``fs.search``: walk the workspace the way a careful person would.

The walk honours ``.gitignore`` files (the root's, those of the folders above the starting
folder, and nested ones, deeper files deciding over shallower ones, via ``pathspec``), never
enters ``.git``, ``.proctor`` or a nested worktree (a folder holding its own ``.git``), never
follows a symlink into a folder, and never shows a sensitive entry: such entries are left out
and counted in ``withheld``. Paths in results are workspace-relative POSIX.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from proctor.core.paths import content_reason, sensitive_reason
from proctor.errors import ProctorError, RefusedCall
from proctor.runtime.boundary.workspace import Resolved, Workspace
from proctor.runtime.tools.base import Access, Tool, ToolContext, check_cancel
from proctor.runtime.tools.fs import PATH_SCHEMA
from proctor.runtime.tools.fsutil import open_regular

__all__ = ["FS_LIST", "FS_SEARCH"]

_LIST_HEAD = 4096
_SEARCH_MAX_FILE = 4 * 1024 * 1024
_LINE_MAX = 2000
_SKIP_DIRS = frozenset({".git", ".proctor"})


@dataclass
class _Entry:
    rel: str
    kind: str  # file | dir | symlink | other
    size: int
    abs: str


@dataclass
class _Counts:
    withheld: int = 0


class _Ignores:
    """The stack of ``.gitignore`` specs that apply to the folder being walked."""

    def __init__(self) -> None:
        self._specs: list[tuple[str, Any]] = []  # (folder rel prefix, GitIgnoreSpec)

    def load(self, folder_abs: str, folder_rel: str) -> None:
        import pathspec

        path = os.path.join(folder_abs, ".gitignore")
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.read(1024 * 1024).splitlines()
        except OSError:
            return
        prefix = "" if folder_rel == "." else folder_rel + "/"
        self._specs.append((prefix, pathspec.GitIgnoreSpec.from_lines(lines)))

    def depth(self) -> int:
        return len(self._specs)

    def truncate(self, depth: int) -> None:
        del self._specs[depth:]

    def ignored(self, rel: str, is_dir: bool) -> bool:
        decision = False
        for prefix, spec in self._specs:
            if not rel.startswith(prefix):
                continue
            local = rel[len(prefix) :] + ("/" if is_dir else "")
            include = spec.check_file(local).include
            if include is not None:
                decision = bool(include)
        return decision


def _walk(ws: Workspace, start: Resolved, recursive: bool, counts: _Counts) -> Iterator[_Entry]:
    ignores = _Ignores()
    # the .gitignore files of the root the walk starts in (the workspace, or $NAME)
    base, label = str(ws.base_of(start)), start.root
    ignores.load(base, label or ".")
    if start.inner != ".":
        parts = start.inner.split("/")
        for index in range(1, len(parts)):
            below = "/".join(parts[:index])
            ignores.load(os.path.join(base, below), f"{label}/{below}" if label else below)
        ignores.load(str(start.abs), start.rel)
    yield from _walk_folder(ws, str(start.abs), start.rel, recursive, ignores, counts)


def _walk_folder(
    ws: Workspace,
    folder_abs: str,
    folder_rel: str,
    recursive: bool,
    ignores: _Ignores,
    counts: _Counts,
) -> Iterator[_Entry]:
    try:
        with os.scandir(folder_abs) as scan:
            children = sorted(scan, key=lambda e: e.name)
    except OSError:
        return
    prefix = "" if folder_rel == "." else folder_rel + "/"
    for child in children:
        rel = prefix + child.name
        try:
            info = child.stat(follow_symlinks=False)
        except OSError:
            continue
        mode = info.st_mode
        is_dir = stat.S_ISDIR(mode)
        if is_dir and child.name in _SKIP_DIRS:
            counts.withheld += 1
            continue
        if sensitive_reason(rel) is not None:
            counts.withheld += 1
            continue
        if ignores.ignored(rel, is_dir):
            continue
        if stat.S_ISLNK(mode):
            try:
                ws.resolve(rel, "list")
            except RefusedCall:
                counts.withheld += 1
                continue
            yield _Entry(rel, "symlink", 0, child.path)
            continue
        if is_dir:
            if os.path.lexists(os.path.join(child.path, ".git")):
                continue  # a nested worktree belongs to another repository
            yield _Entry(rel, "dir", 0, child.path)
            if recursive:
                depth = ignores.depth()
                ignores.load(child.path, rel)
                yield from _walk_folder(ws, child.path, rel, recursive, ignores, counts)
                ignores.truncate(depth)
            continue
        if stat.S_ISREG(mode):
            yield _Entry(rel, "file", info.st_size, child.path)
        else:
            yield _Entry(rel, "other", 0, child.path)


def _head_is_key(path: str, limit: int) -> bool:
    try:
        with os.fdopen(open_regular(path, path), "rb") as handle:
            return content_reason(handle.read(limit)) is not None
    except (OSError, ProctorError):
        return True  # could not look inside: withhold rather than show


def _start(ctx: ToolContext, args: Mapping[str, Any]) -> Resolved:
    return ctx.workspace.resolve(args.get("path") or ".", "list")


def _dir_arg(args: Mapping[str, Any]) -> list[tuple[str, Access]]:
    path = args.get("path")
    return [(path if isinstance(path, str) else ".", "list")]


# -- fs.list -------------------------------------------------------------------------------------


def _list(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    start = _start(ctx, args)
    limit = int(args.get("max_entries", 1000))
    counts = _Counts()
    entries: list[dict[str, Any]] = []
    truncated = False
    if not start.abs.is_dir():
        from proctor.errors import ToolFailed

        raise ToolFailed(f"'{start.rel}' is not a folder", code="not_a_folder")
    for entry in _walk(ctx.workspace, start, bool(args.get("recursive", False)), counts):
        check_cancel(ctx)  # a cancelled read stops between entries
        if entry.kind == "file" and _head_is_key(entry.abs, _LIST_HEAD):
            counts.withheld += 1
            continue
        if len(entries) >= limit:
            truncated = True
            break
        entries.append({"path": entry.rel, "type": entry.kind, "size": entry.size})
    return {
        "path": start.rel,
        "entries": entries,
        "truncated": truncated,
        "withheld": counts.withheld,
    }


FS_LIST = Tool(
    name="fs.list",
    description="List a workspace folder (optionally recursively), honouring .gitignore; "
    "sensitive entries are left out and counted in withheld.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "path": PATH_SCHEMA,
            "recursive": {"type": "boolean"},
            "max_entries": {"type": "integer", "minimum": 1, "maximum": 10000},
        },
    },
    effect="read",
    handler=_list,
    paths=_dir_arg,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "entries", "truncated", "withheld"],
        "properties": {
            "path": {"type": "string"},
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["path", "type", "size"],
                    "properties": {
                        "path": {"type": "string"},
                        "type": {"enum": ["file", "dir", "symlink", "other"]},
                        "size": {"type": "integer"},
                    },
                },
            },
            "truncated": {"type": "boolean"},
            "withheld": {"type": "integer"},
        },
    },
)

# -- fs.search -----------------------------------------------------------------------------------


def _matcher(args: Mapping[str, Any]) -> Callable[[str], bool]:
    """What a line must hold: the literal pattern, or an RE2 regex (``regex: true``).

    RE2 runs in time linear in the line whatever the pattern (no backtracking), so no pattern
    can freeze a search; it has no backreferences and no look-around, which are refused.
    """
    pattern = str(args["pattern"])
    sensitive = bool(args.get("case_sensitive", True))
    regex = bool(args.get("regex", False))
    if not regex and sensitive:
        return lambda line: pattern in line
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.case_sensitive = sensitive
    try:
        compiled = re2.compile(pattern if regex else re2.escape(pattern), options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise RefusedCall(
            f"the search pattern is not a regular expression RE2 accepts ({reason}); RE2 has"
            " no backreferences or look-around (see docs/admission.md)",
            code="invalid_pattern",
        ) from None
    return lambda line: compiled.search(line) is not None


def _search(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    import pathspec

    matcher = _matcher(args)
    start = _start(ctx, args)
    glob = args.get("glob")
    only = pathspec.GitIgnoreSpec.from_lines([glob]) if glob else None
    limit = int(args.get("max_results", 200))
    counts = _Counts()
    results: list[dict[str, Any]] = []
    truncated = False
    files_scanned = 0
    if start.abs.is_file():
        start = ctx.workspace.resolve(args["path"], "read")  # a single file: check its content
        entries: Iterator[_Entry] = iter(
            [_Entry(start.rel, "file", start.abs.stat().st_size, str(start.abs))]
        )
    else:
        entries = _walk(ctx.workspace, start, True, counts)
    for entry in entries:
        check_cancel(ctx)  # a cancelled read stops between files
        if entry.kind != "file" or entry.size > _SEARCH_MAX_FILE:
            continue
        if only is not None and not only.match_file(entry.rel):
            continue
        try:
            with os.fdopen(open_regular(entry.abs, entry.rel), "rb") as handle:
                data = handle.read(_SEARCH_MAX_FILE + 1)
        except (OSError, ProctorError):
            continue
        if content_reason(data) is not None:
            counts.withheld += 1
            continue
        if b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        files_scanned += 1
        for number, line in enumerate(text.splitlines(), start=1):
            if not matcher(line):
                continue
            if len(results) >= limit:
                truncated = True
                break
            # A long line is not cut (a cut could split a secret past the scrubber): it is
            # reported without its text.
            shown = line if len(line) <= _LINE_MAX else None
            results.append({"path": entry.rel, "line": number, "text": shown})
        if truncated:
            break
    return {
        "results": results,
        "truncated": truncated,
        "withheld": counts.withheld,
        "files_scanned": files_scanned,
    }


FS_SEARCH = Tool(
    name="fs.search",
    description="Search workspace text files for a literal string (or a regex with regex: true), "
    "honouring .gitignore; sensitive files are skipped and counted in withheld.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["pattern"],
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "maxLength": 1000},
            "regex": {"type": "boolean"},
            "case_sensitive": {"type": "boolean"},
            "path": PATH_SCHEMA,
            "glob": {"type": "string", "minLength": 1, "maxLength": 500},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 5000},
        },
    },
    effect="read",
    handler=_search,
    paths=_dir_arg,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["results", "truncated", "withheld", "files_scanned"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["path", "line", "text"],
                    "properties": {
                        "path": {"type": "string"},
                        "line": {"type": "integer"},
                        "text": {"type": ["string", "null"]},
                    },
                },
            },
            "truncated": {"type": "boolean"},
            "withheld": {"type": "integer"},
            "files_scanned": {"type": "integer"},
        },
    },
)

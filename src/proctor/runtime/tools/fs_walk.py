"""``fs.list`` and ``fs.search``: walk the workspace the way a careful person would.

The walk honours ``.gitignore`` files (the root's, those of the folders above the starting
folder, and nested ones, deeper files deciding over shallower ones, via ``pathspec``), never
enters ``.git``, ``.proctor`` or a nested worktree (a folder holding its own ``.git``), never
follows a symlink into a folder, and never shows a sensitive entry: such entries are left out
and counted in ``withheld``. Paths in results are workspace-relative POSIX.

The walk holds a descriptor of each folder it is in and opens every child relative to it with
no-follow (the start is reached from its root with no symlink on the way), so a folder swapped
for a symlink mid-walk is skipped, never followed. Withheld too: proctor's state wherever its
settings put it, and a regular file with more than one hard link (its other name may be a file
outside or a sensitive one), whose content is never read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from proctor.contracts.values import dataclass
from proctor.core.paths import content_reason, sensitive_reason
from proctor.errors import RefusedCall, ToolFailed
from proctor.runtime.boundary.fds import DIR_FLAGS, open_below
from proctor.runtime.boundary.workspace import Resolved, Workspace
from proctor.runtime.tools.base import Access, Tool, ToolContext, check_cancel
from proctor.runtime.tools.fs import PATH_SCHEMA
from proctor.runtime.tools.fsutil import open_regular, os_errors_refused

__all__ = ["FS_LIST", "FS_SEARCH"]

_LIST_HEAD = 4096
_SEARCH_MAX_FILE = 4 * 1024 * 1024
_LINE_MAX = 2000
_SKIP_DIRS = frozenset({".git", ".proctor"})
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass
class _Entry:
    rel: str
    kind: str  # file | dir | symlink | other
    size: int
    dir_fd: int  # the folder's descriptor: open while the walk stands on this entry
    name: str
    links: int = 1


@dataclass
class _Counts:
    withheld: int = 0


class _Ignores:
    """The stack of ``.gitignore`` specs that apply to the folder being walked."""

    def __init__(self) -> None:
        self._specs: list[tuple[str, Any]] = []  # (folder rel prefix, GitIgnoreSpec)

    def load(self, dir_fd: int, folder_rel: str) -> None:
        import pathspec

        try:
            fd = os.open(".gitignore", _FILE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                return
            data = os.read(fd, 1024 * 1024)
        except OSError:
            return
        finally:
            os.close(fd)
        lines = data.decode("utf-8", errors="replace").splitlines()
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


def _open_folder(base: str, inner: str) -> int | None:
    try:
        return open_below(base, inner, DIR_FLAGS)
    except OSError:
        return None


def _joined_rel(label: str, inner: str) -> str:
    """How results name ``inner`` of the root ``label`` (``""`` the workspace)."""
    if inner == ".":
        return label or "."
    return f"{label}/{inner}" if label else inner


def _walk(ws: Workspace, start: Resolved, recursive: bool, counts: _Counts) -> Iterator[_Entry]:
    ignores = _Ignores()
    # the .gitignore files of the root the walk starts in (the workspace, or $NAME), and of
    # every folder between it and the start
    base, inner = start.where
    label = start.root
    below = [] if inner == "." else inner.split("/")
    for index in range(len(below)):
        rel_inner = "/".join(below[:index]) or "."
        folder_rel = _joined_rel(label, rel_inner)
        fd = _open_folder(base, rel_inner)
        if fd is None:
            return
        ignores.load(fd, folder_rel)
        os.close(fd)
    fd = _open_folder(base, inner)
    if fd is None:
        return
    try:
        ignores.load(fd, start.rel)
        yield from _walk_folder(ws, fd, str(start.abs), start.rel, recursive, ignores, counts)
    finally:
        os.close(fd)


def _walk_folder(
    ws: Workspace,
    dir_fd: int,
    folder_real: str,
    folder_rel: str,
    recursive: bool,
    ignores: _Ignores,
    counts: _Counts,
) -> Iterator[_Entry]:
    try:
        with os.scandir(dir_fd) as scan:
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
        real = folder_real.rstrip("/") + "/" + child.name
        if sensitive_reason(rel) is not None or ws.is_state(real):
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
            yield _Entry(rel, "symlink", 0, dir_fd, child.name)
            continue
        if is_dir:
            try:
                # no-follow: a folder swapped for a symlink since the scan is not entered
                sub = os.open(child.name, DIR_FLAGS | _NOFOLLOW, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                try:
                    os.stat(".git", dir_fd=sub, follow_symlinks=False)
                    continue  # a nested worktree belongs to another repository
                except OSError:
                    pass
                yield _Entry(rel, "dir", 0, dir_fd, child.name)
                if recursive:
                    depth = ignores.depth()
                    ignores.load(sub, rel)
                    yield from _walk_folder(ws, sub, real, rel, recursive, ignores, counts)
                    ignores.truncate(depth)
            finally:
                os.close(sub)
            continue
        if stat.S_ISREG(mode):
            yield _Entry(rel, "file", info.st_size, dir_fd, child.name, info.st_nlink)
        else:
            yield _Entry(rel, "other", 0, dir_fd, child.name)


def _read_entry(entry: _Entry, limit: int) -> bytes | None:
    """At most ``limit`` bytes of a walked file, or None when it is not one regular file with a
    single link (or cannot be read): such a file is withheld, never read."""
    try:
        fd = os.open(entry.name, _FILE_FLAGS, dir_fd=entry.dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            return None
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def _head_is_key(entry: _Entry, limit: int) -> bool:
    head = _read_entry(entry, limit)
    return head is None or content_reason(head) is not None  # unread: withhold, never show


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
    probe = _open_folder(*start.where)
    if probe is None:
        raise ToolFailed(f"'{start.rel}' is not a folder", code="not_a_folder")
    os.close(probe)
    for entry in _walk(ctx.workspace, start, bool(args.get("recursive", False)), counts):
        check_cancel(ctx)  # a cancelled read stops between entries
        if entry.kind == "file" and _head_is_key(entry, _LIST_HEAD):
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
    handler=os_errors_refused(_list),
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
    folder = _open_folder(*start.where)
    if folder is None:
        start = ctx.workspace.resolve(args["path"], "read")  # a single file: check its content
        fd = open_regular(start)
        try:
            data = os.read(fd, _SEARCH_MAX_FILE + 1)
        finally:
            os.close(fd)
        entries: Iterator[tuple[_Entry, bytes | None]] = iter(
            [(_Entry(start.rel, "file", len(data), -1, start.abs.name), data)]
        )
    else:
        os.close(folder)
        entries = ((e, None) for e in _walk(ctx.workspace, start, True, counts))
    for entry, held in entries:
        check_cancel(ctx)  # a cancelled read stops between files
        if entry.kind != "file" or entry.size > _SEARCH_MAX_FILE:
            continue
        if only is not None and not only.match_file(entry.rel):
            continue
        data_or_none = held if held is not None else _read_entry(entry, _SEARCH_MAX_FILE + 1)
        if data_or_none is None:
            if entry.links > 1:
                counts.withheld += 1  # another name for it may be a secret: never read
            continue
        data = data_or_none
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
    handler=os_errors_refused(_search),
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

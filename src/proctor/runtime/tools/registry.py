"""The native tools, by name: each tool's module is imported when the tool is first looked up.

A run names a few tools; importing all of them (the HTTP client's egress guard, the git and
process tools, the store backends) cost a run's start-up more than the run itself. So the names
are known here without importing anything, :func:`native_tools` hands out a :class:`ToolTable`
that loads a tool on first lookup, and a provider (one module's tools) is built once per
process. Iterating names, ``in`` and ``len`` import nothing; reading values imports what is read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proctor.runtime.tools.base import Tool

__all__ = ["NATIVE_TOOL_NAMES", "ToolTable", "native_tools"]


def _basic() -> tuple[Tool, ...]:
    from proctor.runtime.tools.basic import DATA_DIGEST, ECHO

    return (ECHO, DATA_DIGEST)


def _text() -> tuple[Tool, ...]:
    from proctor.runtime.tools.text import TEXT_FORMAT

    return (TEXT_FORMAT,)


def _fs() -> tuple[Tool, ...]:
    from proctor.runtime.tools.fs import FS_EDIT, FS_READ, FS_WRITE
    from proctor.runtime.tools.fs_read_bundle import FS_READ_BUNDLE

    return (FS_READ, FS_READ_BUNDLE, FS_WRITE, FS_EDIT)


def _fs_walk() -> tuple[Tool, ...]:
    from proctor.runtime.tools.fs_walk import FS_LIST, FS_SEARCH

    return (FS_LIST, FS_SEARCH)


def _fs_bundle() -> tuple[Tool, ...]:
    from proctor.runtime.tools.fs_bundle import FS_APPLY_BUNDLE

    return (FS_APPLY_BUNDLE,)


def _fs_trash() -> tuple[Tool, ...]:
    from proctor.runtime.tools.fs_trash import FS_DELETE, FS_RESTORE

    return (FS_DELETE, FS_RESTORE)


def _command() -> tuple[Tool, ...]:
    from proctor.runtime.tools.command import COMMAND_EXECUTE

    return (COMMAND_EXECUTE,)


def _http() -> tuple[Tool, ...]:
    from proctor.runtime.tools.http import http_tools

    return tuple(http_tools().values())


def _store() -> tuple[Tool, ...]:
    from proctor.runtime.tools.store import store_tools

    return tuple(store_tools().values())


def _artifacts() -> tuple[Tool, ...]:
    from proctor.runtime.tools.artifacts import (
        ARTIFACT_ADMIT,
        ARTIFACT_OPEN,
        ARTIFACT_READ,
        ARTIFACT_STORE,
    )

    return (ARTIFACT_ADMIT, ARTIFACT_OPEN, ARTIFACT_READ, ARTIFACT_STORE)


def _git() -> tuple[Tool, ...]:
    from proctor.runtime.tools.git import git_tools

    return tuple(git_tools())


def _procs() -> tuple[Tool, ...]:
    from proctor.runtime.tools.procs import process_tools

    return tuple(process_tools())


def _worker() -> tuple[Tool, ...]:
    from proctor.runtime.tools.pyfunc import WORKER_RUN

    return (WORKER_RUN,)


def _inspection() -> tuple[Tool, ...]:
    from proctor.runtime.tools.inspect_tools import AUDIT_SUMMARY, SKILLS_INSPECT
    from proctor.runtime.tools.receipts_tool import RECEIPTS_EXPLAIN

    return (RECEIPTS_EXPLAIN, SKILLS_INSPECT, AUDIT_SUMMARY)


def _runs() -> tuple[Tool, ...]:
    from proctor.runtime.tools.run_tools import RUN_READ

    return (RUN_READ,)


def _receipt_read() -> tuple[Tool, ...]:
    from proctor.runtime.tools.receipt_read import RECEIPT_READ

    return (RECEIPT_READ,)


def _agent() -> tuple[Tool, ...]:
    from proctor.runtime.tools.agent_tools import agent_tools

    return tuple(agent_tools(native_tools))


def _drafts() -> tuple[Tool, ...]:
    from proctor.runtime.tools.draft_tools import draft_tools

    return tuple(draft_tools(native_tools))


Provider = Callable[[], "tuple[Tool, ...]"]

#: every native tool name, in the order the tools are listed, with the provider that builds it
#: (a test builds every provider and checks this table against what they build)
_PROVIDED: dict[str, Provider] = {
    "echo": _basic,
    "data.digest": _basic,
    "text.format": _text,
    "fs.read": _fs,
    "fs.read_bundle": _fs,
    "fs.list": _fs_walk,
    "fs.search": _fs_walk,
    "fs.write": _fs,
    "fs.edit": _fs,
    "fs.apply_bundle": _fs_bundle,
    "fs.delete": _fs_trash,
    "fs.restore": _fs_trash,
    "command.execute": _command,
    "http.request": _http,
    "store.events.append": _store,
    "store.events.read": _store,
    "store.key.put": _store,
    "store.key.get": _store,
    "store.keys.list": _store,
    "artifact.admit": _artifacts,
    "artifact.open": _artifacts,
    "artifact.read": _artifacts,
    "artifact.store": _artifacts,
    "git.status": _git,
    "git.log": _git,
    "git.show": _git,
    "git.diff": _git,
    "process.start": _procs,
    "process.read": _procs,
    "process.write": _procs,
    "process.resize": _procs,
    "process.stop": _procs,
    "process.list": _procs,
    "worker.run": _worker,
    "run.read": _runs,
    "receipt.read": _receipt_read,
    "receipts.explain": _inspection,
    "skills.inspect": _inspection,
    "audit.summary": _inspection,
    "tool.list": _agent,
    "directive.list": _agent,
    "directive.validate": _agent,
    "credential.resolve": _agent,
    "skills.check_draft": _drafts,
    "policy.check_draft": _drafts,
}

NATIVE_TOOL_NAMES: tuple[str, ...] = tuple(_PROVIDED)
"""Every native tool's name, known without importing a tool module."""

_built: dict[str, Tool] = {}
_lock = threading.Lock()


def _native(name: str) -> Tool:
    """The native tool ``name``, building its provider on first use (once per process)."""
    tool = _built.get(name)
    if tool is not None:
        return tool
    with _lock:
        if name not in _built:
            provider = _PROVIDED[name]
            for built in provider():
                _built.setdefault(built.name, built)
        return _built[name]


class _Unloaded:
    """Stands for a native tool not looked up yet in a :class:`ToolTable`."""

    __slots__ = ()


_UNLOADED = _Unloaded()


class ToolTable(MutableMapping[str, "Tool"]):
    """Tools by name, native ones loaded on first lookup.

    A table is its caller's own: adding, replacing or deleting entries never changes what
    another table holds. ``copy()`` makes another table without loading anything.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, Tool | _Unloaded] | None = None) -> None:
        self._entries: dict[str, Tool | _Unloaded] = (
            dict.fromkeys(_PROVIDED, _UNLOADED) if entries is None else dict(entries)
        )

    def __getitem__(self, name: str) -> Tool:
        value = self._entries[name]
        if isinstance(value, _Unloaded):
            value = self._entries[name] = _native(name)
        return value

    def get(self, name: str, default: Tool | None = None) -> Tool | None:  # type: ignore[override]
        """The tool named ``name``, or ``default`` (no lookup error, nothing else loaded)."""
        if name not in self._entries:
            return default
        return self[name]

    def __setitem__(self, name: str, tool: Tool) -> None:
        self._entries[name] = tool

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def copy(self) -> ToolTable:
        """Another table with the same entries (loaded or not)."""
        return ToolTable(self._entries)

    def __repr__(self) -> str:
        return f"ToolTable({list(self._entries)})"


def native_tools() -> ToolTable:
    """Every native tool by name (``echo``, ``data.digest``, ``fs.*``, ``http.request``,
    ``store.*``, ...), each imported when first read.

    Each call returns a new table, so a caller adding or removing entries never changes what
    other callers see; the tools themselves are built once per process.
    """
    return ToolTable()

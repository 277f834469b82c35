"""The native tools, by name: built once per process, handed out as a fresh dict."""

from __future__ import annotations

from functools import cache

from proctor.runtime.tools.base import Tool

__all__ = ["native_tools"]


@cache
def _build() -> tuple[Tool, ...]:
    from proctor.runtime.tools.agent_tools import agent_tools
    from proctor.runtime.tools.artifacts import ARTIFACT_ADMIT, ARTIFACT_READ, ARTIFACT_STORE
    from proctor.runtime.tools.basic import DATA_DIGEST, ECHO
    from proctor.runtime.tools.command import COMMAND_EXECUTE
    from proctor.runtime.tools.draft_tools import draft_tools
    from proctor.runtime.tools.fs import FS_EDIT, FS_READ, FS_WRITE
    from proctor.runtime.tools.fs_bundle import FS_APPLY_BUNDLE
    from proctor.runtime.tools.fs_trash import FS_DELETE, FS_RESTORE
    from proctor.runtime.tools.fs_walk import FS_LIST, FS_SEARCH
    from proctor.runtime.tools.git import git_tools
    from proctor.runtime.tools.http import http_tools
    from proctor.runtime.tools.inspect_tools import AUDIT_SUMMARY, SKILLS_INSPECT
    from proctor.runtime.tools.procs import process_tools
    from proctor.runtime.tools.pyfunc import WORKER_RUN
    from proctor.runtime.tools.receipts_tool import RECEIPTS_EXPLAIN
    from proctor.runtime.tools.store import store_tools
    from proctor.runtime.tools.text import TEXT_FORMAT

    return (
        ECHO,
        DATA_DIGEST,
        TEXT_FORMAT,
        FS_READ,
        FS_LIST,
        FS_SEARCH,
        FS_WRITE,
        FS_EDIT,
        FS_APPLY_BUNDLE,
        FS_DELETE,
        FS_RESTORE,
        COMMAND_EXECUTE,
        *http_tools().values(),
        *store_tools().values(),
        ARTIFACT_ADMIT,
        ARTIFACT_READ,
        ARTIFACT_STORE,
        *git_tools(),
        *process_tools(),
        WORKER_RUN,
        RECEIPTS_EXPLAIN,
        SKILLS_INSPECT,
        AUDIT_SUMMARY,
        *agent_tools(native_tools),
        *draft_tools(native_tools),
    )


def native_tools() -> dict[str, Tool]:
    """Every native tool by name (``echo``, ``data.digest``, ``fs.*``, ``http.request``,
    ``store.*``).

    The tools are built once and cached; each call returns a new dict, so a caller adding or
    removing entries never changes what other callers see.
    """
    return {tool.name: tool for tool in _build()}

"""``proctor mcp --tool NAME``: proctor's own tools (``fs.read``, ``fs.list`` ...) served to MCP
clients, each call a governed call within the client session's run.

A tool ``fs.read`` is served as ``fs_read`` (dots folded to ``_``), described by the tool's
own description, with its input schema (and no output schema). A call is
a call of the session run's agent turn (:mod:`proctor.mcp.session_runs`): one admission with
the server's authority and the workspace's policy, the containment of every path the
arguments name (no ``..``, no symlink or hard link out of the workspace, no folder swapped
under the call), the secrets check of its output, one call record and one audit line; the
session's run seals with one signed receipt when the session ends. A served skill's call, by
contrast, is a whole run, sealed with its own receipt.

The answer is the tool's result (already scrubbed of secrets by admission) as structured
content and as one JSON text part; a call that is refused or fails answers ``isError`` with
``error[CODE]: message``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types

from proctor.errors import UsageError
from proctor.mcp.session_runs import SessionHost, SessionRuns, error, session_package
from proctor.receipts.jsontext import reusable_encoder

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

__all__ = ["CoreTools", "core_tool_name", "open_core_tools"]

_QUIET = frozenset({"none", "read"})
_ON_LOOP = frozenset({"fs.read"})
"""Tools a stdio server calls on its event loop's thread (no hop to a worker and back): a read
bounded by its ``max_bytes``, starting no program. Over HTTP every call takes a worker (other
clients' messages are read meanwhile)."""
_text = reusable_encoder(sort_keys=True, separators=(",", ":"))


def core_tool_name(tool: str) -> str:
    """The MCP name of proctor tool ``tool``: ``fs.read`` -> ``fs_read``."""
    return tool.replace(".", "_")


def open_core_tools(root: Path, names: list[str]) -> CoreTools:
    """The core tools ``names`` (proctor's native tool names), their session package written.

    Raises:
        UsageError: ``tool_not_found`` (a name that is no native tool, listed with the names
            there are), ``mcp_tool_name_collision`` (two names folding to one MCP name).
    """
    from proctor.runtime.tools.registry import NATIVE_TOOL_NAMES, native_tools

    table = native_tools()
    served: dict[str, Any] = {}
    for name in dict.fromkeys(names):
        if name not in NATIVE_TOOL_NAMES:
            raise UsageError(
                f"--tool {name!r} is not one of proctor's tools; they are: "
                + ", ".join(sorted(NATIVE_TOOL_NAMES)),
                code="tool_not_found",
            )
        public = core_tool_name(name)
        if public in served:
            raise UsageError(
                f"--tool {name!r} and {served[public].name!r} would both be served as {public!r}",
                code="mcp_tool_name_collision",
            )
        served[public] = table[name]
    package = session_package(
        root,
        "mcp-tools",
        "mcp-tools",
        sorted(t.name for t in served.values()),
        (
            "An MCP client's session of proctor's own tools.",
            "One MCP client session; each call one governed tool call.",
            "An MCP client calls proctor's tools directly.",
        ),
    )
    return CoreTools(served, package)


class CoreTools:
    """The served core tools and the run of each client session."""

    def __init__(self, tools: Mapping[str, Any], package: Path) -> None:
        self.tools = dict(tools)  # MCP name -> proctor Tool
        self.sessions = SessionRuns(package)
        self._listed: list[types.Tool] | None = None

    def serves(self, name: str) -> bool:
        """Whether ``name`` is a served core tool."""
        return name in self.tools

    def tool_list(self) -> list[types.Tool]:
        """The served tools' declarations (built once)."""
        if self._listed is None:
            self._listed = [_declaration(name, tool) for name, tool in sorted(self.tools.items())]
        return list(self._listed)

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: dict[str, Any],
        host: SessionHost,
        client: Mapping[str, Any] | None = None,
        line: list[dict[str, Any]] | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """One client call of a served core tool, a governed call of the session's run; a
        change under ``effects: ask`` waits for a person (``client``: for the audit log).

        Refused with a tool error: what admission refuses (its code: ``path_escape``,
        ``approval_declined``, ``arguments_invalid`` ...), a call that fails (its code), or one
        still waiting for a person (``approval_pending``). ``line``: the request's
        ``mcp_request`` fields, not yet written (:meth:`SessionRuns.call`).
        """
        tool = self.tools[name].name
        on_loop = tool in _ON_LOOP and host.config.transport == "stdio"
        outcome = await self.sessions.call(
            ctx, host, tool, arguments, client, on_loop=on_loop, line=line
        )
        if isinstance(outcome, types.CallToolResult):
            return outcome
        if outcome.status != "completed":
            failure = outcome.error or {}
            return error(str(failure.get("code") or outcome.status), str(failure.get("message")))
        result = outcome.result
        # the text the governor took the result's digest over is this text exactly: a read's
        # content is not encoded a second time (else, a call answered from its record, it is)
        text = outcome.result_text
        # the wire form, not a model: the SDK checks it against the protocol's schema either
        # way, and a model would be validated here, dumped, then checked again
        return {
            "content": [{"type": "text", "text": _text(result) if text is None else text}],
            **({"structuredContent": result} if isinstance(result, dict) else {}),
            "isError": False,
            "resultType": "complete",
        }

    def seal_all(self, host: SessionHost) -> None:
        """End each session's run, sealed with a receipt (:meth:`SessionRuns.seal_all`)."""
        self.sessions.seal_all(host)


def _declaration(name: str, tool: Any) -> types.Tool:
    read_only = tool.effect in _QUIET
    # No output schema: a client checks structured content against one, and a result admission
    # redacted (a secret-named field's value replaced by a marker) need not fit the tool's.
    return types.Tool(
        name=name,
        title=tool.name,
        description=tool.description,
        input_schema=tool.schema,
        annotations=types.ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=not read_only,
            idempotent_hint=read_only,
            open_world_hint=tool.effect == "network",
        ),
    )

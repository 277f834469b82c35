"""``providers.mcp``: a test's answers to upstream MCP calls, matched on tool and arguments.

A test of a package whose steps call upstream tools (``mcp:<server>/<tool>``) runs them with the
tool definitions pinned in the enclosing workspace's ``proctor-mcp.lock`` and its
``[mcp.<server>]`` settings (effect classes, rate limits), so admission is the real one: scope,
schema, policy, the floor with the exact arguments. Only the answer comes from the test: a call
whose tool and arguments (compared as canonical JSON) match an entry gets that entry's result;
any other call is refused ``mcp_fixture_unmatched`` and no server is ever started, with or
without entries. Two entries with the same tool and arguments are refused when the test is
read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.errors import RefusedCall
from proctor.testing.tool_answers import ToolAnswers

if TYPE_CHECKING:
    from proctor.contracts.testfile import McpExchange
    from proctor.runtime.gateway.upstreams import Upstreams

__all__ = ["McpFixtures", "stand_in_upstreams"]


class McpFixtures(ToolAnswers):
    """The declared upstream answers, with how often each was used and what matched none."""

    def __init__(self, exchanges: Sequence[McpExchange], source: str) -> None:
        super().__init__(
            ((e.tool, e.arguments, _result(e)) for e in exchanges), source, "providers.mcp"
        )

    def answer(self, server: str, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The result of the entry matching this call.

        Raises:
            RefusedCall: ``mcp_fixture_unmatched``: no entry matches; no server is started.
        """
        name = f"{server}/{tool}"
        result = self.take(name, arguments)
        if result is not None:
            return result
        raise RefusedCall(
            f"no providers.mcp entry of this test matches {name} with these arguments; a test"
            " never starts an upstream MCP server",
            code="mcp_fixture_unmatched",
        )


def _result(entry: McpExchange) -> dict[str, Any]:
    """An entry's answer as a ``tools/call`` result."""
    result: dict[str, Any] = {
        "content": list(entry.result.content),
        "isError": entry.result.is_error,
    }
    if entry.result.structured_content is not None:
        result["structuredContent"] = dict(entry.result.structured_content)
    return result


def stand_in_upstreams(
    package_folder: Path, test_root: Path, environ: Mapping[str, str], fixtures: McpFixtures
) -> Upstreams | None:
    """The upstreams of the package's workspace answered by ``fixtures`` in the test's
    workspace (``None`` when the package's workspace configures no upstream).

    Raises:
        ParseError, ConfigError: the workspace's upstream configuration is refused.
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.gateway.upstreams import Upstreams, load_upstreams

    source = Workspace.discover(package_folder)
    config = load_upstreams(source.root, {})
    if config is None:
        return None
    return Upstreams(
        config, Workspace(test_root), environ, pins_root=source.root, answer=fixtures.answer
    )

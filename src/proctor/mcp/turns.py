"""Turn tools: work the agent turns of paused runs call by call over MCP.

Served scoped to one run (``proctor mcp --run RUN_ID``) or beside skills, for the runs the
server's own calls opened. They are built on the driver's turn API (issue 4's
``Session.resume`` / ``Session.turn_*``); a build without it serves no turn tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types

    from proctor.mcp.server import ProctorServer, ServerConfig

__all__ = ["TurnTools", "turn_tools"]


class TurnTools:
    """The six turn tools over the driver's turn API."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config

    def tool_list(self) -> list[types.Tool]:
        """The turn tools' declarations."""
        return []

    def serves(self, name: str) -> bool:
        """Whether ``name`` is a turn tool."""
        return False

    async def call(
        self, name: str, arguments: dict[str, Any], proctor: ProctorServer
    ) -> types.CallToolResult:
        """Answer one turn tool call."""
        raise NotImplementedError

    def check_run(self, run_id: str, proctor: ProctorServer) -> None:
        """Refuse a ``--run`` naming a run this workspace does not hold."""


def turn_tools(config: ServerConfig) -> TurnTools | None:
    """The turn tools, or ``None`` when the driver has no turn API yet."""
    from proctor.runtime.driver import Session

    if not hasattr(Session, "turn_call"):
        return None
    return TurnTools(config)

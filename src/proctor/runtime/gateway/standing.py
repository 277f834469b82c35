"""Upstreams that stand in for a workspace's servers: how ``proctor test`` answers upstream MCP
calls from its ``providers.mcp`` without ever starting a server.

Kept apart (and free of imports) so a run's session asks whether its workspace has upstream
tools at the cost of one ``stat`` and one dictionary lookup.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

__all__ = ["has_upstreams", "stand_in", "standing_for", "withdraw"]

_STANDING: dict[str, Any] = {}
_LOCK = threading.Lock()


def stand_in(root: Path, upstreams: Any) -> None:
    """Make ``upstreams`` the upstreams of the workspace at ``root`` in this process."""
    with _LOCK:
        _STANDING[str(root)] = upstreams


def withdraw(root: Path) -> None:
    """Forget the stand-in of ``root``."""
    with _LOCK:
        _STANDING.pop(str(root), None)


def standing_for(root: Path) -> Any:
    """The stand-in upstreams of ``root``, or ``None``."""
    with _LOCK:
        return _STANDING.get(str(root))


def has_upstreams(root: Path) -> bool:
    """Whether runs in ``root`` have upstream MCP tools: it pinned some (``proctor-mcp.lock``)
    or a test stands in for them."""
    return standing_for(root) is not None or (root / "proctor-mcp.lock").is_file()

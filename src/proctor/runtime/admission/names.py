"""The tool name a call proposes, as admission records it.

A name no registered tool has is the proposer's text (a model's, an MCP client's): it is
recorded in the run store, the audit log and the call's receipt scrubbed of secrets and
bounded, and never empty, so a call naming nothing still seals. An empty name, or one longer
than :data:`MAX_TOOL_NAME`, is refused ``tool_unknown`` by the scope check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proctor.errors import RefusedCall

__all__ = ["MAX_TOOL_NAME", "name_refusal", "recorded_name"]

MAX_TOOL_NAME = 128
"""Longest tool name a call may propose."""

# What an empty or over-long name is recorded as (no tool's name holds a parenthesis).
_NAMELESS = "(no tool name)"
_TOO_LONG = "(tool name too long)"


def recorded_name(name: Any, scrub: Callable[[str], str]) -> str:
    """The name to record for a proposed ``name`` that no registered tool has."""
    if not isinstance(name, str) or not name:
        return _NAMELESS
    if len(name) > MAX_TOOL_NAME:
        return f"{_TOO_LONG} {scrub(name[:64])}…"
    return scrub(name)


def name_refusal(recorded: str) -> RefusedCall | None:
    """The refusal of a recorded name that stands for an empty or over-long one, else None."""
    if recorded != _NAMELESS and not recorded.startswith(_TOO_LONG):
        return None
    what = "none" if recorded == _NAMELESS else "a longer one"
    return RefusedCall(
        f"a call must name a tool of at most {MAX_TOOL_NAME} characters; this one names {what}",
        code="tool_unknown",
    )

"""Tool annotations (MCP ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
``openWorldHint``) derived from what a served method can do.

A method's effects are the effect classes of every tool it can reach: each ``tool:`` step's
tool, and every tool an agent turn's allowance names. A step whose effects are not known here
(a child skill, a connector operation, a worker function, an unregistered tool) counts as
changing things and reaching out, so a hint never understates what a call may do. A method
declared ``effects: none`` can change nothing whatever it names (the floor refuses every
change), so it is read-only.

- ``readOnlyHint``: every reachable effect is ``none`` or ``read``.
- ``destructiveHint``: the method may change something (the negation of read-only).
- ``idempotentHint``: read-only: a repeat has no further effect.
- ``openWorldHint``: the method may reach past the workspace (``network`` effects or unknowns).

These are hints for clients deciding what to confirm; proctor's admission decides every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proctor.contracts.skill import AgentStep, AskStep, Method, ProcessStep, ToolStep, WaitStep

__all__ = ["TURN_ANNOTATIONS", "method_annotations", "method_effects"]

_QUIET = frozenset({"none", "read"})
_UNKNOWN = frozenset({"write", "network"})


def method_effects(method: Method, tools: Mapping[str, Any]) -> frozenset[str]:
    """The effect classes ``method`` can reach (unknown steps count as write and network)."""
    effects: set[str] = set()
    for step in method.steps:
        if isinstance(step, ToolStep):
            names: list[str] = [step.tool]
        elif isinstance(step, AgentStep):
            names = list(step.agent.calls.tools)
            if step.agent.calls.skills:
                effects |= _UNKNOWN
        elif isinstance(step, ProcessStep):
            names = ["command.execute"]  # an inline process tool runs as one
        elif isinstance(step, AskStep | WaitStep):
            names = []
        else:
            effects |= _UNKNOWN
            continue
        for name in names:
            tool = tools.get(name)
            effects |= {tool.effect} if tool is not None else _UNKNOWN
    return frozenset(effects)


def method_annotations(method: Method, tools: Mapping[str, Any]) -> dict[str, bool]:
    """The four hints for one served method (see the module docstring)."""
    effects = method_effects(method, tools)
    read_only = method.effects == "none" or effects <= _QUIET
    return {
        "readOnlyHint": read_only,
        "destructiveHint": not read_only,
        "idempotentHint": read_only,
        "openWorldHint": not read_only and "network" in effects,
    }


def _hints(
    read_only: bool, destructive: bool, idempotent: bool, open_world: bool
) -> dict[str, bool]:
    return {
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": open_world,
    }


TURN_ANNOTATIONS: dict[str, dict[str, bool]] = {
    "turn_list": _hints(True, False, True, False),
    "turn_status": _hints(True, False, True, False),
    "turn_read": _hints(True, False, True, False),
    # a repeat of a call_id answers the recorded call: idempotent, but the call may change things
    "turn_call": _hints(False, True, True, True),
    # completing drives the run on to its next pause or seal
    "turn_complete": _hints(False, True, False, True),
    "call_cancel": _hints(False, False, True, False),
}
"""The turn tools' hints."""

"""The approval floor (pure): what happens to a change under the run's ``effects``.

- ``allow``: every change that passed the other checks is admitted;
- ``none``: every change is refused (and a run whose fixed steps are certain to change
  something is refused before its first step, see :func:`certain_changes`);
- ``ask``: a change is admitted when a person approved exactly it (bound by its request
  digest) or a standing approval covers it; otherwise the run pauses on an approval request.

"Change" means a tool whose effect class is ``write``, ``network`` or ``process``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from proctor.contracts.values import dataclass
from proctor.core.authority import Authority, StandingApproval

__all__ = ["CHANGING", "LOCAL", "Change", "FloorDecision", "certain_changes", "decide"]

CHANGING: frozenset[str] = frozenset({"write", "network", "process"})
LOCAL: frozenset[str] = frozenset({"write", "process"})
"""Effects a ``{local: true}`` standing approval covers (network reaches beyond the host)."""


@dataclass(frozen=True)
class Change:
    """A changing call as the floor sees it.

    Attributes:
        tool: the tool's name.
        effect: its effect class.
        paths: workspace-relative files it changes (file tools).
        argv: the exact argv (commands), else ``None``.
        operation: ``connector/op`` for a connector operation, else ``None``.
        required: the call always needs a person's approval (``approval: required``): only
            a decision bound to it admits it, under any ``effects`` but ``none``.
    """

    tool: str
    effect: str
    paths: tuple[str, ...] = ()
    argv: tuple[str, ...] | None = None
    operation: str | None = None
    required: bool = False


@dataclass(frozen=True)
class FloorDecision:
    """The floor's verdict: ``admit``, ``refuse`` or ``pause``.

    ``standing`` and ``standing_index`` name the entry that admitted the change, if one did.
    """

    verdict: Literal["admit", "refuse", "pause"]
    reason: str = ""
    standing: StandingApproval | None = None
    standing_index: int | None = None


def _covering(authority: Authority, change: Change) -> tuple[int, StandingApproval] | None:
    for index, entry in enumerate(authority.standing_approvals):
        if entry.kind == "local" and change.effect in LOCAL:
            return index, entry
        if change.argv is not None and entry.covers_argv(change.argv) and entry.kind != "local":
            return index, entry
        if change.operation is not None and entry.covers_operation(change.operation):
            return index, entry
        edits = change.paths and change.effect == "write" and entry.kind == "edits"
        if edits and entry.covers_paths(change.paths):
            return index, entry
    return None


def decide(authority: Authority, change: Change, *, approved: bool = False) -> FloorDecision:
    """Decide one call. ``approved`` is true when a person's decision bound to this exact
    change (its request digest) approves it.
    """
    if change.required and not (authority.effects == "none" and change.effect in CHANGING):
        if approved:
            return FloorDecision("admit", "a person approved this exact call")
        return FloorDecision(
            "pause", f"'{change.tool}' is declared approval: required: a person decides each call"
        )
    if change.effect not in CHANGING or authority.effects == "allow":
        return FloorDecision("admit")
    if authority.effects == "none":
        return FloorDecision(
            "refuse",
            f"tool '{change.tool}' changes the world ({change.effect}) and this run's"
            " authority is effects: none",
        )
    if approved:
        return FloorDecision("admit", "a person approved this exact change")
    covering = _covering(authority, change)
    if covering is not None:
        index, entry = covering
        return FloorDecision("admit", "a standing approval covers it", entry, index)
    return FloorDecision("pause", f"tool '{change.tool}' needs a person's approval")


def certain_changes(steps: Iterable[tuple[str, str, str]]) -> list[str]:
    """The fixed steps certain to change something, as ``step (tool)`` labels.

    ``steps`` are ``(step_id, tool, effect)`` for each fixed tool step; agent turns choose
    their calls, so the floor decides those one by one instead.
    """
    return [f"{sid} ({tool})" for sid, tool, effect in steps if effect in CHANGING]

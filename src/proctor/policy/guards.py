"""Guards: what they receive and what they return (the registry that names them is
:mod:`proctor.policy.registry`).

A guard is a function ``GuardContext -> GuardVerdict | None``. ``None`` is a silent pass (nothing
recorded); a verdict is recorded whatever it says, and ``allowed=False`` is a denial that the
rule's ``enforcement`` turns into a refusal (``block``) or a recorded warning (``warn``).

Field names follow the reference kernel's guard interface, so a guard written for it reads the
same attributes here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_WRITE_BUDGET",
    "GuardContext",
    "GuardFn",
    "GuardVerdict",
]

DEFAULT_WRITE_BUDGET = 50
"""Changing calls per run before ``check_write_budget`` refuses (``PROCTOR_WRITE_BUDGET``)."""


@dataclass(frozen=True, slots=True)
class GuardContext:
    """What a guard sees of one proposed call. Guards must not mutate the mappings they get.

    Attributes:
        tool_name: the proctor tool name (``fs.read``, ``http.request`` ...).
        raw_args: the arguments as the caller sent them (before schema defaults).
        args: the arguments after schema validation (defaults filled).
        reason: the caller's stated reason for the call (``""`` when none was given).
        directive_id: the directive or skill the run executes, when there is one.
        run_history: the run's prior calls, oldest first, each a mapping with ``tool`` (a
            proctor tool name), ``args`` and ``outcome`` (``"ok"``, ``"failed"`` or
            ``"refused"``).
        workspace_relpaths: the workspace-relative paths the call touches, as containment
            resolved them (empty when the caller did not resolve any).
        write_budget: changing calls allowed per run (see :data:`DEFAULT_WRITE_BUDGET`).
    """

    tool_name: str
    raw_args: Mapping[str, Any]
    args: Mapping[str, Any]
    reason: str
    directive_id: str | None
    run_history: tuple[Mapping[str, Any], ...]
    workspace_relpaths: tuple[str, ...] = ()
    write_budget: int = DEFAULT_WRITE_BUDGET


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """A guard's opinion of a call.

    Attributes:
        allowed: ``False`` denies; the rule's enforcement decides what a denial does.
        message: one sentence a person can act on; never the secret it found.
        code: stable snake_case identifier of the finding (``sensitive_path`` ...).
        metadata: JSON-ready detail for the audit record (field paths, counts ...).
    """

    allowed: bool
    message: str
    code: str | None = None
    metadata: Mapping[str, Any] | None = None


GuardFn = Callable[[GuardContext], GuardVerdict | None]
"""The shape every guard has."""

"""Managed agents: provider dialects, the pinned model client, the turn loop, and the sessions
that drive directive runs with one (:mod:`.sessions`).

Surface: the names below and ``sessions``. May import the engine and every part under it; never
check, mcp or cli. The dialects speak each provider's HTTP shape with httpx directly (see
``docs/agents.md`` for why the ``openai``/``anthropic`` SDKs are not used at run time).
"""

from __future__ import annotations

from proctor.runtime.agents.loop import DEFAULT_MAX_STEPS, ManagedAgent, TurnStats, make_dialect
from proctor.runtime.agents.transport import CancelToken, ModelClient, RetryPolicy

__all__ = [
    "DEFAULT_MAX_STEPS",
    "CancelToken",
    "ManagedAgent",
    "ModelClient",
    "RetryPolicy",
    "TurnStats",
    "make_dialect",
]

"""Managed agents: provider dialects, the pinned model client and the turn loop.

The dialects speak each provider's HTTP shape with httpx directly (see ``docs/agents.md`` for
why the ``openai``/``anthropic`` SDKs are not used at run time).
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

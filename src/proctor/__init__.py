"""proctor: a governed execution runtime for AI agent skills.

The public Python API is exactly the names in ``__all__``; everything else is private. Names
are imported on first access (``__getattr__``), so ``import proctor`` stays cheap. To export a
name, add it to ``_EXPORTS`` (name -> module) and to ``__all__`` (in ruff's RUF022 order; a
test pins it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from proctor._version import __version__

if TYPE_CHECKING:
    from proctor.contracts.envelope import RunEnvelope
    from proctor.core.authority import Authority, parse_authority
    from proctor.errors import ProctorError
    from proctor.policy.evaluate import UNRESTRICTED
    from proctor.receipts.verify import VerifyResult
    from proctor.runtime.admission.governor import CallOutcome, CallSpec, Governor
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.host import AgentDriver, RunInterrupted
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.verify_folder import verify_receipt

__all__ = [
    "UNRESTRICTED",
    "AgentDriver",
    "Authority",
    "CallOutcome",
    "CallSpec",
    "Governor",
    "ProctorError",
    "RunEnvelope",
    "RunInterrupted",
    "Session",
    "VerifyResult",
    "Workspace",
    "__version__",
    "parse_authority",
    "verify_receipt",
]

_EXPORTS: dict[str, str] = {
    "UNRESTRICTED": "proctor.policy.evaluate",
    "AgentDriver": "proctor.runtime.engine.host",
    "Authority": "proctor.core.authority",
    "CallOutcome": "proctor.runtime.admission.governor",
    "CallSpec": "proctor.runtime.admission.governor",
    "Governor": "proctor.runtime.admission.governor",
    "ProctorError": "proctor.errors",
    "RunEnvelope": "proctor.contracts.envelope",
    "RunInterrupted": "proctor.runtime.engine.host",
    "Session": "proctor.runtime.engine.session",
    "VerifyResult": "proctor.receipts.verify",
    "Workspace": "proctor.runtime.boundary.workspace",
    "parse_authority": "proctor.core.authority",
    "verify_receipt": "proctor.runtime.records.verify_folder",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'proctor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

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
    from proctor.core.authority import Authority
    from proctor.errors import ProctorError
    from proctor.policy.evaluate import UNRESTRICTED
    from proctor.receipts.verify import VerifyResult
    from proctor.runtime.admission import CallOutcome, CallSpec, Governor
    from proctor.runtime.driver import Session
    from proctor.runtime.receipt_store import verify_receipt
    from proctor.runtime.workspace import Workspace

__all__ = [
    "UNRESTRICTED",
    "Authority",
    "CallOutcome",
    "CallSpec",
    "Governor",
    "ProctorError",
    "RunEnvelope",
    "Session",
    "VerifyResult",
    "Workspace",
    "__version__",
    "verify_receipt",
]

_EXPORTS: dict[str, str] = {
    "UNRESTRICTED": "proctor.policy.evaluate",
    "Authority": "proctor.core.authority",
    "CallOutcome": "proctor.runtime.admission",
    "CallSpec": "proctor.runtime.admission",
    "Governor": "proctor.runtime.admission",
    "ProctorError": "proctor.errors",
    "RunEnvelope": "proctor.contracts.envelope",
    "Session": "proctor.runtime.driver",
    "VerifyResult": "proctor.receipts.verify",
    "Workspace": "proctor.runtime.workspace",
    "verify_receipt": "proctor.runtime.receipt_store",
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

"""The outcome of :func:`proctor.receipts.verify.verify_tree`: :class:`VerifyResult`.

:mod:`proctor.receipts.verify` exports the names here as its own. ``status`` is ``verified``,
``unverified`` or ``invalid``.
"""

from __future__ import annotations

from typing import Any, Literal

from proctor.contracts.values import dataclass, field

__all__ = ["VERIFY_SCHEMA", "Status", "VerifyResult"]

VERIFY_SCHEMA = "proctor.verify.v1"

Status = Literal["verified", "unverified", "invalid"]


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """The outcome of verifying one receipt tree.

    ``reason`` is ``ok`` when verified, else a stable code (see the module docstring);
    ``failing_receipt_id`` names the first receipt that failed (or could not be checked) and
    ``parent_id`` the receipt that committed it. Counts cover the receipts read so far.
    """

    status: Status
    reason: str
    message: str
    receipt_id: str | None
    failing_receipt_id: str | None = None
    parent_id: str | None = None
    receipts: int = 0
    signed: int = 0
    amortized: int = 0
    unknown_key: int = 0
    depth: int = 0
    key_ids: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True only when the status is ``verified``."""
        return self.status == "verified"

    def to_json(self) -> dict[str, Any]:
        """The result as a ``proctor.verify.v1`` document."""
        return {
            "schema": VERIFY_SCHEMA,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "receipt_id": self.receipt_id,
            "failing_receipt_id": self.failing_receipt_id,
            "parent_id": self.parent_id,
            "counts": {
                "receipts": self.receipts,
                "signed": self.signed,
                "amortized": self.amortized,
                "unknown_key": self.unknown_key,
                "depth": self.depth,
            },
            "key_ids": list(self.key_ids),
        }

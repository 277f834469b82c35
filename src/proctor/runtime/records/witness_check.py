"""Receipts checked against the seals the witnesses hold: ``proctor verify --witnesses``.

The seam: :mod:`.witness` sends seals and fetches them (countersignatures checked); this module
judges receipts by them. Every run that seals in a workspace with witnesses is sent to them
(its run id and run receipt id, signed by the workspace key), so:

- a run receipt no witness holds was never sealed here while the witnesses were configured:
  made up, or a tree rewritten and signed again (its root id changed). When the run store
  names the run that receipt belongs to and a witness holds another receipt for that run, the
  tree was rewritten (``witness_rewritten``); otherwise it is ``witness_unseen``;
- a run receipt a witness holds that the receipt store no longer has was deleted (a removed
  ``.proctor/`` loses every one: ``witness_receipts_gone``), which the witnesses alone show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import UsageError
from proctor.runtime.records.witness import (
    WitnessedSeal,
    fetch_seals,
    witness_settings,
    workspace_id,
)

__all__ = ["WitnessCheck", "check_receipt", "check_workspace", "witnessed_seals"]

_SHOWN = 20  # receipts named in a report; the count covers the rest


@dataclass(frozen=True)
class WitnessCheck:
    """What the witnesses say of a receipt (or of every witnessed receipt of a workspace).

    Attributes:
        ok: nothing the witnesses hold contradicts the receipt store.
        reason: ``witnessed``, ``witness_unseen``, ``witness_rewritten`` or
            ``witness_receipts_gone``.
        seals: how many seals of this workspace the witnesses hold.
        holders: the witnesses that hold the receipt checked.
        gone: witnessed run receipts missing from the receipt store (``run_id``,
            ``receipt_id``, ``witness``), at most twenty; ``missing`` counts them all.
    """

    ok: bool
    reason: str
    message: str
    seals: int
    holders: tuple[str, ...] = ()
    gone: tuple[dict[str, str], ...] = ()
    missing: int = 0

    def to_json(self) -> dict[str, Any]:
        """The ``witnesses`` member of a ``proctor.verify.v1`` document."""
        return {
            "ok": self.ok,
            "reason": self.reason,
            "message": self.message,
            "seals": self.seals,
            "holders": list(self.holders),
            "missing": self.missing,
            "gone": [dict(g) for g in self.gone],
        }


def witnessed_seals(root: Path, environ: Mapping[str, str]) -> list[WitnessedSeal]:
    """The seals the configured witnesses hold of the workspace at ``root``, made with a key
    this machine trusts (countersignatures checked).

    Raises:
        UsageError: (``witness_not_configured``) no witness URL is configured.
        ConfigError, StoreError: as :func:`~proctor.runtime.records.witness.fetch_seals`
            (``witness_key_missing``, ``witness_unreachable``, ``witness_signature_invalid``).
    """
    from proctor.runtime.home.keys import trusted_local_keys

    urls, keys = witness_settings(environ)
    if not urls:
        raise UsageError(
            "no witness is configured: set PROCTOR_WITNESS_URLS (or witness.urls in the home's"
            " config.json)",
            code="witness_not_configured",
        )
    ours = {k.key_id for k in trusted_local_keys(environ)}
    return fetch_seals(urls, keys, workspace_id(root), ours)


def check_receipt(
    seals: list[WitnessedSeal], receipt_id: str, run_of: Callable[[str], str | None]
) -> WitnessCheck:
    """Whether a witness holds the run receipt ``receipt_id``; ``run_of`` names the run the
    run store says it belongs to (``None`` when it names none)."""
    holders = tuple(sorted({s.url for s in seals if s.receipt_id == receipt_id}))
    if holders:
        return WitnessCheck(
            True,
            "witnessed",
            f"{len(holders)} witness(es) countersigned this receipt when its run sealed",
            len(seals),
            holders,
        )
    run_id = run_of(receipt_id)
    others = sorted({s.receipt_id for s in seals if run_id is not None and s.run_id == run_id})
    if others:
        return WitnessCheck(
            False,
            "witness_rewritten",
            f"run {run_id} sealed as {others[0]} by the witnesses' copies, not as this"
            " receipt: its tree was rewritten after the seal",
            len(seals),
        )
    return WitnessCheck(
        False,
        "witness_unseen",
        "no witness countersigned this receipt: it was not sealed in this workspace while"
        " the witnesses were configured (made up, or a rewritten tree signed again)",
        len(seals),
    )


def check_workspace(seals: list[WitnessedSeal], present: Callable[[str], bool]) -> WitnessCheck:
    """Whether every run receipt the witnesses hold is still in the receipt store
    (``present``)."""
    gone: dict[str, dict[str, str]] = {}
    for seal in seals:
        if seal.receipt_id not in gone and not present(seal.receipt_id):
            gone[seal.receipt_id] = {
                "run_id": seal.run_id,
                "receipt_id": seal.receipt_id,
                "witness": seal.url,
            }
    held = len({s.receipt_id for s in seals})
    if gone:
        return WitnessCheck(
            False,
            "witness_receipts_gone",
            f"{len(gone)} of the {held} run receipts the witnesses hold are gone from the"
            " receipt store (deleted, or the workspace's .proctor/ was removed)",
            len(seals),
            gone=tuple(list(gone.values())[:_SHOWN]),
            missing=len(gone),
        )
    return WitnessCheck(
        True,
        "witnessed",
        f"every one of the {held} run receipts the witnesses hold is in the receipt store",
        len(seals),
    )

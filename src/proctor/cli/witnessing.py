"""``proctor verify --witnesses``: a receipt, or every witnessed receipt of the workspace,
checked against the seals the witnesses hold (:mod:`proctor.runtime.records.witness_check`).

Kept apart from :mod:`proctor.cli.verifying`, whose plain path imports nothing it does not
need: this one reads the workspace, the run store and the witnesses over the network.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["against_witnesses", "verify_witnessed"]


def _workspace() -> Any:
    from proctor.runtime.boundary.workspace import Workspace

    return Workspace.discover(Path.cwd())


def _receipts(workspace: Any) -> Any:
    from proctor.runtime.records.receipts import ReceiptStore, receipt_dir

    return ReceiptStore(receipt_dir(workspace.state_dir, os.environ))


def _present(store: Any, receipt_id: str) -> bool:
    from proctor.errors import ProctorError

    try:
        return store.get(receipt_id) is not None
    except ProctorError:
        return False


def _run_of(workspace: Any) -> Any:
    """``receipt id -> run id`` as the run store names it (``None`` without a run store)."""
    from proctor.runtime.records.store_file import run_store_path

    def run_of(receipt_id: str) -> str | None:
        if not (
            os.environ.get("PROCTOR_DATABASE_URL")
            or run_store_path(workspace.state_dir, os.environ).exists()
        ):
            return None
        from proctor.runtime.records.backend import open_run_store

        store = open_run_store(workspace.state_dir, os.environ, "the run store")
        try:
            after = None
            while True:
                page = store.list_runs(after=after, limit=500)
                for record in page:
                    if record.receipt_id == receipt_id:
                        return record.run_id
                if len(page) < 500:
                    return None
                after = page[-1].cursor
        finally:
            store.close()

    return run_of


def _refuse_non_run(store: Any, target: str, receipt_id: str) -> None:
    """Witnesses hold run receipts: a step or call receipt is refused before anything is
    judged by them (``witness_target_not_run``)."""
    from proctor.errors import ProctorError, UsageError
    from proctor.receipts.model import parse_envelope

    data = None
    path = Path(target)
    try:
        data = path.read_bytes() if path.is_file() else store.get(receipt_id)
        kind = None if data is None else parse_envelope(data).kind
    except (OSError, ProctorError):
        return  # unreadable: the tree's own verification says so
    if kind not in (None, "run"):
        raise UsageError(
            f"the witnesses hold run receipts; {receipt_id} is a {kind} receipt: verify the"
            " run receipt above it with --witnesses",
            code="witness_target_not_run",
        )


def against_witnesses(doc: dict[str, Any], result: Any, target: str) -> dict[str, Any]:
    """``doc`` (a ``proctor.verify.v1`` document of ``result``) with what the witnesses say
    of its root added as ``witnesses``; a receipt they never countersigned makes it invalid.

    Raises:
        UsageError: ``witness_not_configured``, ``witness_target_not_run``.
        ConfigError, StoreError: the witnesses cannot be read or lie (see
            :func:`proctor.runtime.records.witness_check.witnessed_seals`).
    """
    from proctor.runtime.records.witness_check import check_receipt, witnessed_seals

    receipt_id = result.receipt_id
    if receipt_id is None:
        return doc
    workspace = _workspace()
    store = _receipts(workspace)
    _refuse_non_run(store, target, receipt_id)
    seals = witnessed_seals(workspace.root, os.environ)
    check = check_receipt(seals, receipt_id, _run_of(workspace))
    doc = {**doc, "witnesses": check.to_json()}
    if not check.ok and doc["status"] != "invalid":
        doc.update(status="invalid", reason=check.reason, message=check.message)
    return doc


def verify_witnessed(as_json: bool, key_path: str | None) -> None:
    """Every run receipt the witnesses hold of this workspace must be in its receipt store and
    verify; print the result (``proctor.verify.v1`` with ``witnesses``) and exit 0 or 1."""
    from proctor.receipts.verify_result import VerifyResult
    from proctor.runtime.records.verify_folder import verify_receipt
    from proctor.runtime.records.witness_check import check_workspace, witnessed_seals

    workspace = _workspace()
    store = _receipts(workspace)
    seals = witnessed_seals(workspace.root, os.environ)
    check = check_workspace(seals, lambda rid: _present(store, rid))
    result = VerifyResult("verified", "ok", check.message, None)
    if not check.ok:
        result = VerifyResult("invalid", check.reason, check.message, None)
    else:
        checked = 0
        for receipt_id in sorted({s.receipt_id for s in seals}):
            tree = verify_receipt(receipt_id, public_key=key_path)
            checked += tree.receipts
            if not tree.ok:
                result = VerifyResult(
                    "invalid" if tree.status == "invalid" else tree.status,
                    tree.reason,
                    f"witnessed receipt {receipt_id}: {tree.message}",
                    None,
                    failing_receipt_id=tree.failing_receipt_id or receipt_id,
                    parent_id=tree.parent_id,
                    receipts=checked,
                )
                break
        else:
            result = VerifyResult("verified", "ok", check.message, None, receipts=checked)
    doc = {**result.to_json(), "witnesses": check.to_json()}
    if as_json:
        from proctor.cli.render import dump_json

        dump_json(doc)
    else:
        import click

        from proctor.cli.paint import inert

        click.echo(inert(f"{doc['status']}: {doc['message']}"))
        click.echo(f"witnessed seals: {check.seals}; receipts checked: {result.receipts}")
        for gone in check.gone[:5]:
            click.echo(inert(f"  gone: {gone['receipt_id']} (run {gone['run_id']})"))
    sys.stdout.flush()
    if doc["status"] != "verified":
        sys.exit(1 if doc["status"] == "invalid" else 4)

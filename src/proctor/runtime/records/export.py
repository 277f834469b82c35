"""A sealed run's receipts exported as one DSSE envelope holding an in-toto statement:
:func:`export_dsse`, behind ``proctor export RECEIPT --format dsse``.

The seam: receipts are read through the store's reader (:meth:`ReceiptStore.get`) and the
tree is verified (:func:`proctor.receipts.verify.verify_tree`) before anything is signed, so a
statement is only ever made of a tree that verifies now; the statement's form and signature
are the pure :mod:`proctor.receipts.intoto`.

Subjects (what the run produced or changed) come from the run store, but only from calls the
verified tree vouches for: a call's result is used only when the digest of that result is the
``outputs_digest`` of a call receipt of the same step and tool in the tree. A run store that
was edited after the seal therefore cannot add a subject; a tree with no run store beside it
(an auditor's copy) is stated with the run receipt as its only subject.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.canonical import digest
from proctor.receipts.intoto import Subject, seal_statement, statement, tree_summary
from proctor.receipts.model import parse_envelope
from proctor.receipts.parts import RECEIPT_ID
from proctor.receipts.signing import PublicKey, Signer
from proctor.runtime.records.runs import RunRecord, RunStore

__all__ = ["ENVELOPE_FORMATS", "export_dsse", "resolve_root", "tree_bodies"]

ENVELOPE_FORMATS = ("dsse",)
_ARTIFACT = "artifact:sha256:"
_MAX_DEPTH = 12  # how deep a call result is searched for changed files and artifacts
_PAGE = 500

Loader = Callable[[str], "bytes | None"]


def resolve_root(target: str, store: RunStore | None) -> tuple[str, RunRecord | None]:
    """The run receipt id ``target`` names (a receipt id, or a sealed run's id) and, when the
    run store holds it, the run's record.

    Raises:
        UsageError: ``run_not_found`` (neither a receipt id nor a run of this workspace),
            ``run_not_sealed`` (the run has no receipt yet).
    """
    match = RECEIPT_ID.match(target.strip().lower())
    if match is not None:
        return "sha256:" + match.group(1), None
    record = store.get_run(target) if store is not None else None
    if record is None:
        raise UsageError(
            f"{target[:80]!r} is neither a receipt id nor a run of this workspace",
            code="run_not_found",
        )
    if record.receipt_id is None:
        raise UsageError(
            f"run {record.run_id} has not sealed; only a sealed run's receipts are exported",
            code="run_not_sealed",
        )
    return record.receipt_id, record


def tree_bodies(root_id: str, load: Loader) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every receipt of a tree as ``(receipt_id, body)``, parents first, in execution order.

    Call it on a tree :func:`~proctor.receipts.verify.verify_tree` verified: a receipt that is
    missing now was removed since, and is refused.

    Raises:
        ReceiptInvalid: (``export_tree_changed``) a receipt is gone or no longer parses.
    """
    stack = [root_id]
    while stack:
        rid = stack.pop()
        data = load(rid)
        if data is None:
            raise ReceiptInvalid(
                f"receipt {rid} went missing while it was exported", code="export_tree_changed"
            )
        body = parse_envelope(data).body
        yield rid, body
        stack.extend(child["receipt_id"] for child in reversed(body["children"]))


def _run_records(store: RunStore, wanted: set[str]) -> dict[str, RunRecord]:
    """The run records whose receipt is one of ``wanted`` (the tree's run receipts)."""
    found: dict[str, RunRecord] = {}
    after: int | None = None
    while len(found) < len(wanted):
        page = store.list_runs(after=after, limit=_PAGE)
        for record in page:
            if record.receipt_id in wanted:
                found[record.receipt_id] = record
        if len(page) < _PAGE:
            break
        after = page[-1].cursor
    return found


def _changed(value: Any, depth: int = 0) -> Iterator[Subject]:
    """Files a result says were written (``path``, ``content_digest``, ``previous_digest``)
    and artifacts it names (``ref``, ``digest``), anywhere in the result."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        path, after = value.get("path"), value.get("content_digest")
        if (
            isinstance(path, str)
            and "previous_digest" in value
            and isinstance(after, str)
            and after.startswith("sha256:")
        ):
            yield f"file:{path}", after.removeprefix("sha256:")
        ref, held = value.get("ref"), value.get("digest")
        if isinstance(ref, str) and ref.startswith(_ARTIFACT) and held == ref[9:]:
            yield ref, ref.removeprefix(_ARTIFACT)
        for item in value.values():
            yield from _changed(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _changed(item, depth + 1)


def _subjects(
    store: RunStore, bodies: list[tuple[str, dict[str, Any]]]
) -> tuple[list[Subject], int]:
    """The subjects the tree vouches for, and how many of its runs the store held."""
    runs = {rid for rid, body in bodies if body["kind"] == "run"}
    vouched = {
        (body["subject"].get("step_id"), body["subject"].get("tool"), body["outputs_digest"])
        for _, body in bodies
        if body["kind"] == "call" and body.get("outputs_digest")
    }
    records = _run_records(store, runs)
    out: list[Subject] = []
    for record in sorted(records.values(), key=lambda r: r.created_at):
        for call in store.calls(record.run_id):
            settled = call.result if isinstance(call.result, Mapping) else {}
            if call.state != "settled" or "result" not in settled:
                continue
            result = settled["result"]
            try:
                held = digest(result)
            except UsageError:
                continue
            if (call.step_id, call.tool, held) in vouched:
                out.extend(_changed(result))
    return out, len(records)


def export_dsse(
    target: str,
    *,
    load: Loader,
    store: RunStore | None,
    signer: Signer,
    trusted: list[PublicKey],
) -> dict[str, Any]:
    """One DSSE envelope (``application/vnd.in-toto+json``) stating the sealed run ``target``
    (a run receipt id, or a run id) signed by ``signer``.

    ``load`` reads a receipt by id (the store's reader); ``trusted`` are the keys the tree must
    verify against; ``store`` is the workspace's run store, where the subjects come from.

    Raises:
        UsageError: ``run_not_found``, ``run_not_sealed`` (see :func:`resolve_root`).
        ReceiptInvalid: ``export_unverified`` (the tree does not verify now: nothing is
            signed), ``export_tree_invalid`` (not a run receipt), ``export_tree_changed``.
    """
    from proctor.receipts.verify import verify_tree

    root_id, _ = resolve_root(target, store)
    checked = verify_tree(root_id, load, trusted)
    if not checked.ok:
        failing = checked.failing_receipt_id or root_id
        raise ReceiptInvalid(
            f"receipt {root_id} does not verify ({checked.status}: {checked.reason} at"
            f" {failing}); nothing was exported. `proctor verify {root_id}` shows why",
            code="export_unverified",
        )
    bodies = list(tree_bodies(root_id, load))
    summary = tree_summary(root_id, [body for _, body in bodies])
    subjects: list[Subject] = []
    held = 0
    if store is not None:
        subjects, held = _subjects(store, bodies)
    summary["run_store"] = "held" if held else "absent"
    return seal_statement(statement(summary, subjects, signer.key_id), signer)

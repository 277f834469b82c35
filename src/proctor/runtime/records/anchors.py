"""The audit log's anchors: where they are found, and the log checked against all of them.

An anchor (:class:`~proctor.runtime.records.chain.Anchor`) commits the log's first ``lines``
lines by the digest of line ``lines``. They are found in:

- every run receipt of the receipt store (its ``audit_head``, the log's head just before the
  run's ``run_sealed`` line), and of an auditor's folder of receipts (``--receipts-dir``);
- the run store's newest anchor (the head just after the newest ``run_sealed`` line).

A receipt's signature is not checked here: a forged anchor can only make the check fail, never
pass, and a receipt that is damaged or missing is named in :attr:`LogCheck.notes` (``proctor
verify`` is what proves a receipt). All of them must match one log: a workspace whose receipt
store served another ``PROCTOR_AUDIT_LOG`` earlier reports those anchors as broken.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass, field, replace
from proctor.errors import ProctorError, StoreError
from proctor.runtime.records import store_file
from proctor.runtime.records.chain import Anchor, ChainReport, verify_bytes, verify_chain

__all__ = [
    "LogCheck",
    "check_log",
    "folder_anchors",
    "receipt_anchors",
    "store_anchor",
    "workspace_log_check",
]

_FILE = re.compile(r"\A[0-9a-f]{64}\.json\Z")


@dataclass
class LogCheck:
    """The audit log checked against its anchors.

    Attributes:
        report: the chain and anchor report (``report.ok`` is the verdict).
        exists: whether the log file exists (a missing log with anchors is broken).
        notes: anchors that could not be read (a receipt listed but missing, unreadable).
    """

    report: ChainReport
    exists: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The check as a JSON-ready mapping (the report's keys, plus ``exists``, ``notes``)."""
        return {**self.report.to_dict(), "exists": self.exists, "notes": list(self.notes)}


def _label(receipt_id: str, body: Mapping[str, Any]) -> str:
    subject = body.get("subject") or {}
    return (
        f"the receipt of {subject.get('skill')}#{subject.get('method')} sealed"
        f" {body.get('ended_at')} ({receipt_id[:19]}...)"
    )


def _anchor_of(receipt_id: str, data: bytes) -> Anchor | None:
    """The anchor a receipt file commits, or ``None`` (not a run receipt, or none recorded).

    Raises:
        ReceiptInvalid: the file is not a receipt.
    """
    from proctor.receipts.model import parse_envelope

    envelope = parse_envelope(data)
    head = envelope.body.get("audit_head")
    if envelope.kind != "run" or not isinstance(head, dict):
        return None
    return Anchor(head["lines"], head["last_digest"], _label(receipt_id, envelope.body))


def receipt_anchors(directory: Path) -> tuple[list[Anchor], list[str]]:
    """The anchors of every run receipt the receipt store at ``directory`` lists.

    Returns the anchors and notes naming run receipts that are listed but missing or unreadable.

    Raises:
        ReceiptInvalid: (``receipt_store_foreign``) the folder is not a proctor receipt store.
        StoreError: the index cannot be read.
    """
    from proctor.runtime.records.receipts import ReceiptStore

    store = ReceiptStore(directory)
    anchors: list[Anchor] = []
    notes: list[str] = []
    for entry in store.index():
        if entry.get("kind") != "run":
            continue
        receipt_id = str(entry.get("receipt_id"))
        try:
            data = store.get(receipt_id)
            anchor = None if data is None else _anchor_of(receipt_id, data)
        except ProctorError as exc:
            notes.append(f"run receipt {receipt_id[:19]}... is unreadable ({exc.code})")
            continue
        if data is None:
            notes.append(f"run receipt {receipt_id[:19]}... is listed in the index but missing")
        elif anchor is not None:
            anchors.append(anchor)
    return anchors, notes


def folder_anchors(folder: Path) -> tuple[list[Anchor], list[str]]:
    """The anchors of the run receipts in a plain folder of receipts (an auditor's copy: no
    index needed): its ``<hex>.json`` files and the receipts of its ``packs``.

    Raises:
        OSError: the folder cannot be listed. StoreError: a pack cannot be read.
    """
    from proctor.runtime.records.receipt_packs import PACKS_DIR, pack_names, records_of

    anchors: list[Anchor] = []
    notes: list[str] = []

    def take(name: str, receipt_id: str, data: bytes) -> None:
        try:
            anchor = _anchor_of(receipt_id, data)
        except ProctorError as exc:
            notes.append(f"{name} is unreadable ({exc.code})")
            return
        if anchor is not None:
            anchors.append(anchor)

    for path in sorted(folder.iterdir()):
        if not _FILE.match(path.name):
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            notes.append(f"{path.name} is unreadable ({type(exc).__name__})")
            continue
        take(path.name, "sha256:" + path.name[:64], data)
    for pack in pack_names(folder):
        data = (folder / PACKS_DIR / f"{pack}.pack").read_bytes()
        for hex_id, at, size in records_of(data):
            take(f"{pack}.pack at {at}", "sha256:" + hex_id, data[at : at + size])
    return anchors, notes


def store_anchor(path: Path) -> Anchor | None:
    """The run store's newest anchor; ``None`` when there is no store (one is never created).

    Raises:
        StoreError: the store cannot be read.
    """
    if not path.is_file():
        return None
    from proctor.runtime.records.sqlite import SQLiteRunStore

    store = SQLiteRunStore(path)
    try:
        kept = store.audit_anchor()
    finally:
        store.close()
    if kept is None:
        return None
    return Anchor(
        int(kept["lines"]),
        kept.get("last_digest"),
        f"the run store's newest anchor (after run {kept.get('run_id')} sealed)",
    )


def database_anchor(environ: Mapping[str, str]) -> Anchor | None:
    """The newest anchor the PostgreSQL run store at ``PROCTOR_DATABASE_URL`` keeps.

    Raises:
        StoreError: the store cannot be reached or read.
    """
    from proctor.runtime.records.postgres import PostgresRunStore

    kept = PostgresRunStore(environ["PROCTOR_DATABASE_URL"]).audit_anchor()
    if kept is None:
        return None
    return Anchor(
        int(kept["lines"]),
        kept.get("last_digest"),
        f"the run store's newest anchor (after run {kept.get('run_id')} sealed)",
    )


def check_log(log: Path, anchors: list[Anchor], notes: list[str] | None = None) -> LogCheck:
    """Check the log at ``log`` against ``anchors``; a missing log is checked as an empty one.

    Raises:
        OSError: the log exists but cannot be read.
    """
    try:
        report, exists = verify_chain(log, anchors), True  # streamed: memory stays flat
    except FileNotFoundError:
        report, exists = verify_bytes(b"", anchors), False
    if not exists and not report.ok:
        report = ChainReport(
            ok=False,
            lines=0,
            first_bad_line=report.first_bad_line,
            reason=f"the audit log is missing: {report.reason}",
            anchors=report.anchors,
            broken_anchors=report.broken_anchors,
            code=report.code,
        )
    return LogCheck(report, exists, list(notes or []))


def workspace_log_check(
    log: Path,
    state_dir: Path,
    environ: Mapping[str, str],
    *,
    receipts_dir: Path | None = None,
    extra: Sequence[Anchor] = (),
) -> LogCheck:
    """Check a workspace's log against every anchor its receipt store, its run store,
    (when given) an auditor's ``receipts_dir`` and ``extra`` (a witness's) hold.

    Raises:
        OSError: the log or ``receipts_dir`` cannot be read.
        ReceiptInvalid, StoreError: the receipt store or the run store cannot be read. A run
            store that is gone although records show it existed (``store_missing``) fails
            the check, named in its reason and notes.
    """
    from proctor.runtime.records.receipts import receipt_dir

    anchors, notes = receipt_anchors(receipt_dir(state_dir, environ))
    anchors += extra
    if receipts_dir is not None:
        more, more_notes = folder_anchors(receipts_dir)
        anchors += more
        notes += more_notes
    missing: StoreError | None = None
    if environ.get("PROCTOR_DATABASE_URL"):
        kept = database_anchor(environ)
    else:
        from proctor.runtime.records.store_evidence import refuse_forgotten_store

        path = store_file.run_store_path(state_dir, environ)
        named = environ.get("PROCTOR_DATABASE_PATH")
        shown = "$PROCTOR_DATABASE_PATH" if named else f"{state_dir.name}/{path.name}"
        try:  # a store the records show existed is missing: its anchor is gone with it
            refuse_forgotten_store(
                path, shown, audit_log=log, receipts_dir=receipt_dir(state_dir, environ)
            )
            kept = store_anchor(path)
        except StoreError as exc:
            if exc.code != "store_missing":
                raise
            kept, missing = None, exc
    if kept is not None:
        anchors.append(kept)
    check = check_log(log, anchors, notes)
    if missing is not None:  # the log is still checked against every other anchor
        check.notes.append(f"{missing.code}: {missing.message}")
        if check.report.ok:
            check.report = replace(
                check.report, ok=False, reason=f"{missing.code}: {missing.message}"
            )
    return check

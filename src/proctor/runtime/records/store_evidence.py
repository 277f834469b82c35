"""A run store that is gone although the workspace's records show it existed: refused, never
re-created empty over that record.

Seam: :mod:`.store_file` builds a store where there is none and checks one that is there; this
module judges the absence first, from what outlives a store file:

- the mark of its last passing check (``runs.sqlite-checked``, written beside it);
- run receipts in the workspace's receipt store (every sealed run has one);
- ``run_started`` lines in the audit log (every run that began wrote one).

Any of them means a store held runs, so opening would silently start an empty store and
forget them (``history`` would lose every run, a paused run could never be resumed): the open
is refused ``store_missing`` with the way back (restore the file) and the way forward on
purpose (``proctor store init --new``, which :func:`start_over` implements and audits). Nothing
is looked at while the store file exists: the cost is one ``lstat`` on every open.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from proctor.errors import StoreError
from proctor.runtime.records.store_file import MARK_SUFFIX

if TYPE_CHECKING:
    from proctor.runtime.records.audit import AuditLog

__all__ = [
    "StoreEvidence",
    "evidence_of_store",
    "refuse_forgotten_in",
    "refuse_forgotten_store",
    "start_over",
]

_STARTED = b'"event":"run_started"'


class StoreEvidence:
    """What shows a store existed: the sentences that name each trace (empty: none)."""

    def __init__(self, found: list[str]) -> None:
        self.found = found

    def __bool__(self) -> bool:
        return bool(self.found)

    def sentence(self) -> str:
        """The traces joined for a message."""
        return "; ".join(self.found)


def evidence_of_store(path: Path, *, audit_log: Path, receipts_dir: Path) -> StoreEvidence:
    """The traces a store at ``path`` left in its folder, its audit log and its receipts.

    Unreadable records count as no evidence from them (the refusal that matters for an
    unreadable folder is the one opening the store gives).
    """
    found: list[str] = []
    if os.path.lexists(path.with_name(path.name + MARK_SUFFIX)):
        found.append(f"its check mark {path.name}{MARK_SUFFIX} is still there")
    runs = _run_receipts(receipts_dir)
    if runs:
        found.append(f"the receipt store holds {runs} run receipt{'s' if runs != 1 else ''}")
    started = _run_starts(audit_log)
    if started:
        found.append(
            f"the audit log {audit_log.name} records {started} run start"
            f"{'s' if started != 1 else ''}"
        )
    return StoreEvidence(found)


def refuse_forgotten_store(path: Path, shown: str, *, audit_log: Path, receipts_dir: Path) -> None:
    """Refuse to open (and so create) the store at ``path`` when it is missing but evidence
    shows it existed; do nothing when it is there or nothing shows it ever was.

    Raises:
        StoreError: ``store_missing``, naming the evidence and both ways out.
    """
    if str(path) == ":memory:" or os.path.lexists(path):
        return
    evidence = evidence_of_store(path, audit_log=audit_log, receipts_dir=receipts_dir)
    if not evidence:
        return
    raise StoreError(
        f"the run store {shown} is missing, but {evidence.sentence()}: a store held runs"
        " here, and proctor will not start an empty one over that record. Restore the file"
        f" from a backup (with {path.name}-wal if the backup has one) and run again; or, to"
        " start over on purpose and lose those runs' records, run `proctor store init --new`"
        " (it is audited)",
        code="store_missing",
        details={"evidence": list(evidence.found)},
    )


def refuse_forgotten_in(
    root: Path, state_dir: Path, environ: Mapping[str, str], path: Path, shown: str
) -> None:
    """:func:`refuse_forgotten_store` with the workspace's own audit log and receipt store
    (``PROCTOR_AUDIT_LOG``, ``PROCTOR_RECEIPT_DIR`` when set).

    Raises:
        StoreError: ``store_missing``.
    """
    from proctor.runtime.records.audit import audit_path
    from proctor.runtime.records.receipts import receipt_dir

    refuse_forgotten_store(
        path,
        shown,
        audit_log=audit_path(root, environ),
        receipts_dir=receipt_dir(state_dir, environ),
    )


def _run_receipts(directory: Path) -> int:
    from proctor.errors import ProctorError
    from proctor.runtime.records.receipts import ReceiptStore

    try:
        return sum(1 for e in ReceiptStore(directory).index() if e.get("kind") == "run")
    except (OSError, ProctorError):
        return 0


def _run_starts(log: Path) -> int:
    try:
        with open(log, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return 0
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                count, at = 0, data.find(_STARTED)
                while at >= 0:
                    count += 1
                    at = data.find(_STARTED, at + 1)
                return count
    except (OSError, ValueError):
        return 0


def start_over(
    path: Path,
    shown: str,
    *,
    audit: AuditLog,
    receipts_dir: Path,
) -> StoreEvidence:
    """Start a new, empty run store at ``path`` on a person's word (``proctor store init
    --new``), writing ``store_started_over`` to the audit log first, with the evidence of the
    store it replaces. Returns that evidence.

    Raises:
        StoreError: ``store_exists`` (a store file is there: it is never replaced or emptied;
            move it aside first); ``audit_unwritable`` (the audit line could not be written,
            so nothing is started); the new store's own refusals.
    """
    from proctor.runtime.records.sqlite import SQLiteRunStore

    if os.path.lexists(path):
        raise StoreError(
            f"a run store is already at {shown}; `proctor store init --new` only starts one"
            " where none is. To start over, move that file (and its -wal and -shm files)"
            " aside first",
            code="store_exists",
        )
    evidence = evidence_of_store(path, audit_log=audit.path, receipts_dir=receipts_dir)
    record = audit.emit(
        "store_started_over",
        run_id=None,
        step_index=None,
        fsync=True,
        store=shown,
        evidence=list(evidence.found),
    )
    if record.get("audit_persisted") is False:
        raise StoreError(
            f"the audit log {audit.path.name} could not record the new start, so no store"
            " was started; free the disk or fix the log's permissions and try again",
            code="audit_unwritable",
        )
    SQLiteRunStore(path, shown=shown).close()
    return evidence

"""The audit log: an append-only JSON Lines file that is also a hash chain.

Each event is one line, written and flushed when it happens (never buffered to the run's end).
The record starts with ``schema_version, event_id, run_id, sequence, step_index, timestamp,
event, redacted_fields``; the event's own fields follow flat, sanitized with
:func:`proctor.runtime.boundary.sanitize.scrub_value`; the last field ``prev`` is ``sha256:`` + the
hex
digest of the previous line's bytes (without its newline), or :data:`GENESIS` on the first line.

Durability: lines are flushed to the OS per event but not fsynced (an fsync per call would cost
more than the rest of admission); pass ``fsync=True`` for run seals and other events that must
survive a power cut. Several processes may append to one file: the append and the read of the
previous digest happen under an exclusive ``fcntl.flock``.

A write failure (disk full, permissions) does not crash the run: :meth:`AuditLog.emit` returns
the record with ``audit_persisted: False`` and :attr:`AuditLog.failures` counts it, so the run
can refuse to seal as complete or report the gap.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from proctor.runtime.boundary.sanitize import TaintSet, scrub_value

__all__ = [
    "ENV_VAR",
    "FIXED_FIELDS",
    "GENESIS",
    "SCHEMA_VERSION",
    "AuditLog",
    "ChainReport",
    "audit_path",
    "line_digest",
    "verify_chain",
]

SCHEMA_VERSION = "1"
ENV_VAR = "PROCTOR_AUDIT_LOG"
GENESIS = "sha256:" + "0" * 64
FIXED_FIELDS = (
    "schema_version",
    "event_id",
    "run_id",
    "sequence",
    "step_index",
    "timestamp",
    "event",
    "redacted_fields",
)
_RESERVED = frozenset((*FIXED_FIELDS, "prev"))


def audit_path(workspace_root: Path, env: Mapping[str, str]) -> Path:
    """``PROCTOR_AUDIT_LOG`` when set (relative paths are taken from the workspace), otherwise
    ``<workspace>/.proctor/audit.jsonl``."""
    named = env.get(ENV_VAR)
    if named:
        path = Path(named)
        return path if path.is_absolute() else workspace_root / path
    return workspace_root / ".proctor" / "audit.jsonl"


def line_digest(line: bytes) -> str:
    """``sha256:<hex>`` of one line's bytes, without its trailing newline."""
    return "sha256:" + hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def _last_line(handle: BinaryIO, size: int) -> bytes | None:
    """The last complete line of a file of ``size`` bytes (read backwards in blocks)."""
    if size == 0:
        return None
    block = 4096
    end = size
    data = b""
    while end > 0:
        start = max(0, end - block)
        handle.seek(start)
        data = handle.read(end - start) + data
        body = data.rstrip(b"\n")
        cut = body.rfind(b"\n")
        if cut >= 0:
            return body[cut + 1 :]
        end = start
    return data.rstrip(b"\n") or None


class AuditLog:
    """Appends audit events to one JSON Lines file, keeping the hash chain.

    The file handle stays open; each :meth:`emit` takes the lock, re-reads the previous line's
    digest only if another writer grew the file since this one last wrote, appends one line and
    flushes it. ``sequence`` counts events per ``run_id`` from 1 within this process.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failures = 0
        self._handle: BinaryIO | None = None
        self._prev = GENESIS
        self._known_size = -1
        self._sequences: dict[str, int] = {}

    def _open(self) -> BinaryIO:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # "a+b": appends always land at the end, and the tail can still be read.
            self._handle = open(self.path, "a+b")  # noqa: SIM115 - kept open for speed
        return self._handle

    def _next_sequence(self, run_id: str | None) -> int | None:
        if run_id is None:
            return None
        number = self._sequences.get(run_id, 0) + 1
        self._sequences[run_id] = number
        return number

    def emit(
        self,
        event: str,
        *,
        run_id: str | None,
        step_index: int | None,
        taint: TaintSet | None = None,
        fsync: bool = False,
        **fields: Any,
    ) -> dict[str, Any]:
        """Append one event and return the record as written.

        Fields named like the fixed fields or ``prev`` are refused (``ValueError``): they would
        silently overwrite the envelope. An ``OSError`` while writing is not raised: the record
        comes back with ``audit_persisted: False`` and :attr:`failures` grows.
        """
        clash = _RESERVED.intersection(fields)
        if clash:
            raise ValueError(f"audit fields may not be named {sorted(clash)}")
        safe, redacted = scrub_value(fields, taint)
        record: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "event_id": str(uuid.uuid4()),
            "run_id": run_id,
            "sequence": self._next_sequence(run_id),
            "step_index": step_index,
            "timestamp": datetime.now(UTC).isoformat(timespec="microseconds"),
            "event": event,
            "redacted_fields": redacted,
        }
        record.update(safe)
        try:
            self._append(record, fsync=fsync)
        except OSError:
            self.failures += 1
            return {**record, "audit_persisted": False}
        return record

    def _append(self, record: dict[str, Any], *, fsync: bool) -> None:
        handle = self._open()
        fd = handle.fileno()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            if size != self._known_size:
                last = _last_line(handle, size)
                self._prev = GENESIS if last is None else line_digest(last)
            record["prev"] = self._prev
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
            handle.write(line + b"\n")
            handle.flush()
            if fsync:
                os.fsync(fd)
            self._prev = line_digest(line)
            self._known_size = size + len(line) + 1
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file handle (a later :meth:`emit` reopens it)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
            self._known_size = -1

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class ChainReport:
    """The result of :func:`verify_chain`; ``first_bad_line`` is 1-based."""

    ok: bool
    lines: int
    first_bad_line: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready mapping."""
        return dataclasses.asdict(self)


def verify_chain(path: Path) -> ChainReport:
    """Check every line of an audit file: valid JSON object, fixed fields present, ``prev``
    equal to the digest of the line before (``GENESIS`` for line 1), file ending in a newline.

    A removed, altered, inserted or reordered line breaks the chain at the first line whose
    ``prev`` no longer matches (or at the altered line itself when it no longer parses).

    Raises:
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    if not data:
        return ChainReport(ok=True, lines=0)
    lines = data.split(b"\n")
    truncated = lines[-1] != b""
    if not truncated:
        lines.pop()
    prev = GENESIS
    for number, line in enumerate(lines, start=1):
        bad = _check_line(line, prev)
        if bad is None and truncated and number == len(lines):
            bad = "the last line is incomplete (no newline): the file was truncated"
        if bad is not None:
            return ChainReport(ok=False, lines=len(lines), first_bad_line=number, reason=bad)
        prev = line_digest(line)
    return ChainReport(ok=True, lines=len(lines))


def _check_line(line: bytes, prev: str) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        return "not valid JSON"
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [name for name in (*FIXED_FIELDS, "prev") if name not in record]
    if missing:
        return f"missing fields {missing}"
    if list(record)[: len(FIXED_FIELDS)] != list(FIXED_FIELDS):
        return "fixed fields out of order"
    if record["prev"] != prev:
        return "prev does not match the line before (a line was removed, changed or moved)"
    return None

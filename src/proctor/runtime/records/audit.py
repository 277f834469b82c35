"""The audit log: an append-only JSON Lines file that is also a hash chain.

Each event is one line, written when it happens (never buffered to the run's end). The record
starts with ``schema_version, event_id, run_id, sequence, step_index, timestamp, event,
redacted_fields``; the event's own fields follow flat, sanitized with
:func:`proctor.runtime.boundary.sanitize.scrub_value`; the last field ``prev`` is ``sha256:`` +
the hex digest of the previous line's bytes (without its newline), or :data:`GENESIS` on the
first line. ``event_id`` is :func:`proctor.core.ids.counted_uuid4_text`: unique across
processes (a prefix drawn per process, a counter), with no random read per line.

Durability: each line is one ``write`` on an ``O_APPEND`` descriptor (no user-space buffer, so
a failed write leaves nothing behind to be flushed later), not fsynced (an fsync per call would
cost more than the rest of admission); pass ``fsync=True`` for run seals and other events that
must survive a power cut. Several processes may append to one file: the append and the read of
the previous digest happen under an exclusive ``fcntl.flock``.

A write failure (disk full, a file size limit, permissions) does not crash the run:
:meth:`AuditLog.emit` returns the record with ``audit_persisted: False``, :attr:`AuditLog.failures`
counts it and :meth:`AuditLog.take_lost` gives the count per run, so the run records the gap.
A line only partly written is cut off again at once; a torn last line left by a crash or an
older writer is moved aside to ``<log>.torn`` the next time a writer opens the log, and the
repair is itself an event (``audit_repaired``), so the chain verifies again.

:meth:`AuditLog.head` is the log's head (line count and last line's digest): a run's receipt
commits it at seal (an *anchor*), and :func:`verify_chain` checks the chain against anchors, so
a cut tail, an emptied file or a history re-chained without some lines is named. The chain's
format and its verification live in :mod:`.chain` (re-exported here); where anchors are found,
in :mod:`.anchors`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from proctor.core.ids import counted_uuid4_text
from proctor.receipts.jsontext import compact_encoder
from proctor.runtime.boundary.sanitize import TaintSet, scrub_fields
from proctor.runtime.records import audit_own
from proctor.runtime.records.chain import (
    BREAK_EVENT,
    FIXED_FIELDS,
    GENESIS,
    Anchor,
    ChainReport,
    line_digest,
    read_log,
    verify_bytes,
    verify_chain,
)
from proctor.runtime.records.chain_lines import line_problem
from proctor.runtime.records.rows import now as _utc_stamp
from proctor.runtime.records.store_file import private_folders
from proctor.runtime.testhooks import kill_point

__all__ = [
    "ENV_VAR",
    "FIXED_FIELDS",
    "GENESIS",
    "SCHEMA_VERSION",
    "Anchor",
    "AuditLog",
    "ChainReport",
    "audit_path",
    "line_digest",
    "read_log",
    "verify_bytes",
    "verify_chain",
]

SCHEMA_VERSION = "1"
UNCHAINED = "sha256:" + "f" * 64
"""The ``prev`` of a line written after a last line that is not the writer's (see ``_write``)."""
ENV_VAR = "PROCTOR_AUDIT_LOG"
_RESERVED = frozenset((*FIXED_FIELDS, "prev"))
_BLOCK = 1 << 20
# values are the sanitizer's copies, which hold no reference cycle (a cycle becomes "[CYCLE]")
_encode = compact_encoder(sort_keys=False)
_text: Callable[[str], str] = json.encoder.encode_basestring  # C-accelerated when present
_HEAD = '{"schema_version":' + _encode(SCHEMA_VERSION) + ',"event_id":"'


def audit_path(workspace_root: Path, env: Mapping[str, str]) -> Path:
    """``PROCTOR_AUDIT_LOG`` when set (relative paths are taken from the workspace), otherwise
    ``<workspace>/.proctor/audit.jsonl``."""
    named = env.get(ENV_VAR)
    if named:
        path = Path(named)
        return path if path.is_absolute() else workspace_root / path
    return workspace_root / ".proctor" / "audit.jsonl"


def _last_line(fd: int, size: int) -> bytes | None:
    """The last complete line of the first ``size`` bytes of ``fd`` (read backwards)."""
    if size == 0:
        return None
    block = 4096
    end = size
    data = b""
    while end > 0:
        start = max(0, end - block)
        data = os.pread(fd, end - start, start) + data
        body = data.rstrip(b"\n")
        cut = body.rfind(b"\n")
        if cut >= 0:
            return body[cut + 1 :]
        end = start
    return data.rstrip(b"\n") or None


def _tail_start(fd: int, size: int) -> int:
    """The offset just after the last newline in the first ``size`` bytes (0 when none)."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        cut = os.pread(fd, end - start, start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


class AuditLog:
    """Appends audit events to one JSON Lines file, keeping the hash chain.

    The descriptor stays open; each :meth:`emit` takes the lock, re-reads the previous line's
    digest only if another writer grew the file since this one last wrote, appends one line.
    ``sequence`` counts events per ``run_id`` from 1 within this process.
    """

    def __init__(self, path: Path, *, clock: Callable[[], datetime] | None = None) -> None:
        """``clock``: an injected clock (a host's fixed clock, as ``proctor test`` uses) makes
        each line's ``timestamp`` and ``event_id`` derive from it, so the same events give the
        same log (and the run receipts that commit its head come out byte-identical)."""
        self.path = path
        self._path_text = str(path)  # what audit_own keys this log's lines by
        self._clock = clock
        self._made = 0
        self.failures = 0
        self._fd: int | None = None
        self._prev = GENESIS
        self._known_size = -1
        self._counted: tuple[int, int] | None = None  # (bytes, lines) of a counted prefix
        self._check_tail = True
        self._sequences: dict[str, int] = {}
        self._lost: dict[str, int] = {}
        self.known_head: Mapping[str, Any] | None = None
        """An earlier head of this log (the run store's newest anchor, as a run's start check
        read it): a seal whose log counts nothing yet counts on from it, not reading it again."""
        self.observers: list[Callable[[Mapping[str, Any]], None]] = []
        """Called with each record once it is written, in order (telemetry's seam)."""
        # flock excludes other processes, not this one's threads (child runs drive in threads)
        self._threads = threading.RLock()

    def _open(self) -> int:
        if self._fd is None:
            private_folders(self.path.parent)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            self._fd = os.open(self.path, flags, 0o644)
            self._check_tail = True
        return self._fd

    @contextmanager
    def _locked(self) -> Iterator[int]:
        """The descriptor under the exclusive lock, its torn tail (if any) repaired first.

        Raises:
            OSError: the log cannot be opened, locked or repaired (nothing is appended then).
        """
        with self._threads:
            fd = self._open()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if self._check_tail:
                    self._repair_tail(fd)
                yield fd
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _next_sequence(self, run_id: str | None) -> int | None:
        if run_id is None:
            return None
        number = self._sequences.get(run_id, 0) + 1
        self._sequences[run_id] = number
        return number

    def _record(
        self,
        event: str,
        run_id: str | None,
        step_index: int | None,
        taint: TaintSet | None,
        fields: Mapping[str, Any],
    ) -> tuple[dict[str, Any], str]:
        if not _RESERVED.isdisjoint(fields):
            clash = _RESERVED.intersection(fields)
            raise ValueError(f"audit fields may not be named {sorted(clash)}")
        safe, redacted = scrub_fields(fields, taint)  # a copy: ``fields`` is never changed
        sequence = self._next_sequence(run_id)
        if self._clock is None:
            event_id, stamp = counted_uuid4_text(), _utc_stamp()
        else:
            now = self._clock()
            self._made += 1
            name = f"{now.isoformat()}|{run_id}|{sequence}|{event}|{self._made}"
            import uuid  # a named event's id only

            event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
            stamp = now.astimezone(UTC).isoformat(timespec="microseconds")
        record: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "event_id": event_id,
            "run_id": run_id,
            "sequence": sequence,
            "step_index": step_index,
            "timestamp": stamp,
            "event": event,
            "redacted_fields": redacted,
        }
        record.update(safe)
        # The line without its "prev", from pre-encoded parts: only the values are encoded,
        # by one reused encoder (the same bytes json.dumps of the whole record gives), and
        # joined once (a chain of + copies the growing line at each part).
        encoded = "".join(
            (
                _HEAD,
                event_id,
                '","run_id":',
                "null" if run_id is None else _text(run_id),
                ',"sequence":',
                "null" if sequence is None else str(sequence),
                ',"step_index":',
                "null"
                if step_index is None
                else str(step_index)
                if type(step_index) is int
                else _encode(step_index),
                ',"timestamp":"',
                stamp,
                '","event":',
                _text(event),
                ',"redacted_fields":',
                _encode(redacted) if redacted else "[]",
                "," + _encode(safe)[1:-1] if safe else "",
            )
        )
        return record, encoded

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
        comes back with ``audit_persisted: False``, :attr:`failures` grows and the event is
        counted as lost for ``run_id`` (see :meth:`take_lost`).
        """
        with self._threads:
            record, encoded = self._record(event, run_id, step_index, taint, fields)
            try:
                # _locked() inline: this runs for every call a run makes
                fd = self._open()
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    if self._check_tail:
                        self._repair_tail(fd)
                    self._write(fd, record, encoded, fsync=fsync)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                self.failures += 1
                if run_id is not None:
                    self._lost[run_id] = self._lost.get(run_id, 0) + 1
                return {**record, "audit_persisted": False}
            for observe in self.observers:
                observe(record)
            return record

    def lost(self, run_id: str) -> int:
        """How many of ``run_id``'s events this log failed to write (since :meth:`take_lost`)."""
        return self._lost.get(run_id, 0)

    def take_lost(self, run_id: str) -> int:
        """:meth:`lost`, and start counting again from 0 (the caller recorded the count)."""
        return self._lost.pop(run_id, 0)

    @property
    def counting(self) -> bool:
        """Whether this log counts its lines on from a prefix it counted already (a ``known``
        head given to :meth:`head` is then not used)."""
        return self._counted is not None

    def head(self, known: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The log's head now: ``{"lines": n, "last_digest": "sha256:..." | None, "bytes": b}``.

        Taken under the lock, after any torn tail is repaired, so it names complete lines only.
        The line count is kept incrementally (only bytes other writers added are read again).
        ``known`` is an earlier head of this log (the run store's newest anchor): when the
        line ending at its ``bytes`` still has its digest, the lines before it are the ones
        it counted (the chain commits them), so a new process counts only what came after.

        Raises:
            OSError: the log cannot be opened or read.
        """
        with self._threads:  # _locked() inline: a seal reads the head
            fd = self._open()
            counted = self._counted
            if not self._check_tail and counted is not None and counted[1] > 0:
                # the log ends where this process's own last line ended it, and was counted
                # up to there: no other writer appended since (nor is one mid-append: its
                # bytes would show in the size), so the head is that line's, with no lock
                size = os.lseek(fd, 0, os.SEEK_END)
                if size == self._known_size == counted[0]:
                    return {"lines": counted[1], "last_digest": self._prev, "bytes": size}
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if self._check_tail:
                    self._repair_tail(fd)
                return self._head(fd, known)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _head(self, fd: int, known: Mapping[str, Any] | None) -> dict[str, Any]:
        size = os.lseek(fd, 0, os.SEEK_END)
        if self._counted is None and known is not None:
            self._start_count_at(fd, size, known)
        lines = self._count(fd, size)
        if lines == 0:
            return {"lines": 0, "last_digest": None, "bytes": size}
        if size == self._known_size:
            return {"lines": lines, "last_digest": self._prev, "bytes": size}
        last = _last_line(fd, size)
        digest = None if last is None else line_digest(last)
        return {"lines": lines, "last_digest": digest, "bytes": size}

    def emit_head(
        self, event: str, *, run_id: str | None, step_index: int | None, **fields: Any
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """:meth:`emit` (``fsync=True``), and the log's head just after the line it wrote, as
        :meth:`head` gives it: what a seal commits as the log's newest anchor. The head is
        ``None`` when the line was not written, or the log could not be read for it.

        This log knows the head as of its own write when it counted the log up to the line
        (no other writer appended between its count and the write): then the head needs no
        lock and no read; otherwise it is read under the lock as :meth:`head` reads it.
        """
        with self._threads:  # no other thread of this process writes in between
            record = self.emit(event, run_id=run_id, step_index=step_index, fsync=True, **fields)
            if record.get("audit_persisted") is False:
                return record, None
            counted, size = self._counted, self._known_size
            if counted is not None and counted[0] == size and counted[1] > 0:
                return record, {"lines": counted[1], "last_digest": self._prev, "bytes": size}
            try:
                return record, self.head()
            except OSError:
                return record, None

    def _start_count_at(self, fd: int, size: int, known: Mapping[str, Any]) -> None:
        at, lines = known.get("bytes"), known.get("lines")
        if type(at) is not int or type(lines) is not int or not 0 < at <= size or lines < 1:
            return
        if os.pread(fd, 1, at - 1) != b"\n":
            return
        last = _last_line(fd, at)
        if last is not None and line_digest(last) == known.get("last_digest"):
            self._counted = (at, lines)

    def _count(self, fd: int, size: int) -> int:
        start, lines = self._counted if self._counted and self._counted[0] <= size else (0, 0)
        while start < size:
            chunk = os.pread(fd, min(_BLOCK, size - start), start)
            if not chunk:
                break
            lines += chunk.count(b"\n")
            start += len(chunk)
        self._counted = (start, lines)
        return lines

    def _write(self, fd: int, record: dict[str, Any], encoded: str, *, fsync: bool) -> None:
        """Chain and append one record (the caller holds the lock).

        A line the file system took only part of is cut off again, so the log never keeps
        half a line when the write fails; if even that fails, the next writer repairs it.
        """
        size = os.lseek(fd, 0, os.SEEK_END)  # the size (under the lock), with no stat_result
        if size != self._known_size:
            last = _last_line(fd, size)
            self._prev = GENESIS if last is None else line_digest(last)
            if last is not None and line_problem(last, None) is not None:
                # Another hand wrote a line no writer writes (a key twice, not JSON, no
                # fixed fields): a line the next line chains over is one verification takes
                # as chained without decoding it, so this one is not chained over. Its
                # successor's prev names no line; verification decodes the line before a
                # broken link and names it with its code.
                self._prev = UNCHAINED
        record["prev"] = self._prev
        # a digest (GENESIS or "sha256:" and hex digits) needs no escape: quoted as it is
        line = (encoded + ',"prev":"' + self._prev + '"}').encode()
        data = line + b"\n"
        try:
            written = os.write(fd, data)
            if written != len(data):
                kill_point("audit.torn_write")  # a crash here leaves the torn line to repair
                raise OSError(errno.ENOSPC, "the audit line was only partly written")
            if fsync:
                os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError:
                self._check_tail = True
            raise
        # line_digest(line), inline: the line has no newline to strip (JSON escapes them)
        prev, self._prev = self._prev, "sha256:" + hashlib.sha256(line).hexdigest()
        audit_own.wrote(self._path_text, size, prev, data, self._prev)  # the next check's
        if self._counted is not None and self._counted[0] == size:
            self._counted = (size + len(data), self._counted[1] + 1)
        self._known_size = size + len(data)

    def _repair_tail(self, fd: int) -> None:
        """Move a torn last line (bytes after the last newline) aside and audit the repair.

        The torn bytes are appended to ``<log>.torn`` (one fragment per line) before the log
        is cut back to its last complete line; when they cannot be kept (a full disk) the log
        is cut anyway, since an incomplete line is not a record, and the event says so.
        """
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            self._check_tail = False
            return
        cut = _tail_start(fd, size)
        torn = os.pread(fd, size - cut, cut)
        aside = self.path.with_name(self.path.name + ".torn")
        moved_to: str | None = aside.name
        try:
            with open(aside, "ab") as handle:
                handle.write(torn + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            moved_to = None
        os.ftruncate(fd, cut)
        os.fsync(fd)
        self._check_tail = False
        self._known_size = -1
        self._counted = None
        record, encoded = self._record(
            "audit_repaired",
            None,
            None,
            None,
            {
                "line": self._count(fd, cut) + 1,
                "torn_bytes": len(torn),
                "torn_digest": "sha256:" + hashlib.sha256(torn).hexdigest(),
                "moved_to": moved_to,
            },
        )
        self._write(fd, record, encoded, fsync=True)

    def append_break(
        self,
        make: Callable[[bytes], tuple[int, dict[str, Any]] | None],
        confirm: Callable[[bytes], str | None],
    ) -> dict[str, Any] | None:
        """Record a break of the chain (:data:`.chain.BREAK_EVENT`), under the lock.

        ``make(log)`` gets the log's bytes and returns the last good line and the record's
        fields, or ``None`` when there is nothing to record; the record is chained to that
        line (a new segment) and fsynced, but only when ``confirm(log + line)`` answers
        ``None`` (the log with it verifies). Returns the record written, or ``None``.

        Raises:
            ValueError: ``confirm``'s answer: the record would not mend the log (nothing
                is written).
            OSError: the log cannot be read or written.
        """
        with self._locked() as fd:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
            made = make(data)
            if made is None:
                return None
            good, fields = made
            lines = data.split(b"\n")
            prev = GENESIS if good == 0 else line_digest(lines[good - 1])
            record, encoded = self._record(BREAK_EVENT, None, None, None, fields)
            line = (encoded + ',"prev":' + _text(prev) + "}").encode()
            refused = confirm(data + line + b"\n")
            if refused is not None:
                raise ValueError(refused)
            self._prev, self._known_size = prev, size  # _write chains to ``prev``
            self._write(fd, record, encoded, fsync=True)
            return record

    def close(self) -> None:
        """Close the descriptor (a later :meth:`emit` reopens it); nothing is buffered."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._known_size = -1
            self._counted = None
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

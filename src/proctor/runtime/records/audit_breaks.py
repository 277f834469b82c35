"""A broken audit log stops new runs until a person records the break; then its chain goes on.

Seam: :mod:`.chain` defines the log's format and checks it, :mod:`.audit` appends to it; this
module is what happens when the check fails, on both sides:

- :func:`refuse_broken_log` runs before a run starts or resumes: a log whose chain, or whose
  newest anchor in the run store, is broken is refused ``audit_broken`` (a run appending to
  it would seal receipts committing a head nobody can verify). The check is incremental: a
  mark beside the log (``audit.jsonl-verified``) records how far it verified (bytes, lines,
  the last line's digest); the next check verifies the lines after it, after confirming the
  line ending there still has that digest. An anchor that falls inside the verified part
  (concurrent runs seal out of order, so the newest anchor often names a line a later check
  passed) has that line's digest checked where it is, read back from the mark. The whole log
  is read again when the mark no longer fits, when a recorded break follows it, or when an
  anchor inside it does not hold there (or lies over 1 MiB back). What the mark
  cannot see, ``proctor audit verify`` does: a line inside the verified part altered without
  re-chaining the lines after it (a re-chained rewrite changes the marked digest).
- :func:`accept_break` (``proctor audit accept-break``): writes one
  :data:`~.chain.BREAK_EVENT` line chained to the last good line (a new segment), freezing the
  lines it sets aside by their digest and excusing the anchors broken now. ``audit verify``
  then passes across the break, names it, and still catches any other damage.

A torn last line (a write cut short) is not a break: the next writer moves it aside.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from proctor.contracts import json_strict
from proctor.errors import ParseError, StoreError
from proctor.runtime.records import audit_own
from proctor.runtime.records.chain import (
    BREAK_EVENT,
    GENESIS,
    Anchor,
    ChainReport,
    line_digest,
    set_aside_digest,
    verify_bytes,
)

__all__ = ["MARK_SUFFIX", "accept_break", "last_good_line", "refuse_broken_log"]

MARK_SUFFIX = "-verified"
"""The mark of how far the log was verified sits beside it under its name and this suffix."""

_MARK_MAX = 4096

_BACK_MAX = 1 << 20
"""How far back from the mark an anchor inside the verified part is looked for in place."""

_WRITE_AFTER = 65536
"""How far past the mark it last wrote a process verifies before it writes the mark again (a
mark lagging behind costs the next process at most this many bytes more to verify)."""

# per mark file: the mark as this process holds it, the file's identity as this process left
# it, and how far the file's mark reaches
_held: dict[str, tuple[dict[str, Any], tuple[int, ...], int]] = {}
_held_lock = threading.Lock()


def refuse_broken_log(path: Path, newest: Mapping[str, Any] | None, shown: str) -> None:
    """Refuse to start a run on the log at ``path`` when its chain or ``newest`` (the run
    store's newest anchor, ``None`` for none) is broken; mark how far it verified.

    Raises:
        StoreError: ``audit_broken`` naming the first bad line and the ways out;
            ``audit_unreadable`` when the log cannot be read.
    """
    if newest is not None and not (type(newest.get("lines")) is int and newest["lines"] > 0):
        newest = None  # an anchor of no line holds whatever the log is
    try:
        fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    except FileNotFoundError:
        if newest is not None:
            raise _broken(shown, verify_bytes(b"", [_anchor(newest)]), missing=True) from None
        return
    except OSError as exc:
        raise _unreadable(shown, exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.lseek(fd, 0, os.SEEK_END)  # the size, without a stat_result to build
        report, lines, last = _verify(fd, path, size, newest)
    except OSError as exc:
        raise _unreadable(shown, exc) from exc
    finally:
        os.close(fd)
    if report is not None and not report.ok:
        raise _broken(shown, report, missing=False)
    _write_mark(path, {"bytes": lines[0], "lines": lines[1], "last_digest": last,
                       "anchor_ok": _wanted(newest)})  # fmt: skip


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _wanted(newest: Mapping[str, Any] | None) -> list[Any] | None:
    """The newest anchor as the mark records it checked: ``[lines, last_digest]``."""
    return None if newest is None else [newest["lines"], newest.get("last_digest")]


def _anchor(newest: Mapping[str, Any]) -> Anchor:
    """The run store's newest anchor, as a report names it."""
    return Anchor(
        newest["lines"],
        newest.get("last_digest"),
        f"the run store's newest anchor (after run {newest.get('run_id')} sealed)",
    )


def _verify(
    fd: int, path: Path, size: int, newest: Mapping[str, Any] | None
) -> tuple[ChainReport | None, tuple[int, int], str]:
    """Verify from the mark (or the start) against the newest anchor (``newest``, of at least
    one line): the report (``None``: the lines this process wrote, as it wrote them, and the
    anchor naming their last: no report made), the verified (bytes, lines), and the digest of
    the last verified line."""
    key = str(path)
    want = _wanted(newest)  # None once the anchor needs no check
    mark = _read_mark(key)
    # the marked line as this process last saw it checked (its digest known): compared, not
    # hashed, and the one read begins just before it
    known = None if mark is None else audit_own.known(key, mark["last_digest"])
    at, block = _after_mark(fd, size, mark, _BEFORE_MARK if known is None else len(known) + 2)
    cut = block.rfind(b"\n")
    # a torn last line is the next writer's to move aside
    end = at + cut + 1 if cut >= 0 else _last_newline(fd, size)

    def read(begin: int, stop: int) -> bytes:  # from the block when it holds them
        return block[begin - at : stop - at] if begin >= at else os.pread(fd, stop - begin, begin)

    start, first, prev = 0, 1, GENESIS
    if mark is not None and 0 < mark["bytes"] <= end:
        held = _line_in(block, at, mark["bytes"])
        line = _line_ending_at(fd, mark["bytes"]) if held is False else held
        if line is not None and (line == known or line_digest(line) == mark["last_digest"]):
            start, first, prev = mark["bytes"], mark["lines"] + 1, mark["last_digest"]
    if want is not None and mark is not None and mark.get("anchor_ok") == want:
        want = None  # checked (or excused by a recorded break) when the mark was made
    tail = read(start, end) if end > start else b""
    inside = start > 0 and want is not None and want[0] < first
    if inside and newest is not None and _holds_in_place(fd, start, first - 1, _anchor(newest)):
        # concurrent runs seal out of order: the newest anchor often names a line the mark
        # already passed; that line is checked where it is, not the whole log read again
        want, inside = None, False
    if start and (_BREAK_QUOTED in tail or inside):
        start, first, prev = 0, 1, GENESIS
        tail = read(0, end) if end else b""
    own = None
    if _BREAK_QUOTED not in tail:
        own = audit_own.vouched(key, start, prev, tail)  # this process's lines, as written
    audit_own.forget(key)
    if own is not None:
        lines, digests = first - 1 + own[0], own[1]
        # the anchor a seal of this process recorded names one of them with the digest it
        # took when it wrote that line (often the last; another session of this process may
        # have written lines after it, such as an MCP server's request line); else: in full
        if want is None or (first <= want[0] <= lines and digests[want[0] - first] == want[1]):
            return None, (end, lines), digests[-1]
    anchors = [] if want is None or newest is None else [_anchor(newest)]
    report = verify_bytes(tail, anchors, prev=prev, first_line=first)
    last = prev
    if tail:
        cut = tail.rstrip(b"\n").rfind(b"\n")
        last = line_digest(tail[cut + 1 :])
    return report, (end, report.lines), last


_BREAK_QUOTED = b'"' + BREAK_EVENT.encode() + b'"'

_BEFORE_MARK = 4096
"""How far before the mark the one read of a check begins (the marked line is well under it),
when the marked line is not known."""


def _after_mark(fd: int, size: int, mark: dict[str, Any] | None, before: int) -> tuple[int, bytes]:
    """``(at, bytes from at to the end)``: one read from ``before`` bytes before the mark (its
    line, the lines after it and the log's last newline, which a check reads otherwise in
    five); ``(size, b"")`` with no mark that fits, or a short read."""
    if mark is None or not 0 < mark["bytes"] <= size:
        return size, b""
    at = max(0, mark["bytes"] - before)
    block = os.pread(fd, size - at, at)
    return (at, block) if len(block) == size - at else (size, b"")


def _line_in(block: bytes, at: int, mark: int) -> bytes | Literal[False] | None:
    """:func:`_line_ending_at` ``mark`` answered from ``block`` (the log's bytes from ``at``):
    ``None`` when the byte before ``mark`` is no newline; ``False`` when the block does not
    hold the line whole."""
    if not block or mark <= at:
        return False
    if block[mark - at - 1] != 0x0A:
        return None
    begin = block.rfind(b"\n", 0, mark - at - 1)
    if begin < 0 and at > 0:
        return False
    return block[begin + 1 : mark - at - 1]


def _holds_in_place(fd: int, at: int, lines: int, anchor: Anchor) -> bool:
    """Whether the line ``anchor`` commits, inside the verified part (whose ``lines``-th line
    ends at byte ``at``), has the digest it commits: read back from ``at``, at most
    :data:`_BACK_MAX` bytes (``False`` past them, or for any line it does not find; the whole
    log is then read and the report says what is wrong)."""
    if anchor.lines <= 0:
        return True  # an empty log's anchor: the whole check skips it too
    back = lines - anchor.lines  # the lines after the anchor's, up to the mark
    end, data, block = at, b"", 16384
    while end > 0 and at - end < _BACK_MAX:
        begin = max(0, end - block, at - _BACK_MAX)
        data = os.pread(fd, end - begin, begin) + data
        end, block = begin, block * 2  # few reads (and copies) however far back it lies
        # the anchor's line is whole once back + 1 newlines precede it in what was read
        if data.count(b"\n", 0, len(data) - 1) > back or end == 0:
            break
    parts = data[:-1].split(b"\n")  # the last newline ends the mark's line
    if len(parts) < back + 1 or (len(parts) == back + 1 and end > 0):
        return False
    line = parts[len(parts) - 1 - back]
    return line_digest(line) == anchor.last_digest


def _last_newline(fd: int, size: int) -> int:
    """Where the log's last complete line ends: read back from its end 4 KiB first (a line is
    well under that), then in larger blocks, up to 64 KiB at a time."""
    end, block = size, 4096
    while end > 0:
        begin = max(0, end - block)
        cut = os.pread(fd, end - begin, begin).rfind(b"\n")
        if cut >= 0:
            return begin + cut + 1
        end, block = begin, min(block * 4, 65536)
    return 0


def _line_ending_at(fd: int, at: int) -> bytes | None:
    """The line whose newline is the byte before ``at`` (``None`` when that is no newline)."""
    if os.pread(fd, 1, at - 1) != b"\n":
        return None
    stop = begin = at - 1
    while begin > 0:
        low = max(0, begin - 4096)
        cut = os.pread(fd, begin - low, low).rfind(b"\n")
        if cut >= 0:
            return os.pread(fd, stop - (low + cut + 1), low + cut + 1)  # the whole line
        begin = low
    return os.pread(fd, stop, 0)


def _broken(shown: str, report: ChainReport, *, missing: bool) -> StoreError:
    what = "is missing" if missing else f"is broken at line {report.first_bad_line}"
    return StoreError(
        f"the audit log {shown} {what}: {report.reason}. No run starts on a broken log (its"
        " receipts would commit a history nobody can verify). See `proctor audit verify`;"
        " restore the log from a backup if you have one, or record the break with `proctor"
        " audit accept-break` (audited), which starts a new chain segment from the last good"
        " line",
        code="audit_broken",
        details={"line": report.first_bad_line, "why": report.code},
    )


def _unreadable(shown: str, exc: OSError) -> StoreError:
    return StoreError(
        f"the audit log {shown} cannot be read ({exc.strerror or exc}); give this user"
        " read and write access to it, then run again",
        code="audit_unreadable",
    )


def last_good_line(data: bytes, anchors: list[Anchor]) -> tuple[int, ChainReport]:
    """The last line of ``data`` that the chain and every intact anchor vouch for, and the
    report of the log as it is: the line before the chain's first bad line (two before, when
    that line's ``prev`` does not match: either of them may be the changed one), never past
    an anchor that no longer holds (the lines after the last intact anchor below it may be
    rewritten). A log that verifies answers its line count."""
    report = verify_bytes(data, anchors)
    whole = data[: data.rfind(b"\n") + 1] if b"\n" in data else b""
    lines = whole.split(b"\n")[:-1] if whole else []
    good = len(lines) if report.first_bad_line is None else report.first_bad_line - 1
    if report.first_bad_line is not None and str(report.reason).startswith("prev does not"):
        good -= 1  # either line may be the changed one: the one before is not vouched for
    good = max(good, 0)
    digests = {n: line_digest(lines[n - 1]) for n in {a.lines for a in anchors} if
               0 < n <= len(lines)}  # fmt: skip
    for broken in report.broken_anchors:
        if broken["problem"] == "cut":
            good = min(good, len(lines))
        else:
            intact = [
                a.lines
                for a in anchors
                if a.lines < broken["lines"] and digests.get(a.lines) == a.last_digest
            ]
            good = min(good, max(intact, default=0))
    return good, report


def accept_break(
    log: Any, anchors: list[Anchor], *, note: str | None = None
) -> dict[str, Any] | None:
    """Record the break of ``log`` (an :class:`~.audit.AuditLog`) checked against
    ``anchors``: one :data:`~.chain.BREAK_EVENT` line chained to the last good line. Returns
    the record, or ``None`` when the log verifies (nothing to record).

    Raises:
        StoreError: ``audit_break_unmendable`` (the record would not make the log verify:
            restore it from a backup instead); ``audit_unreadable``.
    """

    def make(data: bytes) -> tuple[int, dict[str, Any]] | None:
        good, report = last_good_line(data, anchors)
        if report.ok:
            return None
        whole = data[: data.rfind(b"\n") + 1] if b"\n" in data else b""
        lines = whole.split(b"\n")[:-1] if whole else []
        excused = [
            {"lines": b["lines"], "last_digest": _anchor_digest(anchors, b)}
            for b in report.broken_anchors
        ]
        return good, {
            "last_good_line": good,
            "set_aside_lines": len(lines) - good,
            "set_aside_digest": set_aside_digest(lines[good:]),
            "excused_anchors": excused,
            "broken_at": report.first_bad_line,
            "break_reason": report.reason,
            "note": note,
        }

    def confirm(data: bytes) -> str | None:
        mended = verify_bytes(data, anchors)
        return None if mended.ok else str(mended.reason)

    try:
        record: dict[str, Any] | None = log.append_break(make, confirm)
    except ValueError as exc:
        raise StoreError(
            f"recording the break would not mend the audit log ({exc}); restore the log from"
            " a backup instead",
            code="audit_break_unmendable",
        ) from exc
    except OSError as exc:
        raise _unreadable(log.path.name, exc) from exc
    return record


def _anchor_digest(anchors: list[Anchor], broken: Mapping[str, Any]) -> str | None:
    for anchor in anchors:
        if anchor.lines == broken["lines"] and anchor.source == broken["source"]:
            return anchor.last_digest
    return None


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_mark(key: str) -> dict[str, Any] | None:
    """The mark beside the log: the one this process holds while the file is as this process
    left it (one ``stat``), else the file's. Either is a claim the check confirms before it
    skips a line (the line ending where it says has the digest it says). ``key``: the log's
    path, as text."""
    name = key + MARK_SUFFIX
    with _held_lock:
        held = _held.pop(name, None)
    if held is not None:
        try:
            if _identity(os.stat(name)) == held[1]:
                with _held_lock:
                    _held[name] = held
                return held[0]
        except OSError:
            pass
    try:
        with open(name, "rb") as handle:
            data = handle.read(_MARK_MAX + 1)
        # strict: a mark with a key twice is no mark this wrote (the log is checked in full)
        doc = json_strict.loads(data, source="mark") if len(data) <= _MARK_MAX else None
    except (OSError, ParseError):
        return None
    if not isinstance(doc, dict):
        return None
    if type(doc.get("bytes")) is not int or type(doc.get("lines")) is not int:
        return None
    if not isinstance(doc.get("last_digest"), str):
        return None
    return doc


def _write_mark(path: Path, doc: dict[str, Any]) -> None:
    """Rewritten in place, not synced: a mark torn by a crash or read mid-write does not parse
    and costs one whole check, no more (a rename per run start costs more than the check it
    saves on some file systems). A folder that refuses it costs the same, every time.

    A process that wrote the mark and finds the file as it left it (:func:`_read_mark`) holds
    the new mark and writes it only once it reaches :data:`_WRITE_AFTER` bytes further: a
    crash then costs the next process that much more to verify, no more. An anchor checked
    since (every seal records a new one) is held too: the file's older ``anchor_ok`` names an
    anchor that was checked then, so a process reading it checks any newer anchor itself."""
    name = str(path) + MARK_SUFFIX
    with _held_lock:
        held = _held.get(name)
        if held is not None and 0 <= doc["bytes"] - held[2] < _WRITE_AFTER:
            _held[name] = (doc, held[1], held[2])
            return
        _held.pop(name, None)
    body = json.dumps(doc).encode()
    with contextlib.suppress(OSError):
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(name, flags, 0o600)
        try:
            os.pwrite(fd, body, 0)
            os.ftruncate(fd, len(body))
            left = _identity(os.fstat(fd))
        finally:
            os.close(fd)
        with _held_lock:
            _held[name] = (doc, left, doc["bytes"])

"""The audit log's chain format, and its verification against anchors.

A line is one JSON object with the :data:`FIXED_FIELDS` first and ``prev`` last: ``sha256:`` +
the hex digest of the previous line's bytes (without its newline), :data:`GENESIS` on line 1.
An :class:`Anchor` commits a log's first ``lines`` lines by the digest of line ``lines`` (the
chain commits every line before it); :func:`verify_chain` checks both. The writer is
:class:`proctor.runtime.records.audit.AuditLog`.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from proctor.contracts import values as dataclasses

__all__ = [
    "BREAK_EVENT",
    "FIXED_FIELDS",
    "GENESIS",
    "Anchor",
    "Breaks",
    "ChainReport",
    "line_digest",
    "read_log",
    "recorded_breaks",
    "set_aside_digest",
    "verify_bytes",
    "verify_chain",
]

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
_BLOCK = 1 << 20


def line_digest(line: bytes) -> str:
    """``sha256:<hex>`` of one line's bytes, without its trailing newline."""
    return "sha256:" + hashlib.sha256(line.rstrip(b"\n")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Anchor:
    """A commitment to the log's first ``lines`` lines: the digest of line ``lines``.

    ``source`` says who made it (a run receipt, the run store) in words a person can follow.
    """

    lines: int
    last_digest: str | None
    source: str


@dataclasses.dataclass(frozen=True)
class ChainReport:
    """The result of :func:`verify_chain`; ``first_bad_line`` is 1-based.

    ``anchors`` counts the anchors checked; ``broken_anchors`` lists those the log no longer
    matches, each ``{source, lines, problem, line, message}`` (``problem`` is ``cut`` or
    ``rewritten``). ``recorded_breaks`` lists the breaks a person recorded and the log still
    matches, each ``{line, last_good_line, set_aside_lines, excused_anchors}``.
    """

    ok: bool
    lines: int
    first_bad_line: int | None = None
    reason: str | None = None
    anchors: int = 0
    broken_anchors: tuple[dict[str, Any], ...] = ()
    recorded_breaks: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready mapping."""
        out = dataclasses.asdict(self)
        out["broken_anchors"] = list(self.broken_anchors)
        out["recorded_breaks"] = list(self.recorded_breaks)
        return out


def read_log(path: Path) -> bytes:
    """The log's bytes, read under a shared lock so no append or repair is half seen.

    Raises:
        OSError: the file cannot be read (``FileNotFoundError`` when it does not exist), or
            is not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a device or a pipe may never end
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        fcntl.flock(fd, fcntl.LOCK_SH)
        parts = []
        while chunk := os.read(fd, _BLOCK):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def verify_chain(path: Path, anchors: Iterable[Anchor] = ()) -> ChainReport:
    """Check every line of an audit file, then every anchor against it.

    Each line must be a JSON object with the fixed fields first and ``prev`` equal to the
    digest of the line before (``GENESIS`` for line 1), and the file must end in a newline. A
    removed, altered, inserted or reordered line breaks the chain at the first line whose
    ``prev`` no longer matches (or at the altered line itself when it no longer parses).

    An anchor commits line ``lines`` by its digest, and through the chain every line before
    it: a log shorter than the anchor was cut; a different line there means the history up
    to it was rewritten (lines removed and the rest chained again still fail here).

    Raises:
        OSError: the file cannot be read.
    """
    return verify_bytes(read_log(path), anchors)


def verify_bytes(
    data: bytes,
    anchors: Iterable[Anchor] = (),
    *,
    prev: str = GENESIS,
    first_line: int = 1,
) -> ChainReport:
    """:func:`verify_chain` over a log's bytes (``b""`` for a missing or emptied log).

    ``prev`` and ``first_line`` verify a tail of the log: ``data`` starts at line
    ``first_line``, whose ``prev`` must be ``prev`` (line numbers in the report count from
    it). Breaks a person recorded (:data:`BREAK_EVENT`) are honoured in a whole log only.
    """
    anchors = tuple(anchors)
    lines = data.split(b"\n") if data else []
    truncated = bool(lines) and lines[-1] != b""
    if lines and not truncated:
        lines.pop()
    breaks = recorded_breaks(data, lines) if first_line == 1 else None
    if breaks is not None:
        anchors = tuple(a for a in anchors if (a.lines, a.last_digest) not in breaks.excused)
    wanted = sorted({a.lines for a in anchors if a.lines > 0})
    at = {n: "" for n in wanted}
    bad_line: int | None = None
    reason: str | None = None
    kept: dict[int, str] = {0: GENESIS}
    start = first_line - 1
    for number, line in enumerate(lines, start=first_line):
        if breaks is not None and bad_line is None:
            if number in breaks.set_aside:  # a recorded break: frozen by its record's digest
                prev = line_digest(line)
                if number in breaks.keep:
                    kept[number] = prev
                if number in at:
                    at[number] = prev
                continue
            segment = breaks.segments.get(number)
            if segment is not None:  # a recorded break's line chains to the last good line
                prev = kept[segment]
            elif number in breaks.broken_records:
                bad_line, reason = number, breaks.broken_records[number]
        if bad_line is None:
            bad = _check_line(line, prev)
            if truncated and number == start + len(lines):
                bad = (
                    "the last line is incomplete (no newline): a write was cut short or the file"
                    " was truncated; the next proctor command that writes the log moves it aside"
                )
            if bad is not None:
                bad_line, reason = number, bad
                if not at:
                    break
        prev = line_digest(line)
        if breaks is not None and number in breaks.keep:
            kept[number] = prev
        if number in at:
            at[number] = prev
    complete = start + len(lines) - (1 if truncated else 0)
    checked, broken = _check_anchors(anchors, at, complete)
    if broken and (bad_line is None or broken[0]["line"] < bad_line):
        bad_line, reason = broken[0]["line"], broken[0]["message"]
    return ChainReport(
        ok=bad_line is None,
        lines=start + len(lines),
        first_bad_line=bad_line,
        reason=reason,
        anchors=checked,
        broken_anchors=tuple(broken),
        recorded_breaks=() if breaks is None else tuple(breaks.shown),
    )


def _check_anchors(
    anchors: Iterable[Anchor], at: Mapping[int, str], complete: int
) -> tuple[int, list[dict[str, Any]]]:
    intact, intact_by = 0, "the start of the log"
    checked = 0
    broken: list[dict[str, Any]] = []
    for anchor in sorted(anchors, key=lambda a: a.lines):
        checked += 1
        if anchor.lines <= 0:
            continue
        if anchor.lines > complete:
            problem, line = "cut", complete + 1
            gone = (
                f"line {line} was"
                if line == anchor.lines
                else f"lines {line} to {anchor.lines} were"
            )
            message = (
                f"{anchor.source} commits {anchor.lines} lines but the log has {complete}:"
                f" {gone} cut from it"
            )
        elif at.get(anchor.lines) != anchor.last_digest:
            problem, line = "rewritten", anchor.lines
            message = (
                f"{anchor.source} commits line {anchor.lines} and the log's line {anchor.lines}"
                f" is another: lines after {intact} ({intact_by}) up to {anchor.lines} were"
                " removed, changed or chained again"
            )
        else:
            intact, intact_by = anchor.lines, f"intact as {anchor.source} commits"
            continue
        broken.append(
            {
                "source": anchor.source,
                "lines": anchor.lines,
                "problem": problem,
                "line": line,
                "message": message,
            }
        )
    return checked, broken


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


BREAK_EVENT = "audit_break_accepted"
"""The event of a break a person recorded (``proctor audit accept-break``). Its line chains to
the last good line (its ``prev`` is that line's digest, :data:`GENESIS` for none) instead of
the line before it, so it starts a new segment of the chain; ``last_good_line`` names that
line, ``set_aside_digest`` freezes the lines between it and the record (``sha256:`` of their
bytes joined by newlines: any later change to them breaks the chain again), and
``excused_anchors`` lists the anchors (``{lines, last_digest}``) that were broken when it was
recorded. Every other anchor, and every other line, is checked as before."""

_BREAK = b'"event":"' + BREAK_EVENT.encode() + b'"'


@dataclasses.dataclass
class Breaks:
    """The recorded breaks of one log, by 1-based line number."""

    set_aside: set[int] = dataclasses.field(default_factory=set)
    segments: dict[int, int] = dataclasses.field(default_factory=dict)
    keep: set[int] = dataclasses.field(default_factory=set)
    excused: set[tuple[int, str | None]] = dataclasses.field(default_factory=set)
    broken_records: dict[int, str] = dataclasses.field(default_factory=dict)
    shown: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def set_aside_digest(lines: list[bytes]) -> str:
    """The digest a recorded break keeps of the lines it sets aside."""
    return "sha256:" + hashlib.sha256(b"\n".join(lines)).hexdigest()


def recorded_breaks(data: bytes, lines: list[bytes]) -> Breaks | None:
    """The breaks recorded in a whole log (``None`` when it has none: the usual case, found
    with one search of the bytes). A record that no longer fits the log (its set-aside lines
    changed, or it names a line it cannot) is listed in ``broken_records`` with the reason."""
    if _BREAK not in data:
        return None
    out = Breaks()
    floor = 0  # each break comes after the previous one's record
    for index, line in enumerate(lines):
        if _BREAK not in line:
            continue
        number = index + 1
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("event") != BREAK_EVENT:
            continue
        good, frozen = record.get("last_good_line"), record.get("set_aside_digest")
        excused = record.get("excused_anchors")
        if type(good) is not int or not floor <= good < number or not isinstance(excused, list):
            out.broken_records[number] = (
                f"the break recorded at line {number} does not fit the log (it names a line"
                " before an earlier recorded break, or none)"
            )
            continue
        if set_aside_digest(lines[good : number - 1]) != frozen:
            out.broken_records[number] = (
                f"lines {good + 1} to {number - 1}, which the break recorded at line"
                f" {number} set aside, were changed after it was recorded"
            )
            continue
        out.set_aside.update(range(good + 1, number))
        out.segments[number] = good
        out.keep.add(good)
        floor = number
        count = 0
        for entry in excused:
            if isinstance(entry, dict) and type(entry.get("lines")) is int:
                out.excused.add((entry["lines"], entry.get("last_digest")))
                count += 1
        out.shown.append(
            {
                "line": number,
                "last_good_line": good,
                "set_aside_lines": number - 1 - good,
                "excused_anchors": count,
            }
        )
    return out

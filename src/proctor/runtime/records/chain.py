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
import itertools
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from proctor.contracts import values as dataclasses
from proctor.runtime.records.chain_lines import (
    BLOCK,
    BREAK_EVENT,
    CODES,
    FIXED_FIELDS,
    Breaks,
    BytesLines,
    FileLines,
    Lines,
    breaks_in,
    line_problem,
    recorded_breaks,
    set_aside_digest,
)

__all__ = [
    "BREAK_EVENT",
    "CODES",
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
    "verify_lines",
]

GENESIS = "sha256:" + "0" * 64


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
    matches, each ``{line, last_good_line, set_aside_lines, excused_anchors}``. ``code`` names
    what ``reason`` says in a word (``None`` when ``ok``): see :data:`CODES`.
    """

    ok: bool
    lines: int
    first_bad_line: int | None = None
    reason: str | None = None
    anchors: int = 0
    broken_anchors: tuple[dict[str, Any], ...] = ()
    recorded_breaks: tuple[dict[str, Any], ...] = ()
    code: str | None = None

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
        while chunk := os.read(fd, BLOCK):
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

    The file is read in blocks of 1 MiB under one shared lock (no append or repair is half
    seen) and checked line by line, so memory stays flat whatever its length (see
    :func:`verify_lines` for what each line costs).

    Raises:
        OSError: the file cannot be read (``FileNotFoundError`` when it does not exist), or
            is not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a device or a pipe may never end
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        fcntl.flock(fd, fcntl.LOCK_SH)
        return verify_lines(lambda: FileLines(fd), anchors)
    finally:
        os.close(fd)


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
    return verify_lines(lambda: BytesLines(data), anchors, prev=prev, first_line=first_line)


def verify_lines(
    source: Callable[[], Lines],
    anchors: Iterable[Anchor] = (),
    *,
    prev: str = GENESIS,
    first_line: int = 1,
) -> ChainReport:
    """:func:`verify_bytes` over the lines ``source()`` reads (again from the start each call).

    A log with no recorded break is read once: each line's ``prev`` is compared as bytes
    with the digest of the line before and its head with the writer's (:data:`_WRITTEN_HEAD`),
    without decoding the line: a line the next line's ``prev`` commits is the line as it was
    chained. The last line (nothing commits it), a line in any other form, and the line before
    a broken link are decoded in full (:func:`line_problem`: strict JSON, so a key given twice
    is refused with ``audit_line_duplicate_key``, then the fixed fields in order), so a
    changed line that no longer parses is still named itself. A line in the middle is not
    decoded: a history rewritten and chained again with lines that are not JSON (or repeat a
    key) is found by the anchors, as one chained again with valid lines is; and a line
    appended by another hand is decoded by the next writer, which does not chain over one
    that fails (``AuditLog._write``), so no such line becomes a middle line with its link
    intact. A log with a recorded break is
    read three times (its records, the lines they set aside, the chain), every line decoded.
    """
    anchors = tuple(anchors)
    report = _fast(source(), anchors, prev, first_line)
    if report is not None:
        return report
    breaks = breaks_in(source) if first_line == 1 else None
    if breaks is not None:
        anchors = tuple(a for a in anchors if (a.lines, a.last_digest) not in breaks.excused)
    return _walk(source(), anchors, prev, first_line, breaks)


def _fast(
    lines: Lines, anchors: tuple[Anchor, ...], prev: str, first_line: int
) -> ChainReport | None:
    """The report of a log with no recorded break, read once; ``None`` when the log holds a
    break record (the caller walks it again, honouring its breaks)."""
    at = {n: "" for n in sorted({a.lines for a in anchors if a.lines > 0})}
    sha = hashlib.sha256
    expect = b',"prev":"' + prev.encode() + b'"}'
    number = first_line - 1
    hexed = last_hexed = ""  # the digests of the line before and of the one before it
    last = b""  # the line before
    bad_line: int | None = None
    reason: tuple[str, str] | None = None
    for line in lines:
        number += 1
        if not (
            line.endswith(expect)
            and line.startswith(_WRITTEN_HEAD)
            and line.startswith(_WRITTEN_RUN, _WRITTEN_RUN_AT)
        ):
            bad = line_problem(line, "sha256:" + hexed if hexed else prev)
            if bad is not None and number > first_line:
                # the line before was vouched by no one: a line that no longer parses is
                # named itself, not the line after it
                earlier = line_problem(last, "sha256:" + last_hexed if last_hexed else prev)
                if earlier is not None:
                    bad_line, reason = number - 1, earlier
            if bad is not None and bad_line is None:
                bad_line, reason = number, bad
            if bad_line is not None:
                if not at:
                    number += lines.drain()
                    break
                if number in at:
                    at[number] = "sha256:" + sha(line).hexdigest()
                for rest in lines:  # only the digests the anchors need
                    number += 1
                    if number in at:
                        at[number] = "sha256:" + sha(rest).hexdigest()
                break
        last, last_hexed, hexed = line, hexed, sha(line).hexdigest()
        expect = b',"prev":"sha256:' + hexed.encode() + b'"}'
        if number in at:
            at[number] = "sha256:" + hexed
    if lines.marked:
        return None
    if bad_line is None and number >= first_line:  # nothing commits the last line: decode it
        bad = line_problem(last, "sha256:" + last_hexed if last_hexed else prev)
        if bad is not None:
            bad_line, reason = number, bad
    complete = number
    if lines.tail:
        number += 1
        if bad_line is None:
            bad_line, reason = number, ("audit_line_torn", _TORN)
        if number in at:
            at[number] = line_digest(lines.tail)
    checked, broken = _check_anchors(anchors, at, complete)
    if broken and (bad_line is None or broken[0]["line"] < bad_line):
        bad_line, reason = broken[0]["line"], _anchor_problem(broken[0])
    return ChainReport(
        ok=bad_line is None,
        lines=number,
        first_bad_line=bad_line,
        reason=None if reason is None else reason[1],
        anchors=checked,
        broken_anchors=tuple(broken),
        code=None if reason is None else reason[0],
    )


def _walk(
    lines: Lines,
    anchors: tuple[Anchor, ...],
    prev: str,
    first_line: int,
    breaks: Breaks | None,
) -> ChainReport:
    """The report of a log walked line by line, every line decoded, honouring ``breaks``."""
    wanted = sorted({a.lines for a in anchors if a.lines > 0})
    at = {n: "" for n in wanted}
    bad_line: int | None = None
    reason: tuple[str, str] | None = None
    kept: dict[int, str] = {0: GENESIS}
    number = first_line - 1
    for line in itertools.chain(lines, lines.torn_tail()):
        number += 1
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
                bad_line = number
                reason = ("audit_break_record_broken", breaks.broken_records[number])
        if bad_line is None:
            bad = ("audit_line_torn", _TORN) if lines.torn else line_problem(line, prev)
            if bad is not None:
                bad_line, reason = number, bad
                if not at:
                    break
        prev = line_digest(line)
        if breaks is not None and number in breaks.keep:
            kept[number] = prev
        if number in at:
            at[number] = prev
    if bad_line is not None and not at and not lines.torn:  # stopped early: count the rest
        number += lines.drain()
        if lines.tail:
            number, lines.torn = number + 1, True
    complete = number - (1 if lines.torn else 0)
    checked, broken = _check_anchors(anchors, at, complete)
    if broken and (bad_line is None or broken[0]["line"] < bad_line):
        bad_line, reason = broken[0]["line"], _anchor_problem(broken[0])
    return ChainReport(
        ok=bad_line is None,
        lines=number,
        first_bad_line=bad_line,
        reason=None if reason is None else reason[1],
        anchors=checked,
        broken_anchors=tuple(broken),
        recorded_breaks=() if breaks is None else tuple(breaks.shown),
        code=None if reason is None else reason[0],
    )


def _anchor_problem(broken: Mapping[str, Any]) -> tuple[str, str]:
    return "audit_anchor_" + str(broken["problem"]), str(broken["message"])


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


_TORN = (
    "the last line is incomplete (no newline): a write was cut short or the file was"
    " truncated; the next proctor command that writes the log moves it aside"
)
_WRITTEN_HEAD = b'{"schema_version":"1","event_id":"'
_WRITTEN_RUN, _WRITTEN_RUN_AT = b'","run_id":', len(_WRITTEN_HEAD) + 36
"""How the writer starts a line: the schema version, an event id of 36 characters (a UUID),
and the run id's key. A line that starts otherwise is decoded in full."""

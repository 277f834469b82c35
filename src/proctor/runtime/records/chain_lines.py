"""The lines of an audit log as the chain's verifier reads them, and the breaks a person
recorded in them (:data:`BREAK_EVENT`); :mod:`.chain` verifies the chain over them."""

from __future__ import annotations

import abc
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from proctor.contracts import json_strict
from proctor.contracts import values as dataclasses
from proctor.errors import ParseError

__all__ = [
    "BLOCK",
    "BREAK_EVENT",
    "BREAK_MARK",
    "CODES",
    "FIXED_FIELDS",
    "LINE_DEPTH",
    "Breaks",
    "BytesLines",
    "FileLines",
    "Lines",
    "breaks_in",
    "line_problem",
    "recorded_breaks",
    "set_aside_digest",
]

BLOCK = 1 << 20
"""The bytes read from the log at a time."""

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

LINE_DEPTH = 512
"""The deepest nesting a line may hold: deeper than the writer can encode (its C encoder stops
at about a third of the recursion limit), shallower than the parser could descend."""

CODES = {
    "audit_line_duplicate_key": "a line repeats a key in one object: readers disagree on which"
    " copy counts, so proctor never writes one",
    "audit_line_not_json": "a line is not JSON (or holds NaN or Infinity)",
    "audit_line_not_utf8": "a line is not UTF-8",
    "audit_line_too_deep": f"a line nests deeper than {LINE_DEPTH} levels",
    "audit_line_not_object": "a line is not a JSON object",
    "audit_line_fields_missing": "a line lacks a fixed field or prev",
    "audit_line_fields_out_of_order": "a line's fixed fields are not first, in order",
    "audit_prev_mismatch": "a line's prev is not the digest of the line before",
    "audit_line_torn": "the last line has no newline",
    "audit_break_record_broken": "a recorded break no longer fits the log",
    "audit_anchor_cut": "an anchor commits more lines than the log has",
    "audit_anchor_rewritten": "an anchor commits another line than the log's",
}
"""The codes of a broken chain (:attr:`ChainReport.code`), each with what it means."""

PREV_BROKEN = "prev does not match the line before (a line was removed, changed or moved)"


def line_problem(line: bytes, prev: str | None) -> tuple[str, str] | None:
    """What is wrong with one line of the log, as ``(code, reason)``; ``None`` when it is a
    strict JSON object with the fixed fields first, in order, and ``prev`` equal to ``prev``
    (``None``: not compared).

    The strict reader refuses a key given twice at any depth: the line a verifier accepts must
    be the line every reader of the log reads (a reader keeping the first copy of a repeated
    ``event`` or ``prev`` would read another).
    """
    try:
        record = json_strict.loads(line, source="audit line", limit=LINE_DEPTH)
    except ParseError as exc:
        code = exc.code if exc.code in ("duplicate_key", "too_deep", "not_utf8") else "not_json"
        if code == "duplicate_key":
            return "audit_line_duplicate_key", (
                "repeats a key in one object (readers disagree on which copy counts; proctor"
                " never writes one): the line was changed"
            )
        if code == "too_deep":
            return "audit_line_too_deep", f"nests deeper than {LINE_DEPTH} levels"
        return "audit_line_" + code, "not valid JSON" if code == "not_json" else "not UTF-8"
    if not isinstance(record, dict):
        return "audit_line_not_object", "not a JSON object"
    missing = [name for name in (*FIXED_FIELDS, "prev") if name not in record]
    if missing:
        return "audit_line_fields_missing", f"missing fields {missing}"
    if list(record)[: len(FIXED_FIELDS)] != list(FIXED_FIELDS):
        return "audit_line_fields_out_of_order", "fixed fields out of order"
    if prev is not None and record["prev"] != prev:
        return "audit_prev_mismatch", PREV_BROKEN
    return None


class Lines(abc.ABC):
    """The complete lines of a log, read once from its start (without their newlines); once
    they are exhausted, ``tail`` is a last line with no newline (``b""`` for none). ``marked``
    says whether :data:`BREAK_MARK` occurs in the bytes read so far."""

    tail: bytes = b""
    marked: bool = False
    torn: bool = False
    """Whether :meth:`torn_tail` gave the tail."""
    _it: Iterator[bytes] | None = None

    def __iter__(self) -> Iterator[bytes]:
        if self._it is None:
            self._it = self._read()
        return self._it

    def _read(self) -> Iterator[bytes]:
        for block in self._blocks():
            buffer = self.tail + block
            if not self.marked and BREAK_MARK in buffer:
                self.marked = True
            lines = buffer.split(b"\n")
            self.tail = lines.pop()
            yield from lines

    def torn_tail(self) -> Iterator[bytes]:
        """The tail as one more line, once the lines are exhausted (``torn`` set)."""
        if self.tail:
            self.torn = True
            yield self.tail

    def drain(self) -> int:
        """Read the rest, counting its complete lines (``tail`` and ``marked`` kept up)."""
        return sum(1 for _ in self)

    @abc.abstractmethod
    def _blocks(self) -> Iterator[bytes]:
        """The source's bytes, block by block, in order."""


class FileLines(Lines):
    """The lines of an open file, read with ``pread`` from offset 0 (the caller holds it
    locked)."""

    def __init__(self, fd: int) -> None:
        self._fd, self._at = fd, 0

    def _blocks(self) -> Iterator[bytes]:
        while block := os.pread(self._fd, BLOCK, self._at):
            self._at += len(block)
            yield block


class BytesLines(Lines):
    """The lines of bytes already in memory."""

    def __init__(self, data: bytes) -> None:
        self._data, self._given = data, False

    def _blocks(self) -> Iterator[bytes]:
        if not self._given:
            self._given = True
            if self._data:
                yield self._data


BREAK_EVENT = "audit_break_accepted"
"""The event of a break a person recorded (``proctor audit accept-break``). Its line chains to
the last good line (its ``prev`` is that line's digest, :data:`GENESIS` for none) instead of
the line before it, so it starts a new segment of the chain; ``last_good_line`` names that
line, ``set_aside_digest`` freezes the lines between it and the record (``sha256:`` of their
bytes joined by newlines: any later change to them breaks the chain again), and
``excused_anchors`` lists the anchors (``{lines, last_digest}``) that were broken when it was
recorded. Every other anchor, and every other line, is checked as before."""

BREAK_MARK = b'"event":"' + BREAK_EVENT.encode() + b'"'


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
    if BREAK_MARK not in data:
        return None
    found = _break_records(enumerate(lines, start=1))
    return _breaks_of(found, lambda good, number: set_aside_digest(lines[good : number - 1]))


def breaks_in(source: Callable[[], Lines]) -> Breaks:
    """:func:`recorded_breaks` of a log read as lines: once for its records, once for the
    digests of the lines each record sets aside."""
    first = source()
    found = _break_records(enumerate(_and_tail(first), start=1))
    spans = {
        (record["last_good_line"], number)
        for number, record in found
        if _fits(record.get("last_good_line"), number)
    }
    hashers = {span: hashlib.sha256() for span in spans}
    for number, line in enumerate(_and_tail(source()), start=1):
        for (good, end), hasher in hashers.items():
            if good < number < end:
                hasher.update(line if number == good + 1 else b"\n" + line)
    digests = {span: "sha256:" + hasher.hexdigest() for span, hasher in hashers.items()}
    return _breaks_of(found, lambda good, number: digests[(good, number)])


def _and_tail(lines: Lines) -> Iterator[bytes]:
    yield from lines
    if lines.tail:
        yield lines.tail


def _fits(good: Any, number: int) -> bool:
    return type(good) is int and 0 <= good < number


def _break_records(lines: Iterable[tuple[int, bytes]]) -> list[tuple[int, dict[str, Any]]]:
    """The lines that hold a break record, by number, each decoded."""
    found: list[tuple[int, dict[str, Any]]] = []
    for number, line in lines:
        if BREAK_MARK not in line:
            continue
        try:
            # strict: a record with a key twice is no record (the chain check refuses it)
            record = json_strict.loads(line, source="audit line", limit=LINE_DEPTH)
        except ParseError:
            continue
        if isinstance(record, dict) and record.get("event") == BREAK_EVENT:
            found.append((number, record))
    return found


def _breaks_of(found: list[tuple[int, dict[str, Any]]], aside: Callable[[int, int], str]) -> Breaks:
    """The breaks ``found`` records; ``aside(good, number)`` is the digest of the lines
    between ``good`` and ``number``."""
    out = Breaks()
    floor = 0  # each break comes after the previous one's record
    for number, record in found:
        good, frozen = record.get("last_good_line"), record.get("set_aside_digest")
        excused = record.get("excused_anchors")
        if type(good) is not int or not floor <= good < number or not isinstance(excused, list):
            out.broken_records[number] = (
                f"the break recorded at line {number} does not fit the log (it names a line"
                " before an earlier recorded break, or none)"
            )
            continue
        if aside(good, number) != frozen:
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

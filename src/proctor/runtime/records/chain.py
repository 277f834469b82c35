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
    "FIXED_FIELDS",
    "GENESIS",
    "Anchor",
    "ChainReport",
    "line_digest",
    "read_log",
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
    ``rewritten``).
    """

    ok: bool
    lines: int
    first_bad_line: int | None = None
    reason: str | None = None
    anchors: int = 0
    broken_anchors: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready mapping."""
        out = dataclasses.asdict(self)
        out["broken_anchors"] = list(self.broken_anchors)
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


def verify_bytes(data: bytes, anchors: Iterable[Anchor] = ()) -> ChainReport:
    """:func:`verify_chain` over a log's bytes (``b""`` for a missing or emptied log)."""
    anchors = tuple(anchors)
    lines = data.split(b"\n") if data else []
    truncated = bool(lines) and lines[-1] != b""
    if lines and not truncated:
        lines.pop()
    wanted = sorted({a.lines for a in anchors if a.lines > 0})
    at = {n: "" for n in wanted}
    bad_line: int | None = None
    reason: str | None = None
    prev = GENESIS
    for number, line in enumerate(lines, start=1):
        if bad_line is None:
            bad = _check_line(line, prev)
            if truncated and number == len(lines):
                bad = (
                    "the last line is incomplete (no newline): a write was cut short or the file"
                    " was truncated; the next proctor command that writes the log moves it aside"
                )
            if bad is not None:
                bad_line, reason = number, bad
                if not at:
                    break
        prev = line_digest(line)
        if number in at:
            at[number] = prev
    complete = len(lines) - (1 if truncated else 0)
    checked, broken = _check_anchors(anchors, at, complete)
    if broken and (bad_line is None or broken[0]["line"] < bad_line):
        bad_line, reason = broken[0]["line"], broken[0]["message"]
    return ChainReport(
        ok=bad_line is None,
        lines=len(lines),
        first_bad_line=bad_line,
        reason=reason,
        anchors=checked,
        broken_anchors=tuple(broken),
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

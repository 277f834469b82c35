"""The lines this process appended to an audit log since a run's start last checked it.

A run's start verifies the log's lines past the mark of the last check (:mod:`.audit_breaks`):
in a process that drives run after run, those are the lines it wrote itself since. The log
(:class:`.audit.AuditLog`) keeps them here as it appends them: where they begin, the digest
the first one chains to, their bytes and the digest of the last. When the lines past the mark
are, byte for byte, these, chained to the mark's digest, verifying them again would answer
what it answered when they were written (each line chained to the one before, in the writer's
form): the check compares the bytes and does not hash and parse them again. Bytes that differ
in any way (another process's lines among them, a changed byte, a cut) are verified in full,
as before; so is a log holding more than :data:`_MAX` bytes of them.

The last of those lines, once a check took them, is kept with its digest (:func:`known`): it
is the line the mark of that check ends at, and the next check compares the marked line with
it instead of hashing it again (the same bytes have the same digest).
"""

from __future__ import annotations

import threading

__all__ = ["forget", "known", "vouched", "wrote"]

_MAX = 65536
"""At most this many bytes are kept per log (past them, the next check verifies in full)."""

_LOGS = 16
"""At most this many logs are kept for (a process writing to more forgets the oldest, whose
next check then verifies in full): a long-lived process that touches many workspaces holds
at most ``_LOGS * _MAX`` bytes here."""


class _Own:
    __slots__ = ("data", "digests", "last", "lines", "prev", "start")

    def __init__(self, start: int, prev: str, data: bytes, last: str) -> None:
        self.start, self.prev, self.last = start, prev, last
        self.data = bytearray(data)
        self.lines = 1
        self.digests = [last]  # each line's, in order (the last is ``last``)


_own: dict[str, _Own] = {}
_last: dict[str, tuple[str, bytes]] = {}  # per log: the last own line a check took, its digest
_lock = threading.Lock()


def wrote(path: str, at: int, prev: str, data: bytes, digest: str) -> None:
    """One line this process appended to the log at ``path``: ``data`` (with its newline) at
    offset ``at``, chained to ``prev``, its own digest ``digest``."""
    with _lock:
        own = _own.get(path)
        if own is not None and own.start + len(own.data) == at and own.last == prev:
            if len(own.data) + len(data) > _MAX:
                del _own[path]
                return
            own.data += data
            own.last = digest
            own.lines += 1
            own.digests.append(digest)
        elif len(data) <= _MAX:
            _own.pop(path, None)
            if len(_own) >= _LOGS:
                del _own[next(iter(_own))]  # the log kept for longest
            _own[path] = _Own(at, prev, data, digest)
        else:
            _own.pop(path, None)


def vouched(path: str, start: int, prev: str, tail: bytes) -> tuple[int, tuple[str, ...]] | None:
    """``(lines, the digest of each)`` when ``tail``, the log's bytes from offset ``start``
    whose first line must chain to ``prev``, are the very lines this process appended there
    (each digest the one it took over that line as it wrote it); ``None`` when they are not
    (or are not known)."""
    with _lock:
        own = _own.get(path)
        if own is None or own.start != start or own.prev != prev or own.data != tail:
            return None
        return own.lines, tuple(own.digests)


def forget(path: str) -> None:
    """The log at ``path`` was checked up to its end: what this process appends from now on
    is kept afresh (the last line it kept, with its digest, is kept for :func:`known`)."""
    with _lock:
        own = _own.pop(path, None)
        _last.pop(path, None)
        if own is not None:
            data = own.data
            if len(_last) >= _LOGS:
                del _last[next(iter(_last))]
            _last[path] = (own.last, bytes(data[data.rfind(b"\n", 0, len(data) - 1) + 1 : -1]))


def known(path: str, digest: str) -> bytes | None:
    """The bytes (without the newline) of the line with digest ``digest`` that this process
    appended last to the log at ``path`` before its last check, or ``None`` (not known): a
    line in the log equal to them has that digest, without hashing it again."""
    with _lock:
        last = _last.get(path)
    return last[1] if last is not None and last[0] == digest else None

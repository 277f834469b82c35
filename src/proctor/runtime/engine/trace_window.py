"""The envelope's trace, bounded: every settled call while there are at most
:data:`TRACE_LIMIT`, else the first and the last :data:`TRACE_ENDS` and how many lie between.

A turn of a million calls would otherwise put a million entries in its envelope (and the
seal would hold them all). Past the limit the envelope's ``trace`` is the first
:data:`TRACE_ENDS` entries then the last :data:`TRACE_ENDS`, and ``trace_omitted`` counts the
entries between them; every entry is still in the run store (``proctor history RUN`` pages the
run's events, the call rows hold every call) and every call has its receipt. A trace within the
limit is what it always was, and the envelope has no ``trace_omitted``.

:class:`TraceWindow` takes the calls in any order (the seal reads them step by step, which is
claim order only when steps ran one after another) and keeps at most :data:`TRACE_LIMIT` plus
:data:`TRACE_ENDS` of them, placed by their ``seq`` (the store's claim order).
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import TraceEntry
from proctor.runtime.records.runs import CallRecord, RunStore

if TYPE_CHECKING:
    from proctor.runtime.boundary.sandbox import SandboxUse

__all__ = ["MARK", "TRACE_ENDS", "TRACE_LIMIT", "TraceWindow", "mark_of", "traced", "window_of"]

TRACE_LIMIT = 1000
"""The most entries an envelope's trace shows whole."""

TRACE_ENDS = 500
"""Entries shown at each end of a longer trace."""

_SHOWN = ("completed", "failed", "refused")

MARK = "trace_mark"
"""The key of a run's data holding its last pause's :func:`mark_of`."""


def traced(call: CallRecord) -> bool:
    """Whether ``call`` has an entry in the trace: settled as completed, failed or refused."""
    settled = call.result if isinstance(call.result, dict) else {}
    return call.state == "settled" and settled.get("status") in _SHOWN


class TraceWindow:
    """The calls a bounded trace is made of, added one at a time (see the module).

    ``calls`` counts every call added, ``settled`` whether each was settled (what lets the run
    row keep the trace as a count of call rows: :func:`.stored_envelope.compact_trace`),
    ``start`` and ``through`` the least and the greatest ``seq`` added.
    """

    __slots__ = (
        "_ends", "_entries", "_first", "_last", "_limit", "calls", "count", "settled", "start",
        "through",
    )  # fmt: skip

    def __init__(self, *, limit: int = TRACE_LIMIT, ends: int = TRACE_ENDS) -> None:
        if not 0 < 2 * ends <= limit:
            raise ValueError("a trace's two ends fit within its limit")
        self._limit, self._ends = limit, ends
        # the earliest as (-seq, call), the latest as (seq, call): a call's seq is its own
        self._first: list[tuple[int, CallRecord]] = []
        self._last: list[tuple[int, CallRecord]] = []
        self._entries: list[TraceEntry] | None = None
        self.calls = 0
        self.count = 0
        self.settled = True
        self.start = 0
        self.through = 0

    def add(self, call: CallRecord) -> None:
        """Take one call (its ``seq`` places it)."""
        self.calls += 1
        if call.seq > self.through:
            self.through = call.seq
        if call.seq < self.start or not self.start:
            self.start = call.seq
        if call.state != "settled":
            self.settled = False
        if not traced(call):
            return
        self.count += 1
        self._entries = None
        seq = call.seq
        first = self._first
        if len(first) < self._limit:
            heapq.heappush(first, (-seq, call))
        elif seq < -first[0][0]:
            heapq.heapreplace(first, (-seq, call))
        last = self._last
        if len(last) < self._ends:
            heapq.heappush(last, (seq, call))
        elif seq > last[0][0]:
            heapq.heapreplace(last, (seq, call))

    def extend(self, calls: Iterable[CallRecord]) -> TraceWindow:
        """:meth:`add` each of ``calls``; returns the window."""
        for call in calls:
            self.add(call)
        return self

    @property
    def omitted(self) -> int | None:
        """How many entries the trace leaves out (``None``: it is whole)."""
        return self.count - 2 * self._ends if self.count > self._limit else None

    def shown(self) -> list[CallRecord]:
        """The calls the trace shows, in claim order."""
        # by seq: the heap holds -seq, so the greatest first (a stable sort either way)
        first = [call for _, call in sorted(self._first, key=_SEQ, reverse=True)]
        if len({c.seq for c in first}) < len(first):
            raise ValueError("every call of a trace window has its own seq")
        if self.count <= self._limit:
            return first
        return first[: self._ends] + [call for _, call in sorted(self._last, key=_seq)]

    def head_through(self) -> int | None:
        """The ``seq`` of the last call a trace past the limit shows at its start (``None``
        while it holds fewer traced calls)."""
        if self.count < self._ends:
            return None
        return sorted(-negated for negated, _ in self._first)[self._ends - 1]

    def entries(self) -> list[TraceEntry]:
        """The trace's entries, in claim order."""
        if self._entries is None:
            self._entries = [entry(call) for call in self.shown()]
        return self._entries


def _seq(item: tuple[int, CallRecord]) -> int:
    return item[0]


_SEQ = operator.itemgetter(0)  # _seq, in C


def entry(call: CallRecord) -> TraceEntry:
    """The trace entry of a :func:`traced` call."""
    settled: dict[str, Any] = call.result if isinstance(call.result, dict) else {}
    error = settled.get("error") or None
    return TraceEntry(
        step=call.step_id or "",
        tool=call.tool,
        call_id=call.call_id,
        outcome=settled["status"],
        code=None if error is None else str(error.get("code")),
        message=None if error is None else str(error.get("message")),
        warnings=[
            f"{v['rule_id']}: {v['message']}"
            for v in settled.get("verdicts") or []
            if v.get("effect") == "warned"
        ]
        + sandbox_warnings(settled),
    )


def sandbox_use(record: object) -> SandboxUse | None:
    """The sandbox a call recorded (``None`` for one that started no process: most calls,
    read without importing the sandbox module)."""
    if record is None:
        return None
    from proctor.runtime.boundary.sandbox import SandboxUse

    return SandboxUse.from_record(record)


def sandbox_warnings(settled: dict[str, Any]) -> list[str]:
    """The trace's warning about the sandbox a call recorded, if it warrants one."""
    use = sandbox_use(settled.get("sandbox"))
    warning = None if use is None else use.warning()
    return [] if warning is None else [warning]


def window_of(store: RunStore, run_id: str, mark: Any = None) -> TraceWindow:
    """The trace window of every call the run recorded (read a page at a time).

    With ``mark`` (:func:`mark_of` an earlier window of the run, kept in its data), only the
    calls claimed since are read whole, each range read is bounded by the places the mark
    holds, and a trace past the limit reads its two ends: a pause then costs the calls made
    since the last one, not the run so far. A mark that does not fit the run's calls (their
    count differs) is not used.
    """
    carried = _carried(store, run_id, mark) if isinstance(mark, dict) else None
    return carried if carried is not None else TraceWindow().extend(store.iter_calls(run_id))


def mark_of(window: TraceWindow) -> dict[str, int | None] | None:
    """What a later window of the run carries on from: the least and greatest ``seq``, the
    calls and the traced entries counted, and the ``seq`` the trace's start ends at; ``None``
    while a call is not settled (it may settle into the trace later; a settled call never
    changes)."""
    if not window.settled or not window.calls:
        return None
    return {
        "start": window.start,
        "seq": window.through,
        "calls": window.calls,
        "count": window.count,
        "head": window.head_through(),
    }


_OPEN_END = 2**62
"""An upper bound no ``seq`` reaches (the calls claimed since a mark end where the run's do)."""


def _carried(store: RunStore, run_id: str, mark: dict[str, Any]) -> TraceWindow | None:
    try:
        start, seq = int(mark["start"]), int(mark["seq"])
        calls, count = int(mark["calls"]), int(mark["count"])
        head_at = None if mark.get("head") is None else int(mark["head"])
    except (KeyError, TypeError, ValueError):
        return None
    new = store.run_counts(run_id).calls - calls
    if new < 0:
        return None  # not the calls the mark counted
    fresh = TraceWindow()
    if new:  # exactly the calls claimed since: the read stops at the last of them
        since = store.iter_calls(run_id, after=seq, through=_OPEN_END, batch=min(new, 1000))
        fresh.extend(itertools.islice(since, new))
        if fresh.calls != new:
            return None
    count += fresh.count
    if count <= TRACE_LIMIT or head_at is None:
        return None  # a whole trace shows every entry: read as it always was
    last = max(seq, fresh.through)
    head = store.iter_calls(run_id, after=start - 1, through=head_at, batch=TRACE_ENDS)
    shown = list(itertools.islice(filter(traced, head), TRACE_ENDS))
    newest = store.iter_calls(
        run_id, after=start - 1, through=last, newest_first=True, batch=TRACE_ENDS
    )
    tail = list(itertools.islice(filter(traced, newest), TRACE_ENDS))
    if len(shown) < TRACE_ENDS or len(tail) < TRACE_ENDS or tail[-1].seq <= shown[-1].seq:
        return None  # fewer entries than the mark counted: read the run whole
    window = TraceWindow()
    window.extend((*shown, *tail))
    window.calls, window.count, window.settled = calls + new, count, fresh.settled
    window.start, window.through = start, last
    return window


def stored_entries(
    store: RunStore,
    run_id: str,
    count: int,
    omitted: int | None,
    within: tuple[int, int, int] | None = None,
) -> list[Any]:
    """The trace a run row keeps as ``count`` (its first ``count`` call rows), made again:
    whole when ``omitted`` is ``None``, else its two ends (see the module). ``within``: the
    ``seq`` of the first of those rows, of the last the trace's start shows and of the last
    of them, when the row's mark says so: each end is then one bounded read, however many
    calls the run holds or claimed since."""
    if omitted is not None and within is not None:
        start, head_at, last = within
        first = store.iter_calls(run_id, after=start - 1, through=head_at, batch=TRACE_ENDS)
        newest = store.iter_calls(
            run_id, after=start - 1, through=last, newest_first=True, batch=TRACE_ENDS
        )
        head = list(itertools.islice(filter(traced, first), TRACE_ENDS))
        tail = list(itertools.islice(filter(traced, newest), TRACE_ENDS))[::-1]
        return [entry(c).model_dump() for c in (*head, *tail)]
    every = itertools.islice(store.iter_calls(run_id), count)
    if omitted is None:
        return [entry(c).model_dump() for c in every if traced(c)]
    shown = [entry(c).model_dump() for c in itertools.islice(filter(traced, every), TRACE_ENDS)]
    if store.run_counts(run_id).calls == count:  # nothing was claimed since: read from the end
        newest = filter(traced, store.iter_calls(run_id, newest_first=True, batch=TRACE_ENDS))
        ends = list(itertools.islice(newest, TRACE_ENDS))[::-1]
    else:  # the run went on: the last of its first ``count`` calls, one pass
        kept: deque[CallRecord] = deque(maxlen=TRACE_ENDS)
        kept.extend(c for c in itertools.islice(store.iter_calls(run_id), count) if traced(c))
        ends = list(kept)
    return shown + [entry(c).model_dump() for c in ends]

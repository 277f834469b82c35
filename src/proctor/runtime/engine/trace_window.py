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
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import TraceEntry
from proctor.runtime.records.runs import CallRecord, RunStore

if TYPE_CHECKING:
    from proctor.runtime.boundary.sandbox import SandboxUse

__all__ = ["TRACE_ENDS", "TRACE_LIMIT", "TraceWindow", "traced", "window_of"]

TRACE_LIMIT = 1000
"""The most entries an envelope's trace shows whole."""

TRACE_ENDS = 500
"""Entries shown at each end of a longer trace."""

_SHOWN = ("completed", "failed", "refused")


def traced(call: CallRecord) -> bool:
    """Whether ``call`` has an entry in the trace: settled as completed, failed or refused."""
    settled = call.result if isinstance(call.result, dict) else {}
    return call.state == "settled" and settled.get("status") in _SHOWN


class TraceWindow:
    """The calls a bounded trace is made of, added one at a time (see the module).

    ``calls`` counts every call added, ``settled`` whether each was settled (what lets the run
    row keep the trace as a count of call rows: :func:`.stored_envelope.compact_trace`).
    """

    __slots__ = ("_ends", "_entries", "_first", "_last", "_limit", "calls", "count", "settled")

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

    def add(self, call: CallRecord) -> None:
        """Take one call (its ``seq`` places it)."""
        self.calls += 1
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
        first = [call for _, call in sorted(self._first, key=lambda item: -item[0])]
        if len({c.seq for c in first}) < len(first):
            raise ValueError("every call of a trace window has its own seq")
        if self.count <= self._limit:
            return first
        return first[: self._ends] + [call for _, call in sorted(self._last, key=_seq)]

    def entries(self) -> list[TraceEntry]:
        """The trace's entries, in claim order."""
        if self._entries is None:
            self._entries = [entry(call) for call in self.shown()]
        return self._entries


def _seq(item: tuple[int, CallRecord]) -> int:
    return item[0]


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


def window_of(store: RunStore, run_id: str) -> TraceWindow:
    """The trace window of every call the run recorded (read a page at a time)."""
    return TraceWindow().extend(store.iter_calls(run_id))


def stored_entries(store: RunStore, run_id: str, count: int, omitted: int | None) -> list[Any]:
    """The trace a run row keeps as ``count`` (its first ``count`` call rows), made again:
    whole when ``omitted`` is ``None``, else its two ends (see the module)."""
    first = itertools.islice(store.iter_calls(run_id), count)
    if omitted is None:
        return [entry(c).model_dump() for c in first if traced(c)]
    head = [entry(c).model_dump() for c in itertools.islice(filter(traced, first), TRACE_ENDS)]
    if store.run_counts(run_id).calls == count:  # nothing was claimed since: read from the end
        newest = filter(traced, store.iter_calls(run_id, newest_first=True, batch=TRACE_ENDS))
        tail = list(itertools.islice(newest, TRACE_ENDS))[::-1]
    else:  # the run went on: the last of its first ``count`` calls, one pass
        kept: deque[CallRecord] = deque(maxlen=TRACE_ENDS)
        kept.extend(c for c in itertools.islice(store.iter_calls(run_id), count) if traced(c))
        tail = list(kept)
    return head + [entry(c).model_dump() for c in tail]

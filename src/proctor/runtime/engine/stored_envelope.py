"""A run's envelope as the run row keeps it: what the request and call rows hold is not repeated.

A paused envelope shows each open request (address, kind, digest and the request's body) and
an answers template made from the same requests. The request rows hold all of it already, so
the run row keeps, for each view that is exactly its row's body (nothing was redacted from
it), a reference ``{"address", "kind", "request_digest", "stored": "request"}``, and the
template is left out when it is the one :func:`answers_template` makes from the rows. The
trace (paused or sealed) is the settled calls' (:func:`trace_of`): when every call
recorded is settled and the trace is theirs word for word, the row keeps ``{"stored": "calls",
"count": N}`` and a reader makes it again from the first ``N`` call rows (a settled call never
changes, and later calls are after them), a page at a time. A trace past
:data:`~.trace_window.TRACE_LIMIT` entries shows its two ends (:mod:`.trace_window`): the row
keeps the same count, and a reader takes the first end from the first rows and the last end
from the newest (or, when the run claimed calls since, from one pass over the ``N`` rows).

Safe by construction: a part is left out only when the rebuild, made when the pause is
written, equals what the sanitizer gave word for word; a view the sanitizer changed (a secret
redacted, a tainted value replaced) is kept whole, since a later process has not the run's
taint to redact it again. A reader (:func:`envelope_doc`) rebuilds from the rows, by digest:
a request asked again with other content since (the run was resumed and re-asked) is shown
by its reference alone, never by the new row's body under the old digest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proctor.contracts.envelope import TraceEntry
from proctor.contracts.values import replace
from proctor.runtime.engine.trace_window import (
    MARK,
    TraceWindow,
    entry,
    sandbox_use,
    sandbox_warnings,
    stored_entries,
    traced,
)
from proctor.runtime.records.runs import CallRecord, RequestRecord, RunRecord, RunStore

__all__ = [
    "answers_template",
    "compact",
    "compact_trace",
    "envelope_doc",
    "expand",
    "is_reference",
    "plain_view",
    "sandbox_use",
    "sandbox_warnings",
    "trace_of",
]

_STORED = "stored"
"""The key a reference carries, with the value ``request``, and the marker a left-out
template leaves: ``{"stored": "requests"}``."""


def plain_view(request: RequestRecord) -> dict[str, Any]:
    """The view of ``request`` with nothing redacted (what :func:`.pausing.pause` shows)."""
    return {
        "address": request.address,
        "kind": request.kind,
        "request_digest": request.request_digest,
        **{k: v for k, v in request.body.items() if k not in ("address", "kind")},
    }


def answers_template(requests: Iterable[RequestRecord]) -> dict[str, Any]:
    """The answers a host fills in, one entry per request, bound to its digest."""
    from proctor.core.resume import PERSON_KINDS

    template: dict[str, Any] = {"schema": "proctor.resume.v1"}
    for r in requests:
        if r.kind == "wait":  # takes no answer: a resume at or after its until settles it
            continue
        lane = "approvals" if r.kind in PERSON_KINDS else "answers"
        entry: dict[str, Any] = {"request_digest": r.request_digest}
        if r.kind == "approval":
            entry.update({"approved": None, "reason": None})
        elif r.kind == "retry":
            entry["value"] = {"retry": None}
        elif r.kind == "question":
            entry["value"] = {q["id"]: {} for q in r.body.get("questions", [])}
        else:
            entry["value"] = None
        template.setdefault(lane, {})[r.address] = entry
    return template


def compact(doc: dict[str, Any], requests: list[RequestRecord]) -> dict[str, Any]:
    """``doc`` (a sanitized paused envelope over ``requests``, in order) as the run row keeps
    it: each view equal to its request's plain view becomes a reference, and the template, when
    it is the rows' own, a marker."""
    out = dict(doc)
    views = doc.get("requests")
    if isinstance(views, list) and len(views) == len(requests):
        out["requests"] = [
            {
                "address": r.address,
                "kind": r.kind,
                "request_digest": r.request_digest,
                _STORED: "request",
            }
            if view == plain_view(r)
            else view
            for view, r in zip(views, requests, strict=True)
        ]
    if doc.get("answers_template") == answers_template(requests):
        out["answers_template"] = {_STORED: "requests"}
    return out


def trace_of(calls: Iterable[CallRecord]) -> list[TraceEntry]:
    """The envelope's trace whole: every settled call in the order it was claimed (an
    envelope shows it bounded: :mod:`.trace_window`)."""
    return [entry(call) for call in calls if traced(call)]


def compact_trace(
    doc: dict[str, Any],
    calls: TraceWindow | Iterable[CallRecord],
    *,
    dumped: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``doc`` with its trace kept as a count of the run's calls (``calls``: every call the
    run recorded, in claim order, or their :class:`.TraceWindow`) when each is settled and the
    trace is exactly theirs; else ``doc`` as it is. A trace past the limit is kept as the same
    count: its ends are made again from the call rows (``trace_omitted`` stays in ``doc``).
    ``dumped``: the window's entries as dumped already (the trace of an envelope built from
    ``calls.entries()``, before it was sanitized), so they are not dumped again."""
    if not isinstance(calls, TraceWindow):
        calls = TraceWindow().extend(replace(c, seq=n) for n, c in enumerate(calls, 1))
    trace = doc.get("trace")
    if (
        not isinstance(trace, list)
        or not calls.settled
        or doc.get("trace_omitted") != calls.omitted
        or trace != (dumped if dumped is not None else [e.model_dump() for e in calls.entries()])
    ):
        return doc
    return {**doc, "trace": {_STORED: "calls", "count": calls.calls}}


def _trace_count(doc: dict[str, Any]) -> int | None:
    trace = doc.get("trace")
    if isinstance(trace, dict) and trace.get(_STORED) == "calls":
        count = trace.get("count")
        return count if isinstance(count, int) and count >= 0 else 0
    return None


def _within(record: RunRecord, count: int) -> tuple[int, int, int] | None:
    """Where the calls the stored trace counts lie (first ``seq``, the last its start shows,
    the last), when the run's mark (written with the same envelope,
    :func:`.trace_window.mark_of`) counted the same calls."""
    mark = record.data.get(MARK)
    if not isinstance(mark, dict) or mark.get("calls") != count:
        return None
    places = (mark.get("start"), mark.get("head"), mark.get("seq"))
    if not all(isinstance(place, int) for place in places):
        return None
    return int(mark["start"]), int(mark["head"]), int(mark["seq"])


def is_reference(view: Any) -> bool:
    """Whether ``view`` (a stored envelope's request) is a reference to its request row."""
    return isinstance(view, dict) and view.get(_STORED) == "request"


def expand(doc: dict[str, Any], requests: list[RequestRecord]) -> dict[str, Any]:
    """The envelope ``doc`` (as the run row keeps it) whole again, from the run's request rows
    (:func:`compact` reversed; a document with no reference is returned as it is)."""
    views = doc.get("requests")
    refs = [v for v in views if is_reference(v)] if isinstance(views, list) else []
    template = doc.get("answers_template")
    marked = isinstance(template, dict) and template.get(_STORED) == "requests"
    if not refs and not marked:
        return doc
    rows = {(r.address, r.request_digest): r for r in requests}
    out = dict(doc)
    asked: list[RequestRecord] = []
    shown: list[Any] = []
    for view in views if isinstance(views, list) else []:
        if not is_reference(view):
            shown.append(view)
            continue
        row = rows.get((view.get("address"), view.get("request_digest")))
        if row is None:  # asked again since: its reference alone, never another body
            shown.append({k: v for k, v in view.items() if k != _STORED})
            continue
        shown.append(plain_view(row))
        asked.append(row)
    out["requests"] = shown
    if marked:
        wanted = {(v.get("address"), v.get("request_digest")) for v in shown}
        out["answers_template"] = answers_template(
            r for r in requests if (r.address, r.request_digest) in wanted
        )
    return out


def envelope_doc(store: RunStore, record: RunRecord) -> dict[str, Any] | None:
    """The run's envelope as a host sees it, or ``None`` when it has none yet; reads the run's
    requests (calls) only when the row keeps references to them."""
    doc = record.data.get("envelope")
    if not isinstance(doc, dict):
        return None
    count = _trace_count(doc)
    if count is not None:
        omitted = doc.get("trace_omitted")
        omitted = omitted if isinstance(omitted, int) else None
        doc = {
            **doc,
            "trace": stored_entries(store, record.run_id, count, omitted, _within(record, count)),
        }
    views = doc.get("requests")
    template = doc.get("answers_template")
    if not (isinstance(views, list) and any(is_reference(v) for v in views)) and not (
        isinstance(template, dict) and template.get(_STORED) == "requests"
    ):
        return doc
    return expand(doc, store.requests(record.run_id))

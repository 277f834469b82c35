"""What each console page shows, read from the run store through the engine's surface.

Plain functions from a :class:`~proctor.runtime.engine.session.Session` to template contexts
(dicts), so they hold no web framework and every value they return is data, never markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.core.resume import decision_words, options_of
from proctor.errors import UsageError
from proctor.runtime.engine.approvals import Shown, run_requests
from proctor.runtime.engine.approvals import pending_page as pending_page_of
from proctor.runtime.engine.stored_envelope import envelope_doc

if TYPE_CHECKING:
    from proctor.runtime.engine.session import Session

__all__ = ["FILTERS", "diff_lines", "pending_page", "request_page", "run_page", "runs_page"]

FILTERS = ("status", "outcome", "skill")
SCAN_MAX = 2000
"""Runs read at most to fill one filtered page of history (newest first)."""
PENDING_PAGE = 10
"""Open requests on one ``/pending`` page (each with its whole payload), oldest first."""
RUNS_PAGE = 50
"""Runs on one ``/runs`` page, newest first."""


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """A unified diff as ``(css class, line)`` pairs: ``add``, ``del``, ``hunk``, ``file`` or
    ``ctx``; the template colours them, the text stays text."""
    out = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out


def _shown(shown: Shown) -> dict[str, Any]:
    view = shown.view
    payload = view.get("payload") or {}
    files = [
        {**change, "lines": diff_lines(str(change.get("diff") or ""))}
        for change in payload.get("files") or []
    ]
    call = payload.get("call") if isinstance(payload.get("call"), dict) else None
    return {
        **shown.to_json(),
        "view": view,
        "files": files,
        "command": payload.get("command") if isinstance(payload.get("command"), dict) else None,
        "call": call,
        "http": (call or {}).get("args") if (call or {}).get("tool") == "http.request" else None,
        "questions": [
            {**q, "choices": options_of(q)}
            for q in view.get("questions") or []
            if isinstance(q, dict)
        ],
        "for_people": shown.for_people,
        "decision": shown.decision,
        "decision_words": decision_words(shown.decision),
        "lines": shown.lines(),
        "open": shown.state == "open" and shown.run_status != "sealed",
        "path": f"/runs/{shown.run_id}/requests/{shown.address}",
    }


def pending_page(
    session: Session, *, after: int | None = None, limit: int = PENDING_PAGE
) -> dict[str, Any]:
    """One page of the workspace's open requests, oldest first, each with its payload: those
    asked after the cursor ``after``, and ``next``, the cursor of the following page (``None``
    on the last). One keyset read of the store's index of open requests, so the page costs
    the same however many requests wait."""
    shown, following = pending_page_of(session, after=after, limit=limit)
    return {"requests": [_shown(s) for s in shown], "next": following, "after": after}


def request_page(session: Session, run_id: str, address: str) -> dict[str, Any]:
    """One request of one run, open or decided.

    Raises:
        UsageError: ``run_not_found``, ``request_not_found``.
    """
    for shown in run_requests(session, run_id):
        if shown.address == address:
            return {"request": _shown(shown)}
    raise UsageError(f"run {run_id} has no request at {address!r}", code="request_not_found")


def runs_page(
    session: Session, filters: Mapping[str, str], *, after: int | None, limit: int = RUNS_PAGE
) -> dict[str, Any]:
    """Runs newest first that match every filter given (status, outcome, skill)."""
    wanted = {k: v for k, v in filters.items() if k in FILTERS and v}
    rows: list[dict[str, Any]] = []
    scanned = 0
    cursor = after
    more = False
    while len(rows) < limit and scanned < SCAN_MAX:
        # unfiltered, one row past the page tells whether another follows
        page = session.store.list_runs(after=cursor, limit=200 if wanted else limit + 1, data=False)
        if not page:
            break
        for run in page:
            scanned += 1
            cursor = run.cursor
            values = {"status": run.status, "outcome": run.outcome or "", "skill": run.skill}
            if all(values[k] == v for k, v in wanted.items()):
                rows.append(
                    {
                        "run_id": run.run_id,
                        "skill": run.skill,
                        "method": run.method,
                        "status": run.status,
                        "outcome": run.outcome,
                        "created_at": run.created_at,
                        "receipt_id": run.receipt_id,
                        "cursor": run.cursor,
                    }
                )
                if len(rows) == limit:
                    more = bool(wanted) or len(page) > limit
                    break
        if len(page) < 200 or not wanted:
            break
    else:
        more = more or scanned >= SCAN_MAX
    return {"runs": rows, "filters": wanted, "next": cursor if more else None}


def _receipt_tree(session: Session, root_id: str | None) -> list[dict[str, Any]]:
    from proctor.receipts.model import parse_envelope

    out: list[dict[str, Any]] = []
    stack = [(root_id, 0)] if root_id else []
    while stack and len(out) < 5000:
        rid, depth = stack.pop()
        data = session.receipts.get(rid) if rid else None
        if data is None:
            out.append({"receipt_id": rid, "depth": depth, "missing": True})
            continue
        body = parse_envelope(data).body
        out.append(
            {
                "receipt_id": rid,
                "depth": depth,
                "kind": body["kind"],
                "outcome": body["outcome"],
                "step_id": body["subject"].get("step_id"),
                "tool": body["subject"].get("tool"),
                "verdicts": body.get("verdicts") or [],
            }
        )
        stack.extend((c["receipt_id"], depth + 1) for c in reversed(body["children"]))
    return out


def _verified(session: Session, receipt_id: str | None) -> dict[str, Any] | None:
    from proctor.runtime.records.receipts import receipt_dir
    from proctor.runtime.records.verify_folder import verify_receipt

    if receipt_id is None:
        return None
    folder = receipt_dir(session.workspace.state_dir, session.environ)
    result = verify_receipt(receipt_id, receipts_dir=folder, environ=session.environ)
    return {"status": result.status, "message": result.message, "receipts": result.receipts}


def run_page(session: Session, run_id: str) -> dict[str, Any]:
    """One run: its steps, calls, refusal, requests and receipt tree, the tree verified.

    Raises:
        UsageError: ``run_not_found``.
    """
    record = session.store.get_run(run_id)
    if record is None:
        raise UsageError(f"no run with id {run_id!r} in this workspace", code="run_not_found")
    envelope = envelope_doc(session.store, record) or {}
    steps = [
        {"step": sid, "outcome": body.get("outcome"), "seal_reason": body.get("seal_reason")}
        for sid, body in session.store.step_records(run_id).items()
    ]
    calls = []
    for c in session.store.calls(run_id):
        settled: dict[str, Any] = c.result if isinstance(c.result, dict) else {}
        raw = settled.get("error")
        error: dict[str, Any] = raw if isinstance(raw, dict) else {}
        calls.append(
            {
                "call_id": c.call_id,
                "step": c.step_id,
                "tool": c.tool,
                "outcome": settled.get("status") or c.outcome or c.state,
                "code": error.get("code"),
                "message": error.get("message"),
            }
        )
    return {
        "run": {
            "run_id": record.run_id,
            "skill": record.skill,
            "method": record.method,
            "status": record.status,
            "outcome": record.outcome,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "receipt_id": record.receipt_id,
        },
        "refusal": (envelope or {}).get("refusal"),
        "steps": steps,
        "calls": calls,
        "requests": [_shown(s) for s in run_requests(session, run_id)],
        "receipts": _receipt_tree(session, record.receipt_id),
        "verified": _verified(session, record.receipt_id),
    }

"""Pausing and sealing: where a run's driver stops stepping, and what it leaves behind.

The seam: the step loop (:mod:`.drive`) and the turn calls (:mod:`.turn_calls`) decide *that*
the run stops; this module writes *how* it stopped. A pause records the open requests (each
bound to the digest of exactly what it asks) and the envelope a person or host answers; a seal
hands the run to :mod:`.sealing`, which builds its receipts from the store alone.
"""

from __future__ import annotations

from typing import Any

from proctor.contracts.envelope import Refusal, RunEnvelope
from proctor.core.resume import PERSON_KINDS
from proctor.receipts.canonical import digest
from proctor.runtime.engine.host import StepRunner as Run
from proctor.runtime.engine.sealing import audit_lost_note, authority_notes, seal_run
from proctor.runtime.engine.stored_envelope import answers_template, compact, compact_trace
from proctor.runtime.engine.trace_window import MARK, mark_of, window_of
from proctor.runtime.engine.upkeep import on_pause
from proctor.runtime.records.runs import PAUSED, RequestRecord
from proctor.runtime.testhooks import kill_point

__all__ = ["open_request", "pause", "seal", "seal_reused"]


def open_request(run: Run, address: str, body: dict[str, Any]) -> RequestRecord:
    """Record a request (its digest over exactly ``body``); a recorded decision for the
    same digest is kept. The driver notes that it asked (its seal reads the requests)."""
    run.asked = True
    record = RequestRecord(
        run_id=run.run_id,
        address=address,
        kind=str(body["kind"]),
        request_digest=digest(body),
        body=body,
    )
    return run.s.store.put_request(record)


def pause(run: Run, requests: list[RequestRecord]) -> RunEnvelope:
    """Pause the run on ``requests``: record its paused envelope (status ``needs_approval``
    when only a person can answer, else ``needs_agent``, the generic state, which a run
    waiting on a timed wait has too) and audit it."""
    s = run.s
    person_only = all(r.kind in PERSON_KINDS for r in requests)
    status = "needs_approval" if person_only else "needs_agent"
    shown = []
    for r in requests:
        view, redacted = run.sanitizer.value(
            {
                "address": r.address,
                "kind": r.kind,
                "request_digest": r.request_digest,
                **{k: v for k, v in r.body.items() if k not in ("address", "kind")},
            }
        )
        if redacted:
            # The digest binds the exact act, secret included; the view never shows the
            # secret, so it names what it hid (a host cannot recompute this digest).
            view["redacted"] = redacted
        shown.append(view)
    # what the pause owes people (notifications, deadline timers) is durable before the pause
    on_pause(run, requests, shown)
    lost = int(run.record.data.get("audit_lost") or 0) + s.audit.lost(run.run_id)
    envelope = RunEnvelope(
        status=status,  # type: ignore[arg-type]
        run_id=run.run_id,
        skill=run.record.skill,
        method=run.record.method,
        # carried on from the last pause's window: a pause reads the calls made since it
        trace=(window := window_of(s.store, run.run_id, run.record.data.get(MARK))).entries(),
        trace_omitted=window.omitted,
        requests=shown,
        answers_template=answers_template(requests),
        resume_command=f"proctor resume {run.run_id} -",
        audit_lost=lost,
        notes=authority_notes(run.authority.to_json()) + audit_lost_note(lost),
    )
    doc, _ = run.sanitizer.value(envelope.to_json())
    # the run row keeps what the request rows do not hold already (see .stored_envelope)
    kept = compact_trace(compact(doc, requests), window)
    with s.store.transaction():  # the paused record and its event: one commit
        seq = s.store.append_event(
            run.run_id, "paused", {"status": status, "addresses": [r.address for r in requests]}
        )
        # the window a later pause carries on from, and this pause's event (a decision's wait
        # is timed from it: .decisions reads that one event, not the run's)
        marked = {"envelope": kept, "audit_lost": lost, MARK: mark_of(window), PAUSED: seq}
        s.store.update_run(run.run_id, status=status, data=marked)
    run.record.data["audit_lost"] = lost
    run.record.data[MARK], run.record.data[PAUSED] = marked[MARK], seq
    s.audit.take_lost(run.run_id)
    s.audit.emit(
        "run_paused",
        run_id=run.run_id,
        step_index=None,
        status=status,
        requests=[
            {"address": r.address, "kind": r.kind, "request_digest": r.request_digest}
            for r in requests
        ],
    )
    kill_point("run.paused")
    return RunEnvelope.model_validate(doc)


def seal_reused(run: Run, result: Any) -> RunEnvelope:
    """Seal the run ``completed`` with a reused run's ``result``, no step run (``reuse``)."""
    run.s.store.append_event(run.run_id, "reused", dict(run.record.data["reused_from"]))
    return seal(run, "completed", None, result, None)


def seal(
    run: Run, outcome: str, seal_reason: str | None, result: Any, refusal: Refusal | None
) -> RunEnvelope:
    """Seal the run from its record (see :func:`.sealing.seal_run`), once its lease is renewed:
    a driver that lost it writes no receipt.

    The record is the driver's own, not read again: the driver has held the run's lease since
    it read or created the row (its writes are fenced), and every field of the row the seal
    reads that the driver writes while it drives, it writes to its record too (a resume's
    decisions and standing approvals come before the driver, in the record it is given;
    tests/runtime/engine/conftest.py holds every seal of the engine's tests to the store's row).

    Raises:
        LeaseLost: the lease is another driver's now (nothing of the seal was written).
        StoreError: ``seal_failed`` (see :func:`.sealing.seal_run`).
    """
    kill_point("run.before_seal")
    run.s._renew(run.run_id)
    return seal_run(
        run.s,
        run.record,
        outcome=outcome,
        seal_reason=seal_reason,
        result=result,
        refusal=refusal,
        no_requests=run.fresh and not run.asked,
    )

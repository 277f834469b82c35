"""Seal a run from its record in the run store alone.

Receipts cover the whole run, including steps settled before a pause in another process: they
are built from the store's step settlements and calls, never from one process's memory. A host's
``close`` seals through the same path without loading the package.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import Refusal, RunEnvelope
from proctor.errors import ProctorError, ReceiptInvalid, StoreError
from proctor.receipts.canonical import digest
from proctor.receipts.model import Subject, Verdict
from proctor.receipts.writer import ChildList, ReceiptWriter, Ref
from proctor.runtime.boundary.reach import authority_record
from proctor.runtime.boundary.sanitize import scrub_value
from proctor.runtime.engine.stored_envelope import compact_trace, sandbox_use, trace_of
from proctor.runtime.engine.trace_window import TraceWindow
from proctor.runtime.records.runs import CallRecord, RequestRecord, RunRecord, RunStore
from proctor.runtime.records.witness import seal_to_witnesses
from proctor.runtime.testhooks import kill_point

if TYPE_CHECKING:
    from proctor.runtime.engine.host import RunHost

__all__ = [
    "DEFAULT_AUTHORITY_NOTE",
    "SEAL_BATCH",
    "audit_lost_note",
    "authority_notes",
    "call_receipt_outcome",
    "decided_by",
    "seal_groups",
    "seal_run",
    "trace_of",
]

SEAL_BATCH = 4096
"""Receipts written and synced together when a run seals (a 30,002-receipt tree: 8 batches)."""


def call_receipt_outcome(record: CallRecord) -> tuple[str, str | None]:
    """A recorded call's receipt outcome and seal reason."""
    settled = record.result if isinstance(record.result, dict) else {}
    status = settled.get("status", record.outcome)
    if record.state != "settled" or status == "unknown":
        return "killed", "operator_killed"
    if status == "completed":
        return "completed", None
    if status == "failed":
        return "failed", "tool_failed"
    verdicts = settled.get("verdicts") or []
    if any(v.get("effect") == "refused" for v in verdicts):
        return "blocked", "policy_refused"
    code = str((settled.get("error") or {}).get("code", ""))
    if code == "approval_declined":
        return "declined", "approval_declined"
    if code.endswith("budget_exceeded"):
        return "blocked", "budget_exceeded"
    if code == "schema_invalid":
        return "blocked", "inputs_invalid"
    return "blocked", "admission_refused"


DEFAULT_AUTHORITY_NOTE = "no host set an authority"
"""How the note of a run whose authority no host set begins (a terminal shows it once per
workspace: :mod:`proctor.cli.driving`)."""


def authority_notes(authority: dict[str, Any]) -> list[str]:
    """Notes the envelope carries about who set the authority."""
    if authority.get("set_by") != "default":
        return []
    effects, reach = authority.get("effects"), authority.get("reach")
    why = (
        " (the default under MCP and for managed agents: every change waits for a person)"
        if effects == "ask"
        else ""
    )
    return [
        f"{DEFAULT_AUTHORITY_NOTE}: effects {effects}, reach {reach}{why}; a path input reaches"
        " another folder only when a host grants reach: inputs (--run-authority JSON or"
        " --authority NAME)"
    ]


def audit_lost_note(lost: int) -> list[str]:
    """The envelope's note when some of the run's audit events could not be written."""
    if lost <= 0:
        return []
    return [
        f"{lost} audit event(s) of this run could not be written (the audit log refused them);"
        " the run store and the receipts hold the run in full"
    ]


def seal_run(
    session: RunHost,
    record: RunRecord,
    *,
    outcome: str,
    seal_reason: str | None,
    result: Any,
    refusal: Refusal | None,
    no_requests: bool = False,
) -> RunEnvelope:
    """Write the run's receipt tree from the store, mark it sealed, return its envelope.

    ``no_requests``: the caller knows the run has no request (its driver created the run and
    recorded none, and only a lease holder records one), so who decided them is not read.

    The order, and why: the receipts are written first, the run receipt committing the audit
    log's head as it is *before* ``run_sealed`` (that line names the receipt, so the receipt
    cannot commit it); then ``run_sealed`` is written and synced; then the store marks the run
    sealed and keeps the log's head *after* ``run_sealed`` as its newest anchor, in one commit.
    A failure anywhere before that commit leaves the run unsealed and resumable.

    Raises:
        StoreError: ``seal_failed`` when a receipt, the ``run_sealed`` audit line or the run
            store could not be written (``details``: ``run_id``, ``cause``, ``resume_command``);
            the run stays unsealed and ``proctor resume RUN_ID -`` with ``{}`` seals it again.
        UsageError: a receipt field is invalid (a bug).
    """
    try:
        return _seal(session, record, outcome, seal_reason, result, refusal, no_requests)
    except (StoreError, ReceiptInvalid) as exc:
        raise _unsealed(session, record, exc) from exc


def _unsealed(session: RunHost, record: RunRecord, exc: ProctorError) -> StoreError:
    run_id = record.run_id
    lost = int(record.data.get("audit_lost") or 0) + session.audit.take_lost(run_id)
    # best effort: the count outlives this process when only the log or the receipts failed
    with contextlib.suppress(StoreError):
        session.store.update_run(run_id, data={"audit_lost": lost})
    command = f"proctor resume {run_id} -"
    return StoreError(
        f"run {run_id} did not seal: {exc.message} [{exc.code}]. Nothing it did is lost; once"
        f" the cause is fixed, seal it with `{command}` and the document {{}}",
        code="seal_failed",
        details={"run_id": run_id, "cause": exc.code, "resume_command": command},
    )


def _seal(
    session: RunHost,
    record: RunRecord,
    outcome: str,
    seal_reason: str | None,
    result: Any,
    refusal: Refusal | None,
    no_requests: bool,
) -> RunEnvelope:
    s = session
    store = s.store
    data = record.data
    now = s.clock()
    # the tree in a few synced batches, not one per step (the run receipt, written last, is
    # on disk with everything below it before the envelope names it); calls and steps are
    # read a page at a time, so what the seal holds does not grow with the run (segments
    # bound the refs, the window bounds the trace)
    writer = ReceiptWriter(s.receipts, s.signer, clock=s.clock, batch=SEAL_BATCH)
    _time = writer.moment  # stored times, each also known to the writer as receipt text
    run_started = _time(data.get("started_at"), now)
    name, pkg = record.skill, data.get("package_digest")
    deciders = {} if no_requests else decided_by(store.requests(record.run_id))
    window = TraceWindow()
    done_notes: list[str] = []
    # a run of more than SEGMENT_FANOUT steps, a step of more calls: grouped into segments
    run_subject = Subject(name, pkg, record.method)
    step_refs = ChildList(writer, run_subject, started_at=run_started, ended_at=now)
    spent: int | None = None  # the tree's spend: the run's priced steps and its children's
    for step_id, step, step_calls in seal_groups(store, record.run_id):
        if step is None:
            s_outcome, s_reason = (
                (outcome, seal_reason) if outcome != "completed" else ("failed", "child_failed")
            )
            s_started = run_started
            s_ended = now
        else:
            s_outcome, s_reason = step["outcome"], step.get("seal_reason")
            s_started = _time(step.get("started_at"), run_started)
            s_ended = max(_time(step.get("ended_at"), s_started), s_started)
            if step.get("already_done"):
                done_notes.append(
                    f"step {step_id}: already done under its idempotency_key (receipt"
                    f" {step['already_done']}); nothing was sent"
                )
        step_subject = Subject(name, pkg, record.method, step_id)
        call_refs = ChildList(writer, step_subject, started_at=s_started, ended_at=s_ended)
        called: int | None = None  # what the children of the step's skill calls spent
        for call in step_calls:
            window.add(call)
            settled = call.result if isinstance(call.result, dict) else {}
            c_outcome, c_reason = call_receipt_outcome(call)
            verdicts = [
                Verdict(v["rule_id"], v.get("code") or "denied", _enf(v))
                for v in settled.get("verdicts") or []
                if v.get("effect") in ("refused", "warned")
            ]
            approved_by = settled.get("approved_by")
            if isinstance(approved_by, str) and approved_by.startswith("standing_approvals"):
                verdicts.append(Verdict(approved_by, "approved_by_standing", "warn"))
            elif isinstance(approved_by, str) and approved_by.startswith("person:"):
                verdicts += deciders.get(approved_by.removeprefix("person:"), [])
            elif c_outcome == "declined":  # who declined it, at the address it was asked
                declined_at = ((settled.get("error") or {}).get("details") or {}).get("address")
                verdicts += deciders.get(str(declined_at or step_id), [])
            sandbox = sandbox_use(settled.get("sandbox"))
            if sandbox is not None and sandbox.trust is not None:
                verdicts.append(Verdict("sandbox", sandbox.trust, "warn"))
            child = _called_child(store, settled)  # the child run a skill call drove
            c_started = _time(settled.get("started_at"), run_started)
            c_ended = max(_time(settled.get("ended_at"), c_started), c_started)
            call_refs.add(
                writer.call(
                    Subject(name, pkg, record.method, step_id, call.tool),
                    outcome=c_outcome,
                    seal_reason=c_reason,
                    started_at=c_started,
                    ended_at=c_ended,
                    inputs_digest=call.args_digest or None,
                    outputs_digest=digest(settled.get("result"))
                    if c_outcome == "completed"
                    else None,
                    verdicts=verdicts,
                    sandbox=None if sandbox is None else sandbox.receipt_json(),
                    children=_child_run_refs(child),
                )
            )
            child_spend = _called_spend(child)
            if child_spend is not None:
                called = (called or 0) + child_spend
        s_spend = None if step is None else _step_spend(store, step)
        if called is not None:
            s_spend = (s_spend or 0) + called
        if s_spend is not None:
            spent = (spent or 0) + s_spend
        if step is not None:  # a skill step's child runs: their root receipts, committed here
            call_refs.extend(
                Ref(
                    c["receipt_id"],
                    c["receipt_id"],
                    "run",
                    str(c["outcome"]),
                    c["size"],
                    c["height"],
                )
                for c in step.get("child_runs") or []
            )
        step_refs.add(
            writer.step(
                step_subject,
                outcome=s_outcome,
                seal_reason=s_reason,
                started_at=s_started,
                ended_at=s_ended,
                children=call_refs.refs(),
                verdicts=deciders.get(step_id, []),
                spend_micro_usd=s_spend,
                context_digests=None if step is None else step.get("context_digests") or None,
            )
        )
    if spent is None and (data.get("authority") or {}).get("max_spend_micro_usd") is not None:
        spent = 0  # under a limit the total is stated, even when nothing was priced
    head = _audit_head(s)
    root = writer.run(
        run_subject,
        outcome=outcome,
        seal_reason=seal_reason,
        started_at=run_started,
        inputs_digest=data.get("inputs_digest"),
        outputs_digest=digest(result) if outcome == "completed" else None,
        authority_digest=digest(authority_record(data)),
        policy_digest=data.get("policy_digest"),
        children=step_refs.refs(),
        audit_head=head,
        spend_micro_usd=spent,
        reused_from=(data.get("reused_from") or {}).get("receipt_id"),
        package=bound_package(s, record.run_id, data),
        identity=data.get("identity") or None,
    )
    lost = int(data.get("audit_lost") or 0) + s.audit.lost(record.run_id)
    envelope = RunEnvelope(
        status="sealed",
        outcome=outcome,  # type: ignore[arg-type]
        seal_reason=seal_reason,
        run_id=record.run_id,
        receipt_id=root.receipt_id,
        skill=record.skill,
        method=record.method,
        result=result,
        refusal=refusal,
        trace=window.entries(),
        trace_omitted=window.omitted,
        audit_lost=lost,
        spend_micro_usd=spent,
        notes=authority_notes(data.get("authority") or {}) + audit_lost_note(lost) + done_notes,
    )
    built = envelope.to_json()
    doc, redacted = scrub_value(built)  # without a taint set, as every seal scrubbed it
    kill_point("run.receipts_written")
    # the log's head just after run_sealed: the store's anchor and what witnesses keep (None:
    # the log could not be read for it; the receipt anchors the log, the store's anchor
    # waits for the next seal)
    sealed, after = s.audit.emit_head(
        "run_sealed",
        run_id=record.run_id,
        step_index=None,
        outcome=outcome,
        seal_reason=seal_reason,
        receipt_id=root.receipt_id,
        code=None if refusal is None else refusal.code,
        audit_head=head,
        **({} if spent is None else {"spend_micro_usd": spent}),
    )
    if sealed.get("audit_persisted") is False:
        raise StoreError(
            "the audit log could not be written (its disk may be full)", code="audit_write_failed"
        )
    witnessed = seal_to_witnesses(
        s.environ, s.signer, s.workspace.root, record.run_id, root.receipt_id, after
    )
    with store.transaction():
        store.update_run(
            record.run_id,
            status="sealed",
            outcome=outcome,
            receipt_id=root.receipt_id,
            data={
                # the trace is the call rows' (built's is the window's entries, dumped)
                "envelope": compact_trace(doc, window, dumped=built["trace"]),
                "audit_lost": lost,
                "receipt_tree": {"size": root.size, "height": root.height},
                "spend_total": spent,
                **({} if witnessed is None else {"witnesses": witnessed}),
            },
        )
        store.append_event(
            record.run_id, "sealed", {"outcome": outcome, "seal_reason": seal_reason}
        )
        if after is not None:
            store.record_audit_anchor(
                {**after, "run_id": record.run_id, "receipt_id": root.receipt_id}
            )
        store.release_lease(record.run_id, s.holder)  # the lease goes back with the seal
    s._release_sealed(record.run_id)  # committed: the driver's own release has nothing to do
    s.audit.take_lost(record.run_id)
    if not redacted and doc == built:  # nothing scrubbed: the envelope built is the one kept
        return envelope
    return RunEnvelope.model_validate(doc)


def seal_groups(
    store: RunStore, run_id: str
) -> Iterator[tuple[str, dict[str, Any] | None, Iterator[CallRecord]]]:
    """The run's steps as its seal commits them, each ``(step_id, settlement or None, its
    calls in claim order)``: the settled steps in the order they settled, then the steps that
    have calls but never settled, in the order of their first claim. Calls of no step are the
    step ``""``'s. Everything is read a page at a time (the calls of a group are read while
    the group is sealed)."""
    for step_id, step in store.iter_step_records(run_id):
        yield step_id, step, _group_calls(store, run_id, step_id)
    seen: set[str] = set()
    for found in store.unsettled_call_steps(run_id):
        key = found or ""
        if key not in seen:
            seen.add(key)
            yield key, None, _group_calls(store, run_id, key)


def _group_calls(store: RunStore, run_id: str, step_id: str) -> Iterator[CallRecord]:
    if step_id:
        return store.iter_step_calls(run_id, step_id)
    return heapq.merge(
        store.iter_step_calls(run_id, None), store.iter_step_calls(run_id, ""), key=_seq
    )


def _seq(call: CallRecord) -> int:
    return call.seq


def decided_by(requests: list[RequestRecord]) -> dict[str, list[Verdict]]:
    """Who decided each request that names its author, as a receipt verdict by address:
    ``{rule_id: "decision:ADDRESS", code: "decided_by:WHO", enforcement: "warn"}``."""
    out: dict[str, list[Verdict]] = {}
    for r in requests:
        who = (r.decision or {}).get("decided_by")
        if isinstance(who, str):
            out[r.address] = [Verdict(f"decision:{r.address}", f"decided_by:{who}", "warn")]
    return out


def _audit_head(s: RunHost) -> dict[str, Any]:
    """The head a run receipt commits (``lines``, ``last_digest``)."""
    try:
        # the store's newest anchor only starts a count this process has not made yet; the
        # one the run's start check read is an earlier head of the log as good as a newer one
        known = None
        if not s.audit.counting:
            known = s.audit.known_head or s.store.audit_anchor()
        head = s.audit.head(known=known)
        return {"lines": head["lines"], "last_digest": head["last_digest"]}
    except OSError as exc:
        raise StoreError(
            f"the audit log could not be read ({exc.strerror or exc})", code="audit_unreadable"
        ) from exc


def _enf(verdict: dict[str, Any]) -> str:
    return "block" if verdict.get("effect") == "refused" else "warn"


def _called_child(store: Any, settled: dict[str, Any]) -> Any:
    """The child run a skill call (calls.skills) drove, from its recorded result or error."""
    result = settled.get("result") if isinstance(settled.get("result"), dict) else None
    details = (settled.get("error") or {}).get("details") or {}
    child_id = (result or {}).get("child_run_id") or details.get("child_run_id")
    return store.get_run(child_id) if isinstance(child_id, str) else None


def _called_spend(child: Any) -> int | None:
    """What the tree of a skill call's child (:func:`_called_child`) spent (``None``: not a
    skill call, or nothing)."""
    spent = None if child is None else child.data.get("spend_total")
    return spent if isinstance(spent, int) else None


def _child_run_refs(child: Any) -> list[Any]:
    """The run receipt of the child a skill call drove (calls.skills, :func:`_called_child`),
    committed by its call."""
    if child is None or child.receipt_id is None:
        return []
    tree = child.data.get("receipt_tree") or {}
    size, height = int(tree.get("size") or 1), int(tree.get("height") or 0)
    return [Ref(child.receipt_id, child.receipt_id, "run", child.outcome or "", size, height)]


def _step_spend(store: Any, step: dict[str, Any]) -> int | None:
    """What a step spent: its priced call, or its child runs' totals (``None``: nothing priced)."""
    own = step.get("spend_micro_usd")
    total = own if isinstance(own, int) else None
    for child in step.get("child_runs") or []:
        record = store.get_run(child["run_id"])
        spent = None if record is None else record.data.get("spend_total")
        if isinstance(spent, int):
            total = (total or 0) + spent
    return total


def bound_package(session: RunHost, run_id: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The registry or core name a run's receipt binds: its recorded ``origin``, only while
    the package still verifies against its signature (or the shipped bytes) at seal; an
    edited copy binds nothing (the audit log says why)."""
    origin = data.get("origin")
    if not isinstance(origin, Mapping):
        return None
    from proctor.runtime.packages.resolve import verify_origin

    try:
        verify_origin(origin, workspace_root=session.workspace.root, environ=session.environ)
    except ProctorError as exc:
        session.audit.emit(
            "package_unbound", run_id=run_id, step_index=None, name=origin.get("ref"), code=exc.code
        )
        return None
    return {
        "source": origin["source"],
        "name": origin["name"],
        "version": origin["version"],
        "content_digest": origin["content_digest"],
        "manifest_digest": origin["manifest_digest"],
    }

"""Skill steps: child runs, one or a fan-out of them, under the tree's concurrency ceiling.

A ``skill:`` step asks its session to drive a child run (:class:`~.host.ChildCall`); the child
has its own record, steps and receipts, and the step's settlement names the child's root
receipt, which the step's receipt commits (a child never names its parent). With ``for_each``
the step runs one child per element of a list; its output is the children's results in order.

What runs at once is the least of the step's ``concurrency``, the authority's
``max_concurrency`` and the host's ceiling (``PROCTOR_MAX_CONCURRENCY``, default 16). Children
run in threads; a child holding one of those slots runs its own fan-outs one at a time, so
nesting never multiplies the width. Refused before any child starts: more children than
``max_fanout`` (``fanout_exceeded``), deeper than ``max_child_depth`` or, whatever the
authority says, :data:`~proctor.core.budget.MAX_CHILD_DEPTH` (``child_depth_exceeded``), a
``for_each`` that is not a list (``for_each_not_list``).

A child that pauses surfaces its requests at the root, each at ``<step>/<n>#<child address>``
(``draft/0#post``); the answer a resume records there is handed to the child, by the child's
own address and digest, the next time the step runs. A child that does not complete settles
the step with its outcome and its reason (the first such child by position); its paused
siblings are then closed ``superseded``, so every child is sealed and committed once.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import Refusal
from proctor.contracts.skill import SkillStep
from proctor.contracts.values import dataclass, field, replace
from proctor.core.budget import MAX_CHILD_DEPTH, child_depth_limit
from proctor.errors import ProctorError
from proctor.parser.refs import resolve
from proctor.runtime.engine.host import (
    ChildCall,
    RunInterrupted,
    StepDone,
    StepPause,
    StepRunner,
    run_refs,
    step_failed,
)
from proctor.runtime.limits import max_concurrency_from_env

if TYPE_CHECKING:
    from proctor.contracts.envelope import RunEnvelope
    from proctor.runtime.records.runs import RequestRecord

__all__ = [
    "GAUGE",
    "FanOutGauge",
    "child_run_id",
    "depth_allowance",
    "skill_step",
    "surface",
    "width",
]


@dataclass
class FanOutGauge:
    """How many child runs of this process are executing now, and the most there ever were.

    Instrumentation a test or a benchmark reads (``peak``); it never limits anything.
    """

    running: int = 0
    peak: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self) -> None:
        """One more child executing."""
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        """One child done (sealed or paused)."""
        with self._lock:
            self.running -= 1

    def reset(self) -> None:
        """Forget the peak (between measurements)."""
        with self._lock:
            self.peak = self.running


GAUGE = FanOutGauge()


def child_run_id(parent_run_id: str, step_id: str, position: int | str) -> str:
    """The id of a step's child at ``position`` (or a turn call's, by its call id): derived,
    so a crashed driver finds it again."""
    text = f"proctor.child.v1\x00{parent_run_id}\x00{step_id}\x00{position}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def width(run: StepRunner, step: SkillStep) -> int:
    """How many of the step's children may run at once (see the module's docstring)."""
    if run.serial:
        return 1
    limits = [max_concurrency_from_env(run.s.environ)]
    if step.concurrency is not None:
        limits.append(step.concurrency)
    if run.authority.max_concurrency is not None:
        limits.append(run.authority.max_concurrency)
    return max(1, min(limits))


def _blocked(step: SkillStep, code: str, message: str) -> StepDone:
    return StepDone(
        "blocked",
        refusal=Refusal(code=code, message=message, step=step.id),
        seal_reason="budget_exceeded",
        run_outcome="blocked",
        run_seal_reason="budget_exceeded",
    )


def _each(
    step: SkillStep, inputs: dict[str, Any], outputs: dict[str, Any], refs: dict[str, Any]
) -> list[dict[str, Any]]:
    """The inputs of each child, in order.

    Raises:
        ProctorError: ``unresolved_reference``; ``for_each_not_list``.
    """
    if step.for_each is None:
        value = resolve(step.inputs, inputs, outputs, run=refs)
        return [value if isinstance(value, dict) else {}]
    items = resolve(step.for_each, inputs, outputs, run=refs)
    if not isinstance(items, list):
        raise ProctorError(
            f"for_each of step '{step.id}' ({step.for_each}) is not a list",
            code="for_each_not_list",
        )
    out = []
    for position, item in enumerate(items):
        value = resolve(step.inputs, inputs, outputs, (item, position), run=refs)
        out.append(value if isinstance(value, dict) else {})
    return out


def _forwarded(run: StepRunner, step: SkillStep) -> dict[int, dict[str, dict[str, Any]]]:
    """Answers recorded at the root for this step's children, by position and child address.

    The root's request is a copy of the child's with the root's address; the decision goes to
    the child with the child's own address and request digest.
    """
    out: dict[int, dict[str, dict[str, Any]]] = {}
    prefix = f"{step.id}/"
    for request in run.s.store.requests(run.run_id):
        if request.state != "decided" or request.decision is None:
            continue
        if not request.address.startswith(prefix) or "#" not in request.address:
            continue
        head, _, child_address = request.address.partition("#")
        position = head.removeprefix(prefix)
        if not position.isdigit():
            continue
        child_digest = request.body.get("child_request_digest")
        decision = {**request.decision, "request_digest": child_digest}
        out.setdefault(int(position), {})[child_address] = decision
    return out


def skill_step(
    run: StepRunner, step: SkillStep, inputs: dict[str, Any], outputs: dict[str, Any]
) -> StepDone | StepPause:
    """Drive the step's child runs (see the module's docstring) and settle or pause the step."""
    try:
        each = _each(step, inputs, outputs, run_refs(run))
    except ProctorError as exc:
        return step_failed(step.id, exc)
    authority = run.step_authority(step)  # a child run holds what its step holds
    if (
        step.for_each is not None
        and authority.max_fanout is not None
        and len(each) > authority.max_fanout
    ):
        return _blocked(
            step,
            "fanout_exceeded",
            f"step '{step.id}' would start {len(each)} child runs; this run's authority allows"
            f" at most {authority.max_fanout} (max_fanout); no child was started",
        )
    depth = run.depth + 1
    if depth > child_depth_limit(authority.max_child_depth):
        return _blocked(
            step,
            "child_depth_exceeded",
            f"step '{step.id}' would start a child run {depth} level(s) below the root;"
            f" {depth_allowance(authority.max_child_depth)}; no child was started",
        )
    blocked = _receipts_refused(run, step, len(each))
    if blocked is not None:
        return blocked
    receipts = run.tree_receipts()
    recorded = run.record.data.get("authority") or {}
    granted = {**recorded, **authority.to_json()}
    forwarded = _forwarded(run, step)
    lanes = width(run, step)
    index = next((i for i, s in enumerate(run.method.steps) if s.id == step.id), None)
    calls = [
        ChildCall(
            run_id=child_run_id(run.run_id, step.id, position),
            ref=step.skill,
            base=run.skill.folder,
            inputs=child_inputs,
            authority=granted,
            depth=depth,
            stop=run.stop,
            decisions=forwarded.get(position, {}),
            serial=run.serial or (lanes > 1 and len(each) > 1),
            ledger=run.spend_ledger(),
            receipts=receipts,
            parent_run_id=run.run_id,
            parent_step=step.id,
            parent_step_index=index,
            reuse_max_age=None if step.reuse is None else step.reuse.max_age_seconds,
        )
        for position, child_inputs in enumerate(each)
    ]
    try:
        if lanes > 1 and len(calls) > 1:
            _prepare_state(run)
    except ProctorError as exc:
        return step_failed(step.id, exc)
    try:
        envelopes = _drive_all(run, calls, lanes)
    except RunInterrupted:
        raise
    except ProctorError as exc:  # a child that could not start (its package is unreadable)
        done = step_failed(step.id, exc)
        done.child_runs = _committed(run, calls)
        return done
    return _settle(run, step, calls, envelopes)


def depth_allowance(stated: int | None) -> str:
    """What holds a run's children to their depth, as a refusal says it."""
    if stated is not None and stated <= MAX_CHILD_DEPTH:
        return f"this run's authority allows {stated} (max_child_depth)"
    return (
        f"proctor starts children at most {MAX_CHILD_DEPTH} levels below the root (a skill"
        " that calls itself, or a deeper receipt tree than a verifier accepts)"
    )


def _receipts_refused(run: StepRunner, step: SkillStep, count: int) -> StepDone | None:
    """Refuse, before any child starts, a fan-out whose new children cannot each reserve their
    receipts on the tree's budget (``receipt_budget_exceeded``)."""
    from proctor.core.budget import RUN_RECEIPTS

    budget = run.tree_receipts()
    new = count
    if new * RUN_RECEIPTS > budget.remaining:  # children started before a crash need none
        new = sum(
            1
            for position in range(count)
            if run.s.store.get_run(child_run_id(run.run_id, step.id, position)) is None
        )
    if new * RUN_RECEIPTS > budget.remaining:
        return _blocked(
            step,
            "receipt_budget_exceeded",
            f"step '{step.id}' would start {new} child runs; each needs {RUN_RECEIPTS} receipts"
            f" and this run's tree has {budget.remaining} of its {budget.limit} left"
            " (max_receipts); no child was started",
        )
    return None


STATE_FOLDERS = ("locks", "trash", "journal", "artifacts")
"""proctor's own folders in ``.proctor/`` that a call may create as it runs."""


def _prepare_state(run: StepRunner) -> None:
    """Create proctor's own state folders before children run at once: a command's sweep of
    authority files it created must never see (and remove) a folder a sibling's call made.

    Raises:
        RefusedCall: ``state_dir_unsafe`` (``.proctor`` is a symlink or not a folder).
    """
    for name in STATE_FOLDERS:
        run.s.workspace.private_dir(name)


def _drive_one(run: StepRunner, call: ChildCall) -> RunEnvelope:
    if run.serial:  # inside a slot its parent holds: not one more executing at once
        return run.s.drive_child(call)
    GAUGE.enter()
    try:
        return run.s.drive_child(call)
    finally:
        GAUGE.leave()


def _drive_all(run: StepRunner, calls: list[ChildCall], lanes: int) -> list[RunEnvelope]:
    """Every child driven, ``lanes`` at a time; the first error (a stop) raised after all end."""
    if lanes <= 1 or len(calls) <= 1:
        return [_drive_one(run, call) for call in calls]
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="proctor-child") as pool:
        # each child in a copy of the root's context: a cancelled MCP call's stop scope
        # (tools.process) reaches the commands its children start
        futures = [
            pool.submit(contextvars.copy_context().run, _drive_one, run, call) for call in calls
        ]
        results: list[RunEnvelope] = []
        error: BaseException | None = None
        for future in futures:
            try:
                results.append(future.result())
            except BaseException as exc:
                error = error or exc
    if error is not None:
        raise error
    return results


def _settle(
    run: StepRunner, step: SkillStep, calls: list[ChildCall], envelopes: list[RunEnvelope]
) -> StepDone | StepPause:
    failed = next(
        (
            (n, e)
            for n, e in enumerate(envelopes)
            if e.status == "sealed" and e.outcome != "completed"
        ),
        None,
    )
    paused = [n for n, e in enumerate(envelopes) if e.status != "sealed"]
    used = _root_addresses(run, step)
    if failed is not None:
        for n in paused:  # every child sealed, so each is committed by this step once
            envelopes[n] = run.s.drive_child(replace(calls[n], close="superseded", decisions={}))
        position, envelope = failed
        child = envelope.refusal
        reason = child.message if child is not None else f"it sealed {envelope.outcome}"
        outcome = envelope.outcome or "failed"
        refusal = Refusal(
            code=child.code if child is not None else "child_failed",
            message=f"child run {position} of step '{step.id}' ({step.skill}) sealed"
            f" {outcome}: {reason}",
            step=step.id,
        )
        return StepDone(
            outcome if outcome in ("blocked", "declined") else "failed",
            refusal=refusal,
            seal_reason="child_failed",
            run_outcome=outcome if outcome in ("blocked", "declined") else "failed",
            run_seal_reason="child_failed",
            used=used,
            child_runs=_committed(run, calls),
        )
    if paused:
        requests: list[RequestRecord] = []
        for n in paused:
            requests += surface(run, f"{step.id}/{n}", calls[n].run_id)
        return StepPause(requests)
    results = [e.result for e in envelopes]
    return StepDone(
        "completed",
        output=results if step.for_each is not None else results[0],
        used=used,
        child_runs=_committed(run, calls),
    )


def surface(run: StepRunner, at: str, child_id: str) -> list[Any]:
    """The child's open requests, recorded at the root's addresses ``<at>#<child address>``
    (``at``: ``<step>/<n>`` for a skill step's child, ``<step>/turn/<call_id>`` for a turn's
    skill call)."""
    out = []
    for request in run.s.store.requests(child_id):
        if request.state != "open":
            continue
        address = f"{at}#{request.address}"
        body = {
            **request.body,
            "address": address,
            "child_run": child_id,
            "child_request_digest": request.request_digest,
        }
        out.append(run.open_request(address, body))
    return out


def _root_addresses(run: StepRunner, step: SkillStep) -> list[str]:
    """The root's copies of this step's children's requests: used once the step settles."""
    prefix = f"{step.id}/"
    return [
        r.address
        for r in run.s.store.requests(run.run_id)
        if r.address.startswith(prefix) and "#" in r.address and r.state == "decided"
    ]


def _committed(run: StepRunner, calls: list[ChildCall]) -> list[dict[str, Any]]:
    """What the step's receipt commits of each child: its root receipt and that tree's size."""
    out = []
    for call in calls:
        record = run.s.store.get_run(call.run_id)
        if record is None or record.receipt_id is None:
            continue
        tree = record.data.get("receipt_tree") or {}
        out.append(
            {
                "run_id": call.run_id,
                "receipt_id": record.receipt_id,
                "outcome": record.outcome,
                "size": int(tree.get("size") or 1),
                "height": int(tree.get("height") or 0),
            }
        )
    return out

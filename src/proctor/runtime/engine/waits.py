"""Wait steps (``wait: {until | seconds}``): a timed request a later resume or a worker settles.

The seam: the step loop (:mod:`.drive`) runs the step; this module decides whether its time
has come. A wait is a request of kind ``wait`` at the step's address, ``{kind: wait, id,
until}`` with ``until`` in milliseconds since the epoch (as the runx reference states it),
recorded the first time the step is reached; a ``seconds`` wait counts from then, so every later
driver waits until the same moment. It takes no answer (an entry naming it is refused,
``wait_takes_no_answer``):

- a drive (a resume, ``{}`` included) at or after ``until`` settles it: the settle time is
  recorded as the request's decision (author ``clock``) before the step settles, so a driver
  that crashes between the two settles it at the same time, and the step's output is
  ``{until, settled_at}`` (milliseconds);
- a drive before ``until`` settles nothing and pauses on the same request (same digest);
- :mod:`.upkeep` keeps a timer for each wait (written when the run pauses) and a worker's settle
  loop, the console's process or the next ``proctor`` command resumes the run with ``{}`` once
  it is due.

A paused run waiting only on waits lists each with its ``until``, so a host can wake it at the
earliest one. Refusal (the step fails): ``wait_until_invalid`` when a referenced ``until`` is
no time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from proctor.contracts.skill import WaitStep
from proctor.errors import ProctorError
from proctor.parser.refs import resolve
from proctor.parser.waits import literal_until
from proctor.runtime.engine.host import StepDone, StepPause, StepRunner, step_failed

__all__ = ["WAITED_BY", "WAIT_KIND", "wait_step"]

WAIT_KIND = "wait"
WAITED_BY = "clock"
"""Who a wait's settlement is recorded as decided by."""


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _until(run: StepRunner, step: WaitStep, inputs: dict[str, Any], outputs: dict[str, Any]) -> int:
    """The moment the wait ends, in milliseconds since the epoch.

    Raises:
        ProctorError: ``wait_until_invalid``; ``unresolved_reference``.
    """
    spec = step.wait
    if spec.seconds is not None:
        return _ms(run.s.clock()) + spec.seconds * 1000
    value = resolve(spec.until, inputs, outputs)
    try:
        return literal_until(value)
    except ValueError as exc:
        raise ProctorError(f"step '{step.id}': {exc}", code="wait_until_invalid") from None


def wait_step(
    run: StepRunner, step: WaitStep, inputs: dict[str, Any], outputs: dict[str, Any]
) -> StepDone | StepPause:
    """Settle the wait if its time has come, else pause on it (see the module)."""
    store = run.s.store
    recorded = next((r for r in store.requests(run.run_id) if r.address == step.id), None)
    if recorded is not None and recorded.kind == WAIT_KIND:
        until = int(recorded.body["until"])
    else:
        try:
            until = _until(run, step, inputs, outputs)
        except ProctorError as exc:
            return step_failed(step.id, exc)
    body = {"kind": WAIT_KIND, "id": step.id, "until": until}
    request = run.open_request(step.id, body)
    decided = request.decision if isinstance(request.decision, dict) else None
    settled_at = decided.get("settled_at") if decided is not None else None
    if not isinstance(settled_at, int):
        now = _ms(run.s.clock())
        if now < until:
            return StepPause([request])
        settled_at = now
        decision = {"request_digest": request.request_digest, "settled_at": now,
                    "decided_by": WAITED_BY}  # fmt: skip
        store.record_decisions(run.run_id, {step.id: decision})
        store.append_event(run.run_id, "wait_settled", {"step": step.id, "until": until,
                                                         "settled_at": now})  # fmt: skip
    return StepDone("completed", output={"until": until, "settled_at": settled_at}, used=[step.id])

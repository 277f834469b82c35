"""A run tree's calls as a comparable trace, and the first place two traces part.

A trace entry is what a call did, by digest: its run (``0`` for the root, then each child run
in the order it started), step, tool, the digest of its arguments, how it ended (``status`` and
``code``) and the digest of its result. A run that retained its arguments
(:mod:`proctor.runtime.records.retention`) adds ``kept_digest``, the digest of the scrubbed
arguments it kept: where a secret was scrubbed from them, two calls are the same call when
their scrubbed arguments are (a replay's fixture credential is not the recorded secret). Two
runs of the same package on the same inputs, answered the same way, make the same trace;
:func:`first_divergence` names the first entry where a replay did something else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.errors import ProctorError
from proctor.receipts.canonical import digest
from proctor.runtime.records.retention import RETAINED_ARGS

if TYPE_CHECKING:
    from proctor.runtime.records.runs import CallRecord, RunStore

__all__ = ["COMPARED", "call_trace", "first_divergence", "tree_runs"]

COMPARED = ("step", "tool", "args_digest", "status", "code", "outputs_digest")
"""The fields of a trace entry two runs must agree on, in the order a divergence names them."""


def tree_runs(store: RunStore, run_id: str) -> list[str]:
    """``run_id`` and every run it started, depth first: a ``skill:`` step's children in the
    order of its items (children of a fan-out may start in any order), then any other child
    (a turn's skill calls, made one at a time) in the order it started."""
    out: list[str] = []
    pending = [run_id]
    while pending:
        current = pending.pop()
        out.append(current)
        children: list[str] = []
        for step in store.step_records(current).values():
            for child in step.get("child_runs") or []:
                if isinstance(child, Mapping) and str(child.get("run_id")) not in children:
                    children.append(str(child.get("run_id")))
        for event in store.events(current):
            started = str((event.get("body") or {}).get("run_id"))
            if event.get("kind") == "child_started" and started not in children:
                children.append(started)
        pending.extend(reversed(children))
    return out


def entry(index: int, call: CallRecord) -> dict[str, Any]:
    """One call as a trace entry (``index``: its run's place in the tree)."""
    settled: Mapping[str, Any] = call.result if isinstance(call.result, Mapping) else {}
    status = str(settled.get("status") or call.outcome or call.state)
    error = settled.get("error")
    kept = None
    if RETAINED_ARGS in settled:
        try:
            kept = digest(settled[RETAINED_ARGS])
        except ProctorError:
            kept = None
    outputs = None
    if status == "completed" and "result" in settled:
        try:
            outputs = digest(settled.get("result"))
        except ProctorError:
            outputs = None
    return {
        "run": index,
        "call_id": call.call_id,
        "step": call.step_id,
        "tool": call.tool,
        "args_digest": call.args_digest,
        "kept_digest": kept,
        "status": status,
        "code": error.get("code") if isinstance(error, Mapping) else None,
        "outputs_digest": outputs,
    }


def call_trace(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """The trace of ``run_id``'s tree: its calls, then each child run's, in order."""
    return [
        entry(index, call)
        for index, rid in enumerate(tree_runs(store, run_id))
        for call in store.calls(rid)
        if call.state == "settled"
    ]


def first_divergence(
    recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """Where ``replayed`` first did something ``recorded`` did not: ``{index, fields,
    recorded, replayed}`` (``fields`` the differing ones of :data:`COMPARED`, a side ``None``
    when that trace has no call there), or ``None`` when the two agree call for call."""
    for index in range(max(len(recorded), len(replayed))):
        was = recorded[index] if index < len(recorded) else None
        now = replayed[index] if index < len(replayed) else None
        if was is None or now is None:
            return {"index": index, "fields": ["call"], "recorded": was, "replayed": now}
        fields = [name for name in ("run", *COMPARED) if was.get(name) != now.get(name)]
        if "args_digest" in fields and _same_scrubbed(was, now):
            fields.remove("args_digest")
        if fields:
            return {"index": index, "fields": fields, "recorded": was, "replayed": now}
    return None


def _same_scrubbed(was: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """Whether two calls whose arguments held a secret (kept scrubbed, so the kept form is not
    what the argument digest covers) sent the same arguments once scrubbed: the recorded run's
    secret and the replay's fixture credential differ by design."""
    scrubbed = was.get("kept_digest") not in (None, was.get("args_digest"))
    return scrubbed and was.get("kept_digest") == now.get("kept_digest")

"""A run paused and resumed many times costs the same at its 60th resume as at its 5th.

Each resume used to read every step record of the run (the drive), every call (the paused
envelope's trace window), every request (admitting the document, counting approvers) and every
event (when the decision's request was asked). Now the drive reads the last settled step and
an earlier step's output when a step names it; the pause carries its trace window on from the
last pause's mark; a resume reads the requests its document names and the last pause's event.
Counted, not timed: SQLite's virtual-machine steps and statements of one resume, on a real
store, past the trace's limit (below it the envelope shows every call, so it grows by design).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proctor.runtime.engine.session import Session
from proctor.runtime.engine.trace_window import MARK, TRACE_LIMIT, mark_of, window_of
from tests.runtime.driver_support import close_sessions, make_skill, make_workspace, session

__all__ = ["close_sessions"]

PREFIX = TRACE_LIMIT + 50  # echo steps first: the trace is past its limit before any pause
ASKS = 64


def _skill() -> str:
    lines = ["minimum_proctor: 0.1.0", "methods:", "  main:", "    steps:"]
    for i in range(PREFIX):
        lines += [f"      - id: s{i}", "        tool: echo", f"        inputs: {{text: t{i}}}"]
    for i in range(ASKS):
        lines += [f"      - id: a{i}", "        ask: {reason: go on?}"]
        lines += [f"      - id: e{i}", "        tool: echo", f"        inputs: {{text: e{i}}}"]
    # named outputs of early steps, read after every resume (each drive reads them by key)
    lines += [
        "      - id: last",
        "        tool: echo",
        "        inputs: {text: $steps.s3.text}",
        "    result_from: [last, s0]",
    ]
    return "\n".join(lines) + "\n"


def _approve(envelope: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(envelope.answers_template))
    for entry in doc.get("approvals", {}).values():
        entry.update({"approved": True, "reason": "ok"})
    return doc


class _Meter:
    """Virtual-machine steps and statements on one SQLite connection."""

    def __init__(self, s: Session) -> None:
        self.steps = self.statements = 0
        conn = s.store._conn  # type: ignore[attr-defined]
        conn.set_progress_handler(self._tick, 1)
        conn.set_trace_callback(self._statement)

    def _tick(self) -> int:
        self.steps += 1
        return 0

    def _statement(self, _sql: str) -> None:
        self.statements += 1

    def now(self) -> tuple[int, int]:
        return self.steps, self.statements


def test_a_resume_costs_the_same_at_the_60th_pause_as_at_the_5th(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "asks", _skill())
    s = session(root)
    env = s.run("asks", cwd=root)
    assert env.status == "needs_approval" and env.trace_omitted is not None
    meter = _Meter(s)
    per_resume = []
    while env.status != "sealed":
        before = meter.now()
        env = s.resume(env.run_id or "", _approve(env))
        after = meter.now()
        per_resume.append((after[0] - before[0], after[1] - before[1]))
    assert len(per_resume) == ASKS
    assert env.outcome == "completed"
    assert env.result == {"last": {"text": "t3"}, "s0": {"text": "t0"}}
    # the last resume seals the run; every other one is one pause's work
    assert per_resume[60] == per_resume[5], per_resume


def _full(s: Session, run_id: str) -> Any:
    return window_of(s.store, run_id)


def _same(a: Any, b: Any) -> None:
    assert [e.model_dump() for e in a.entries()] == [e.model_dump() for e in b.entries()]
    assert (a.omitted, a.calls, a.count, a.settled) == (b.omitted, b.calls, b.count, b.settled)
    assert (a.start, a.through) == (b.start, b.through)


def test_a_carried_window_is_the_window_of_every_call(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "asks", _skill())
    s = session(root)
    env = s.run("asks", cwd=root)
    run_id = env.run_id or ""
    for _ in range(3):
        record = s.store.get_run(run_id)
        assert record is not None
        mark = record.data[MARK]
        assert mark is not None and mark["head"] is not None
        _same(window_of(s.store, run_id, mark), _full(s, run_id))
        # the envelope a host reads is the one a whole read makes
        shown = s.envelope(run_id)
        assert shown.trace == _full(s, run_id).entries() and shown.trace_omitted is not None
        env = s.resume(run_id, _approve(env))
    # calls claimed since a mark are taken; a mark that does not fit the calls is not used
    stale = dict(mark, calls=mark["calls"] + 5)
    _same(window_of(s.store, run_id, stale), _full(s, run_id))
    broken = {"seq": "x"}
    _same(window_of(s.store, run_id, broken), _full(s, run_id))
    assert mark_of(_full(s, run_id)) == s.store.get_run(run_id).data[MARK]  # type: ignore[union-attr]


def test_a_small_run_paused_often_keeps_its_whole_trace(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(
        root,
        "few",
        "minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n"
        + "".join(
            f"      - id: e{i}\n        tool: echo\n        inputs: {{text: e{i}}}\n"
            f"      - id: a{i}\n        ask: {{reason: go on?}}\n"
            for i in range(4)
        )
        + "      - id: last\n        tool: echo\n        inputs: {text: $steps.e1.text}\n",
    )
    s = session(root)
    env = s.run("few", cwd=root)
    seen = 0
    while env.status != "sealed":
        seen += 1
        assert [e.call_id for e in env.trace] == [f"e{i}/1" for i in range(seen)]
        assert env.trace_omitted is None
        env = s.resume(env.run_id or "", _approve(env))
    assert env.outcome == "completed" and env.result == {"text": "e1"}

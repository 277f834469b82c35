"""A step's calls are numbered on from the ones the store holds for it, across drivers.

The step's driver reads the step's calls once (to reconcile a crashed claim or reuse a settled
call) and the governor numbers the step's next call on from that read, not counting the calls
again: a call id is never given twice, or a call would overwrite or collide with an earlier.
"""

from __future__ import annotations

from pathlib import Path

from proctor.runtime.records.runs import CallRecord
from tests.runtime.driver_support import (
    approve,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

FLOW = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: go
        ask: {reason: go on?}
      - id: say
        tool: echo
        inputs: {text: hello}
"""


def test_a_resumed_step_numbers_its_call_after_the_ones_stored_for_it(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "flow", FLOW)
    s = session(root)
    env = s.run("flow", cwd=root)
    assert env.status == "needs_approval"
    # what an earlier driver left of the next step: a call it settled as unknown, so the step
    # sends its call again, under the next number
    s.store.record_call(
        CallRecord(
            run_id=env.run_id,
            call_id="say/1",
            step_id="say",
            tool="echo",
            state="settled",
            args_digest="sha256:" + "0" * 64,
            outcome="failed",
            result={"status": "unknown", "result": None},
        )
    )
    assert [c.call_id for c in s.store.calls(env.run_id)] == ["say/1"]  # a read writes it
    again = session(root)
    begun: list[str] = []
    again.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    done = again.resume(env.run_id, approve(env))
    again.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert done.status == "sealed" and done.outcome == "completed"
    calls = {c.call_id: c for c in again.store.calls(env.run_id)}
    assert sorted(calls) == ["say/1", "say/2"]
    assert calls["say/1"].result == {"status": "unknown", "result": None}  # kept as it was
    assert done.result == {"text": "hello"}
    # the step's calls were read once before its call: the number follows that read
    made = next(n for n, q in enumerate(begun) if q.startswith("INSERT INTO calls"))
    assert len([q for q in begun[:made] if "FROM calls" in q]) == 1

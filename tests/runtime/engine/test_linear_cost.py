"""A run's cost stays flat as it grows: a step, and a host's turn call, read only their own calls.

The run store here is a subclass of the real SQLite store that counts the call rows it decodes
(every read of a call goes through ``_call``): the number decoded for one step, or for one
``Session.turn_call``, must not grow with how many calls the run already holds. Counts the
driver needs (``max_calls``, the receipt budget, generated call ids) come from the store's
counters, and must still count the whole run across drivers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.records.runs import CallRecord
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.records.verify_folder import verify_receipt
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

STEPS = 40

TURN = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: turn
        agent:
          instructions: Echo.
          calls: {tools: [echo]}
      - id: after
        tool: echo
        inputs: {text: done}
"""


def _steps_yaml(n: int) -> str:
    steps = "".join(
        f"      - id: s{i}\n        tool: {'echo' if i % 2 == 0 else 'data.digest'}\n"
        + (
            f"        inputs: {{text: step {i}}}\n"
            if i % 2 == 0
            else f"        inputs: {{value: {i}}}\n"
        )
        for i in range(n)
    )
    return f"minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n{steps}"


class CountingStore(SQLiteRunStore):
    """The real SQLite store, counting the call rows it decodes, per settled step."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.decoded = 0
        self.per_step: list[int] = []
        self._mark = 0

    def _call(self, row: tuple[Any, ...]) -> CallRecord:  # type: ignore[override]
        self.decoded += 1
        return SQLiteRunStore._call(row)

    def settle_step(
        self, run_id: str, step_id: str, body: dict[str, Any], *, used: list[str] | None = None
    ) -> None:
        super().settle_step(run_id, step_id, body, used=used)
        self.per_step.append(self.decoded - self._mark)
        self._mark = self.decoded


def _counted(root: Path, **kwargs: Any) -> tuple[Any, CountingStore]:
    s = session(root, **kwargs)
    store = CountingStore(root / ".proctor" / "runs.sqlite")
    s._store = store  # the session's run store, counting
    return s, store


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "long", _steps_yaml(STEPS))
    make_skill(root, "turn", TURN)
    return root


def test_a_step_decodes_no_more_calls_late_in_a_run_than_early(ws: Path) -> None:
    s, store = _counted(ws)
    env = s.run("long", cwd=ws)
    assert env.status == "sealed" and env.outcome == "completed"
    assert len(store.per_step) == STEPS
    assert len(s.store.calls(env.run_id or "")) == STEPS  # one call per step, all recorded
    # Reading every call of the run in each step would decode 2 x the step's index here.
    assert max(store.per_step) <= 1, store.per_step
    assert store.per_step[-1] <= store.per_step[0], store.per_step


def test_a_turn_call_decodes_no_more_calls_late_in_a_turn_than_early(ws: Path) -> None:
    s, store = _counted(ws)
    env = s.run("turn", cwd=ws)
    run_id = env.run_id or ""
    assert env.status == "needs_agent"
    per_call = []
    for i in range(30):
        before = store.decoded
        outcome = s.turn_call(run_id, "turn", "echo", {"text": f"call {i}"}, f"c{i}")
        assert outcome.ok
        per_call.append(store.decoded - before)
    assert max(per_call) <= 1, per_call
    # A repeat of a recorded call_id reads that call alone and sends nothing.
    before = store.decoded
    again = s.turn_call(run_id, "turn", "echo", {"text": "call 3"}, "c3")
    assert again.ok and again.result == {"text": "call 3"}
    assert store.decoded - before == 1
    assert len(s.store.calls(run_id)) == 30


def test_max_calls_counts_every_driver_of_the_run_and_not_refused_calls(ws: Path) -> None:
    s = session(ws)
    env = s.run("turn", authority=authority(max_calls=3), cwd=ws)
    run_id = env.run_id or ""
    made = [s.turn_call(run_id, "turn", "echo", {"text": "x"}, f"c{i}") for i in range(2)]
    assert all(o.ok for o in made)
    refused = s.turn_call(run_id, "turn", "fs.read", {"path": "a.txt"}, "not-allowed")
    assert refused.code == "tool_not_allowed"  # refused: does not spend the limit
    # each turn call is a new driver; a new session is another process's view of the store
    third = session(ws).turn_call(run_id, "turn", "echo", {"text": "x"}, "c2")
    assert third.ok
    over = s.turn_call(run_id, "turn", "echo", {"text": "x"}, "c3")
    assert over.code == "call_budget_exceeded"
    counts = s.store.run_counts(run_id)
    assert (counts.calls, counts.admitted) == (5, 3)


def _governor(s: Any, run_id: str) -> Any:
    from proctor.runtime.admission.governor import Governor
    from proctor.runtime.boundary.sanitize import Sanitizer

    policies, guards, _ = s.policy()
    governor = Governor(
        run_id=run_id, workspace=s.workspace, store=s.store, tools=s.tools, policies=policies,
        guards=guards, audit=s.audit, sanitizer=Sanitizer(),
    )  # fmt: skip
    governor.resume_from(s.store.run_counts(run_id).admitted)
    return governor


def test_generated_call_ids_go_on_from_the_steps_recorded_calls(ws: Path) -> None:
    from proctor.runtime.admission.governor import CallSpec
    from proctor.runtime.records.runs import RunRecord

    s = session(ws)
    s.store.create_run(RunRecord(run_id="r", skill="long", method="main"))
    spec = CallSpec("echo", {"text": "x"}, frozenset({"echo"}), step_id="a")
    first = _governor(s, "r")
    assert [first.call(spec).call_id for _ in range(2)] == ["a/1", "a/2"]
    assert first.call(CallSpec("echo", {"text": "x"}, frozenset({"echo"}), step_id="b")).ok
    # A later driver (after a crash, or in another process) numbers on, per step.
    later = _governor(s, "r")
    assert later.calls_made == 3
    assert later.call(spec).call_id == "a/3"
    assert later.call(CallSpec("echo", {}, frozenset(), step_id="b")).call_id == "b/2"
    assert [c.call_id for c in s.store.step_calls("r", "a")] == ["a/1", "a/2", "a/3"]


class CountingReceipts(ReceiptStore):
    """The real receipt store, counting its batches (each: files, one folder sync, index)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.batches: list[int] = []

    def put_many(self, items: Sequence[tuple[str, bytes, str, str]]) -> None:
        self.batches.append(len(items))
        super().put_many(items)


def test_sealing_writes_the_runs_receipts_in_one_synced_batch(ws: Path) -> None:
    s = session(ws)
    receipts = CountingReceipts(ws / ".proctor" / "receipts")
    s._receipts = receipts  # the session's receipt store, counting
    env = s.run("long", cwd=ws)
    assert env.status == "sealed" and env.receipt_id
    # a call and a step receipt per step, and the run's: one batch, not one per step
    assert receipts.batches == [2 * STEPS + 1]
    assert len(list(receipts.index())) == 2 * STEPS + 1
    signer = signer_from_seed(bytes(range(32)))  # the key driver_support's sessions sign with
    result = verify_receipt(env.receipt_id, receipts_dir=receipts.directory,
                            public_key=signer.public_key)  # fmt: skip
    assert result.status == "verified"

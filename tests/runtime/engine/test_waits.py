"""Wait steps: a timed request that takes no answer; a resume at or after its time, or the
settle loop, settles it, and one before reports it again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from proctor.errors import ResumeRefused
from proctor.runtime.engine.request_lines import summary_of
from proctor.runtime.engine.upkeep import settle
from tests.pg import fresh_schema
from tests.runtime.driver_support import (
    Clock,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

WAIT = """minimum_runx: 0.12.0
methods:
  main:
    steps:
      - id: cool
        wait: {until: $input.at}
      - id: after
        tool: echo
        inputs: {text: done}
"""


START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def test_a_wait_holds_until_its_time_then_a_resume_settles_it(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "wait", WAIT)
    clock = Clock(START)
    s = session(tmp_path, clock=clock)
    until = _ms(START + timedelta(hours=1))
    env = s.run(str(tmp_path / "skills" / "wait"), inputs={"at": until})
    assert env.status == "needs_agent"
    (request,) = env.requests
    assert request["kind"] == "wait" and request["until"] == until
    assert summary_of("wait", request) == (
        "waits until 2026-03-01T13:00:00+00:00; a resume then settles it (no answer)"
    )
    assert "cool" not in str(env.answers_template)
    # before until: nothing settles, the same request is reported again
    clock.now = START + timedelta(minutes=59)
    again = s.resume(env.run_id, {})
    assert again.status == "needs_agent"
    assert again.requests == env.requests
    assert "after" not in s.store.step_records(env.run_id)
    # a wait takes no answer
    with pytest.raises(ResumeRefused) as refused:
        s.resume(env.run_id, {"answers": {"cool": {"request_digest": request["request_digest"],
                                                    "value": {}}}})  # fmt: skip
    assert refused.value.code == "wait_takes_no_answer"
    clock.now = START + timedelta(hours=1, seconds=5)
    done = s.resume(env.run_id, {})
    assert done.status == "sealed" and done.outcome == "completed"
    steps = s.store.step_records(env.run_id)
    assert steps["cool"]["output"] == {"until": until, "settled_at": until + 5000}


def test_a_due_wait_is_settled_by_the_settle_loop(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "wait", WAIT.replace("{until: $input.at}", "{seconds: 600}"))
    clock = Clock(START)
    s = session(tmp_path, clock=clock)
    env = s.run(str(tmp_path / "skills" / "wait"))
    assert env.status == "needs_agent"
    (request,) = env.requests
    assert request["until"] == _ms(START) + 600_000
    settle(s, now=START.timestamp() + 599)  # not due yet: nothing moves
    assert s.store.get_run(env.run_id).status == "needs_agent"
    # due by the settle loop's clock, not yet by the run's: it waits, and is looked at again
    settle(s, now=START.timestamp() + 600)
    assert s.store.get_run(env.run_id).status == "needs_agent"
    clock.now = START + timedelta(seconds=601)
    settle(s, now=START.timestamp() + 606)
    record = s.store.get_run(env.run_id)
    assert record is not None and record.status == "sealed"
    assert s.envelope(env.run_id).outcome == "completed"


def test_a_wait_settled_before_a_crash_keeps_its_recorded_time(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "wait", WAIT)
    clock = Clock(START)
    s = session(tmp_path, clock=clock)
    until = _ms(START + timedelta(minutes=5))
    env = s.run(str(tmp_path / "skills" / "wait"), inputs={"at": until})
    (request,) = env.requests
    # a driver recorded the settlement, then died before the step settled
    settled = {"request_digest": request["request_digest"], "settled_at": until + 7,
               "decided_by": "clock"}  # fmt: skip
    s.store.record_decisions(env.run_id, {"cool": settled})
    clock.now = START + timedelta(minutes=30)
    done = s.resume(env.run_id, {})
    assert done.outcome == "completed"
    assert s.store.step_records(env.run_id)["cool"]["output"] == {
        "until": until,
        "settled_at": until + 7,
    }


def test_a_wait_is_settled_by_the_settle_loop_on_postgresql(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "wait", WAIT.replace("{until: $input.at}", "{seconds: 60}"))
    clock = Clock(START)
    with fresh_schema() as url:
        environ = {"PROCTOR_HOME": str(tmp_path / ".home"), "PROCTOR_DATABASE_URL": url}
        s = session(tmp_path, environ=environ, clock=clock)
        env = s.run(str(tmp_path / "skills" / "wait"))
        assert env.status == "needs_agent" and env.requests[0]["kind"] == "wait"
        assert s.resume(env.run_id, {}).status == "needs_agent"  # before its time
        clock.now = START + timedelta(seconds=61)
        settle(s, now=START.timestamp() + 61)
        assert s.envelope(env.run_id).outcome == "completed"
        s.close()


PARENT = """minimum_runx: 0.12.0
methods:
  main:
    steps:
      - id: child
        skill: ../wait
"""


def test_a_child_runs_wait_is_shown_at_the_root_and_settled_by_the_loop(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "wait", WAIT.replace("{until: $input.at}", "{seconds: 60}"))
    make_skill(tmp_path, "parent", PARENT)
    clock = Clock(START)
    s = session(tmp_path, clock=clock)
    env = s.run(str(tmp_path / "skills" / "parent"))
    (request,) = env.requests
    assert (env.status, request["kind"], request["address"]) == (
        "needs_agent",
        "wait",
        "child/0#cool",
    )
    settle(s, now=START.timestamp() + 61)  # the loop's clock is past it, the run's is not
    assert s.envelope(env.run_id).status == "needs_agent"
    clock.now = START + timedelta(seconds=61)
    settle(s, now=START.timestamp() + 70)
    sealed = s.envelope(env.run_id)
    assert (sealed.status, sealed.outcome) == ("sealed", "completed")

"""The host stand-in: answers and approvals by address through Session.resume, worked turns
through Session.turn_call; what no request took fails the test as unused."""

from __future__ import annotations

from pathlib import Path

from tests.testing.support import AGENT, checks, package, run_one, workspace


def _run(tmp_path: Path, text: str, *, keep: bool = False):  # type: ignore[no-untyped-def]
    folder = package(workspace(tmp_path / "ws"), "drafter", AGENT, {"t": text})
    return run_one(folder, "t", keep=keep)


def test_an_answer_and_an_approval_drive_the_run_to_its_seal(tmp_path: Path) -> None:
    result = _run(tmp_path, """
method: draft
host:
  answers: {think: {answer: yes}}
  approvals: {confirm: true}
expect:
  status: sealed
  outcome: completed
  steps: {think: completed, confirm: completed}
  audit: [{event: decision_recorded, address: confirm, approved: true}]
""")  # fmt: skip
    assert result.status == "passed", [f.to_json() for f in result.failures]


def test_unused_answers_and_approvals_fail_the_test(tmp_path: Path) -> None:
    result = _run(tmp_path, """
method: draft
host:
  answers: {think: {answer: yes}, elsewhere: {answer: no}}
  approvals: {confirm: true, never-asked: false}
expect: {status: sealed, outcome: completed}
""")  # fmt: skip
    assert checks(result) == ["unused", "unused"]
    messages = " ".join(f.message for f in result.failures)
    assert "answers.elsewhere" in messages and "approvals.never-asked" in messages


def test_a_close_nobody_needed_is_unused_and_a_needed_one_seals(tmp_path: Path) -> None:
    closed = _run(tmp_path / "a", """
method: draft
host:
  answers: {think: {answer: yes}}
  close: declined
expect: {status: sealed, outcome: declined}
""")  # fmt: skip
    assert closed.status == "passed", [f.to_json() for f in closed.failures]
    unneeded = _run(tmp_path / "b", """
method: draft
host:
  answers: {think: {answer: yes}}
  approvals: {confirm: true}
  close: declined
expect: {status: sealed, outcome: completed}
""")  # fmt: skip
    assert checks(unneeded) == ["unused"]


def test_a_worked_turn_waits_for_its_calls_approval_then_makes_the_call_once(
    tmp_path: Path,
) -> None:
    result = _run(tmp_path, """
method: draft
setup:
  authority: {effects: ask}
host:
  turns:
    think:
      calls:
        - tool: echo
          arguments: {text: first}
          expect: {status: completed, result: {exact: {text: first}}}
        - tool: fs.write
          arguments: {path: kept.txt, content: kept, create: true}
          reason: Keep it.
          expect: {status: completed}
        - tool: fs.write
          arguments: {path: declined.txt, content: no, create: true}
          call_id: third
          expect: {status: refused, code: approval_declined}
      output: {answer: done}
  approvals: {think/turn/2: true, think/turn/third: false, confirm: true}
expect:
  status: sealed
  outcome: completed
  files:
    kept.txt: {content: kept}
    declined.txt: {exists: false}
  audit:
    - {event: decision_recorded, address: think/turn/2, approved: true}
    - {event: decision_recorded, address: think/turn/third, approved: false}
""", keep=True)  # fmt: skip
    assert result.status == "passed", [f.to_json() for f in result.failures]


def test_a_worked_call_that_breaks_its_expect_fails_with_a_pointer(tmp_path: Path) -> None:
    result = _run(tmp_path, """
method: draft
host:
  turns:
    think:
      calls:
        - tool: echo
          arguments: {text: first}
          expect: {result: {subset: {text: second}}}
        - tool: fs.read
          arguments: {path: x}
          expect: {status: completed}
      output: {answer: done}
  approvals: {confirm: true}
expect: {status: sealed, outcome: completed}
""")  # fmt: skip
    assert checks(result) == ["call", "call"]
    assert result.failures[0].pointer == "/host/turns/think/calls/0/result/text"
    assert result.failures[0].expected == "second" and result.failures[0].actual == "first"
    assert result.failures[1].pointer == "/host/turns/think/calls/1/status"
    assert result.failures[1].actual == "refused"


def test_the_runx_call_form_input_and_an_outcome_subset(tmp_path: Path) -> None:
    # as the runx reference writes a worked turn's call: input, expect {subset: {outcome}}
    passed = _run(tmp_path / "a", """
method: draft
host:
  turns:
    think:
      calls:
        - tool: echo
          input: {text: first}
          expect: {subset: {outcome: {status: completed, result: {text: first}}}}
      output: {answer: done}
  approvals: {confirm: true}
expect: {status: sealed, outcome: completed}
""")  # fmt: skip
    assert passed.status == "passed", [f.to_json() for f in passed.failures]
    failed = _run(tmp_path / "b", """
method: draft
host:
  turns:
    think:
      calls:
        - tool: fs.read
          input: {path: x}
          expect: {subset: {outcome: {status: completed}}}
      output: {answer: done}
  approvals: {confirm: true}
expect: {status: sealed, outcome: completed}
""")  # fmt: skip
    assert checks(failed) == ["call"]
    assert failed.failures[0].pointer == "/host/turns/think/calls/0/expect/outcome/status"
    assert failed.failures[0].actual == "refused"


def test_a_turn_failure_fails_its_step(tmp_path: Path) -> None:
    result = _run(tmp_path, """
method: draft
host:
  turns:
    think: {failure: the data is not there}
expect:
  status: sealed
  outcome: failed
  steps: {think: {outcome: failed, code: agent_failed}, confirm: not_run}
""")  # fmt: skip
    assert result.status == "passed", [f.to_json() for f in result.failures]


def test_an_answer_that_misses_the_turns_schema_fails_its_step(tmp_path: Path) -> None:
    result = _run(tmp_path, """
method: draft
host:
  answers: {think: {not_the_answer: 1}}
expect:
  status: sealed
  outcome: failed
  steps: {think: {outcome: failed, code: agent_output_invalid}}
""")  # fmt: skip
    assert result.status == "passed", [f.to_json() for f in result.failures]

"""``providers.processes``: a test answers local process tools matched on tool and exact
arguments; an unmatched call is refused and nothing is started (the command here would leave a
mark in the test's workspace if it ran: the control test shows that it does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.contracts.testfile import ProcessExchange
from proctor.errors import ParseError, RefusedCall, UsageError
from proctor.parser.testfile import parse_test_file
from proctor.testing.processes import ProcessFixtures
from proctor.testing.runner import CaseResult
from tests.testing.support import checks, package, run_one, workspace

RUN_YAML = """
minimum_proctor: 0.1.0
methods:
  mark:
    description: Run a program that leaves a mark.
    inputs:
      type: object
      properties: {name: {type: string}}
      required: [name]
    steps:
      - id: run
        tool: command.execute
        inputs: {argv: [/bin/sh, -c, "touch mark-$0 && echo ran", $input.name]}
"""

RESULT = (
    '{exit_code: 0, stdout: "stood in\\n", stderr: "", stdout_digest: sha256:0,'
    " stderr_digest: sha256:0}"
)


def _test(name: str, *, entry_name: str | None = None, extra: str = "", expect: str) -> str:
    entries = ""
    if entry_name is not None:
        entries = f"""
providers:
  processes:
    - tool: command.execute
      arguments: {{argv: [/bin/sh, -c, "touch mark-$0 && echo ran", {entry_name}]}}
      result: {RESULT}
{extra}"""
    return f"""
method: mark
inputs: {{name: {name}}}
{entries}
expect:
{expect}
"""


def _run(tmp_path: Path, text: str) -> tuple[list[str], CaseResult, Path]:
    root = workspace(tmp_path / "ws")
    folder = package(root, "marker", RUN_YAML, {"t": text})
    result = run_one(folder, "t", keep=True)
    assert result.workspace is not None
    return checks(result), result, result.workspace


def test_a_matched_call_gets_the_entry_result_and_starts_nothing(tmp_path: Path) -> None:
    expect = """  status: sealed
  outcome: completed
  step_outputs: {run: {subset: {exit_code: 0, stdout: "stood in\\n"}}}"""
    failed, result, root = _run(tmp_path, _test("one", entry_name="one", expect=expect))
    assert failed == [], result
    assert not (root / "mark-one").exists()
    assert result.authority is not None
    assert result.authority["processes"] == ["command.execute"]


def test_an_unmatched_call_is_refused_and_starts_nothing(tmp_path: Path) -> None:
    expect = """  status: sealed
  outcome: blocked
  steps: {run: {outcome: blocked, code: process_fixture_unmatched}}"""
    failed, result, root = _run(tmp_path, _test("two", entry_name="one", expect=expect))
    # the unmatched call, and the entry no call used, fail the test on top of its expectations
    assert failed == ["processes", "processes"], result
    assert not (root / "mark-two").exists()
    assert not (root / "mark-one").exists()


def test_without_entries_the_process_runs_for_real(tmp_path: Path) -> None:
    """The control: the same step, with no stand-in declared, does leave its mark."""
    expect = """  status: sealed
  outcome: completed"""
    failed, result, root = _run(tmp_path, _test("real", expect=expect))
    assert failed == [], result
    assert (root / "mark-real").exists()
    assert result.authority["processes"] == []


def test_the_result_passes_the_tool_s_own_checks(tmp_path: Path) -> None:
    """A stand-in result missing what command.execute returns, or a non-zero exit under
    check, fails the call as the tool would."""
    bad = """
method: mark
inputs: {name: one}
providers:
  processes:
    - tool: command.execute
      arguments: {argv: [/bin/sh, -c, "touch mark-$0 && echo ran", one]}
      result: {stdout: "no exit code"}
expect:
  status: sealed
  steps: {run: {outcome: failed, code: process_fixture_invalid}}
"""
    failed, result, _ = _run(tmp_path / "a", bad)
    assert failed == [], result
    exit_one = bad.replace(
        '{stdout: "no exit code"}',
        "{exit_code: 1, stdout_digest: sha256:0, stderr_digest: sha256:0}",
    ).replace("process_fixture_invalid", "command_failed")
    failed, result, _ = _run(tmp_path / "b", exit_one)
    assert failed == [], result


def test_admission_still_runs_before_the_stand_in(tmp_path: Path) -> None:
    """Under effects: none a process call is refused by the floor, never answered."""
    expect = """  status: sealed
  outcome: blocked"""
    text = _test("one", entry_name="one", expect=expect).replace(
        "inputs: {name: one}", "inputs: {name: one}\nsetup:\n  authority: {effects: none}"
    )
    failed, result, root = _run(tmp_path, text)
    assert failed == ["processes"], result  # the entry was never used: nothing reached it
    assert not (root / "mark-one").exists()


def test_duplicate_entries_are_refused_when_read() -> None:
    entry = ProcessExchange(tool="command.execute", arguments={"argv": ["x"]}, result={})
    with pytest.raises(UsageError) as caught:
        ProcessFixtures([entry, entry], "t.yaml")
    assert caught.value.code == "test_exchange_invalid"


def test_unmatched_answer_refuses_and_records() -> None:
    fixtures = ProcessFixtures(
        [ProcessExchange(tool="command.execute", arguments={"argv": ["a"]}, result={"x": 1})],
        "t.yaml",
    )
    assert fixtures.answer("command.execute", {"argv": ["a"]}) == {"x": 1}
    with pytest.raises(RefusedCall) as caught:
        fixtures.answer("command.execute", {"argv": ["b"]})
    assert caught.value.code == "process_fixture_unmatched"
    assert fixtures.counts == [1]
    assert [f.check for f in fixtures.failures()] == ["processes"]


@pytest.mark.parametrize(
    "entry",
    [
        "{tool: command.execute, arguments: {argv: [a]}}",  # no result
        "{tool: 'bad tool', arguments: {}, result: {}}",  # not a tool name
        "{tool: command.execute, input: {}, arguments: {}, result: {}}",  # both forms
        "{tool: command.execute, arguments: {big: " + "a" * (65 * 1024) + "}, result: {}}",
    ],
)
def test_malformed_entries_are_refused(entry: str) -> None:
    text = f"providers:\n  processes:\n    - {entry}\nexpect: {{status: sealed}}\n"
    with pytest.raises(ParseError) as caught:
        parse_test_file(text, "t.yaml")
    assert caught.value.code in ("test_invalid", "test_missing_field")


def test_at_most_32_entries() -> None:
    entries = "".join(
        f"    - {{tool: command.execute, arguments: {{n: {i}}}, result: {{}}}}\n" for i in range(33)
    )
    with pytest.raises(ParseError) as caught:
        parse_test_file(f"providers:\n  processes:\n{entries}expect: {{status: sealed}}\n", "t")
    assert caught.value.code == "test_invalid"


def test_input_is_read_as_arguments() -> None:
    """The runx reference writes a call's arguments as ``input``."""
    text = (
        "providers:\n  processes:\n    - {tool: command.execute, input: {argv: [a]},"
        " result: {x: 1}}\nexpect: {status: sealed}\n"
    )
    (entry,) = parse_test_file(text, "t.yaml").providers.processes
    assert entry.arguments == {"argv": ["a"]}

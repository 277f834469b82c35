"""runx packages as their authors wrote them: result_as, undeclared inputs, process tools,
per-step effects and reach, and timed waits (a resume or a worker settles them)."""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ResumeRefused
from proctor.runtime.engine.request_lines import summary_of
from proctor.runtime.engine.upkeep import settle
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

RESULT_AS = """minimum_runx: 0.12.0
methods:
  main:
    result_from: [say]
    steps:
      - id: say
        tool: echo
        result_as: greeting
        inputs: {text: $input.message}
      - id: again
        tool: echo
        inputs: {text: $steps.say.greeting.text}
"""


def test_result_as_names_the_output_the_whole_result_becomes(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "hello", RESULT_AS)
    s = session(tmp_path)
    # `message` is read and never declared: the runx reading gives it as the caller wrote it
    env = s.run(str(tmp_path / "skills" / "hello"), cli_inputs=["message=hi"])
    assert env.status == "sealed" and env.outcome == "completed"
    assert env.result == {"greeting": {"text": "hi"}}
    steps = s.store.step_records(env.run_id)
    assert steps["say"]["output"] == {"greeting": {"text": "hi"}}
    assert steps["again"]["output"] == {"text": "hi"}


def test_an_undeclared_input_a_runx_step_reads_is_required(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "hello", RESULT_AS)
    s = session(tmp_path)
    env = s.run(str(tmp_path / "skills" / "hello"))
    assert env.status == "sealed" and env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "inputs_invalid"
    assert s.store.step_records(env.run_id) == {}


PROCESS = """minimum_runx: 0.12.0
environment:
  optional: [MODE]
methods:
  main:
    steps:
      - id: tool
        tool:
          command: {python}
          args: [emit.py, $input.word]
          timeout_seconds: 30
"""

EMIT = """import json, os, sys
print(json.dumps({"word": sys.argv[1], "mode": os.environ.get("MODE"),
                  "cwd": os.path.basename(os.getcwd())}))
"""


def _python() -> str:
    return sys.executable


def test_a_process_tool_runs_in_its_package_with_the_declared_environment(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    folder = make_skill(tmp_path, "proc", PROCESS.format(python=_python()))
    (folder / "emit.py").write_text(EMIT)
    s = session(tmp_path, environ={"PROCTOR_HOME": str(tmp_path / ".home"), "MODE": "fast"})
    env = s.run(str(folder), cli_inputs=["word=hello"])
    assert env.status == "sealed" and env.outcome == "completed", env.refusal
    assert isinstance(env.result, dict)
    assert env.result["json"] == {"word": "hello", "mode": "fast", "cwd": "proc"}
    assert env.result["exit_code"] == 0
    (call,) = [c for c in s.store.calls(env.run_id) if c.step_id == "tool"]
    assert call.tool == "command.execute"


def test_a_process_tool_waits_on_the_floor_with_its_argv(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    folder = make_skill(tmp_path, "proc", PROCESS.format(python=_python()))
    (folder / "emit.py").write_text(EMIT.replace("print(", "open('ran', 'w').write('x'); print("))
    s = session(tmp_path)
    env = s.run(str(folder), cli_inputs=["word=hello"], authority=authority(effects="ask"))
    assert env.status == "needs_approval"
    (request,) = env.requests
    command = request["payload"]["command"]
    assert command["argv"][1:] == ["emit.py", "hello"] and command["cwd"] == "skills/proc"
    assert not (folder / "ran").exists()


STEP_NONE = """minimum_runx: 0.12.0
methods:
  main:
    steps:
      - id: note
        tool: fs.write
        effects: none
        inputs: {path: note.txt, content: "x", create: true}
"""


def test_a_step_declared_effects_none_that_writes_is_refused_before_it_runs(
    tmp_path: Path,
) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "quiet", STEP_NONE)
    s = session(tmp_path)
    env = s.run(str(tmp_path / "skills" / "quiet"))
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "effects_none"
    assert not (tmp_path / "note.txt").exists()
    assert s.store.calls(env.run_id) == []


TURN_NONE = """minimum_runx: 0.12.0
methods:
  main:
    steps:
      - id: draft
        effects: none
        agent:
          instructions: Write a note.
          calls: {tools: [fs.write, fs.read]}
      - id: keep
        tool: fs.write
        inputs: {path: kept.txt, content: "k", create: true}
"""


def test_a_turn_of_an_effects_none_step_cannot_write(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "turn", TURN_NONE)
    s = session(tmp_path)
    env = s.run(str(tmp_path / "skills" / "turn"))
    assert env.status == "needs_agent"
    write = {"path": "note.txt", "content": "x", "create": True}
    got = s.turn_call(env.run_id, "draft", "fs.write", write, "c1", reason="write it")
    assert got.status == "refused" and got.code == "effects_none"
    assert not (tmp_path / "note.txt").exists()
    # the method's other steps keep the run's authority
    done = s.resume(env.run_id, _answer(env, "draft", {}))
    assert done.outcome == "completed", done.refusal
    assert (tmp_path / "kept.txt").read_text() == "k"


def _answer(env: Any, address: str, value: Any) -> dict[str, Any]:
    doc = dict(env.answers_template)
    doc["answers"] = {address: {**doc["answers"][address], "value": value}}
    return doc


REACH = """minimum_runx: 0.12.0
methods:
  main:
    inputs:
      type: object
      properties: {repo: {type: string, format: path}}
      required: [repo]
    steps:
      - id: near
        reach: workspace
        tool: fs.read
        inputs: {path: $repo/secret.txt}
"""


def test_a_step_declared_reach_workspace_reaches_no_input_root(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    make_workspace(ws)
    other = tmp_path / "other"
    other.mkdir()
    (other / "secret.txt").write_text("kept-out-of-reach")
    make_skill(ws, "reach", REACH.replace("$repo/secret.txt", "$$repo/secret.txt"))
    s = session(ws)
    env = s.run(str(ws / "skills" / "reach"), inputs={"repo": str(other)},
                authority=authority(reach="inputs"))  # fmt: skip
    assert env.outcome in ("failed", "blocked")
    assert env.refusal is not None and env.refusal.code == "path_outside_reach", env.refusal
    assert "kept-out-of-reach" not in str(env.model_dump())


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


class Clock:
    """A clock a test moves by hand."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


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


RUNNER = """minimum_runx: 0.12.0
credentials:
  nitrosend:
    provider: nitrosend
    auth:
      api_key:
        delivery:
          env: NITROSEND_API_KEY
runners:
  status:
    default: true
    type: graph
    credential: nitrosend
methods:
  status:
    description: Report whether the provider key reached the process.
    steps:
      - id: probe
        tool: {{command: {python}, args: [probe.py]}}
  other:
    description: The same program, from a method no runner names.
    steps:
      - id: probe
        tool: {{command: {python}, args: [probe.py]}}
"""

PROBE = """import json, os
print(json.dumps({"has_key": "NITROSEND_API_KEY" in os.environ}))
"""


def test_a_graph_runner_delivers_its_credential_to_its_method_only(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    folder = make_skill(tmp_path, "nitrosend", RUNNER.format(python=_python()))
    (folder / "probe.py").write_text(PROBE)
    env = {"PROCTOR_HOME": str(tmp_path / ".home"), "NITROSEND_API_KEY": "nskey-test-0123456789"}
    s = session(tmp_path, environ=env)
    ran = s.run(str(folder))  # the runner's default: status
    assert ran.outcome == "completed", ran.refusal
    assert isinstance(ran.result, dict) and ran.result["json"] == {"has_key": True}
    other = s.run(f"{folder}#other")
    assert other.outcome == "completed", other.refusal
    assert isinstance(other.result, dict) and other.result["json"] == {"has_key": False}
    assert "nskey-test-0123456789" not in (tmp_path / ".proctor").joinpath(
        "runs.sqlite"
    ).read_bytes().decode("latin-1")


PARENT = """minimum_runx: 0.12.0
methods:
  main:
    steps:
      - id: child
        effects: none
        skill: ../writer
"""

WRITER = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: write
        tool: fs.write
        inputs: {path: by-child.txt, content: "c", create: true}
"""


def test_a_child_run_holds_what_its_effects_none_step_holds(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    make_skill(tmp_path, "writer", WRITER)
    make_skill(tmp_path, "parent", PARENT)
    s = session(tmp_path)
    env = s.run(str(tmp_path / "skills" / "parent"))
    assert env.status == "sealed" and env.outcome != "completed"
    assert env.refusal is not None and "effects_none" in str(env.refusal), env.refusal
    assert not (tmp_path / "by-child.txt").exists()
    # the same child, from a step that narrows nothing, writes
    make_skill(tmp_path, "parent", PARENT.replace("        effects: none\n", ""))
    assert s.run(str(tmp_path / "skills" / "parent")).outcome == "completed"
    assert (tmp_path / "by-child.txt").read_text() == "c"


def test_a_process_tool_under_effects_none_never_starts(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    folder = make_skill(tmp_path, "proc", PROCESS.format(python=_python()))
    (folder / "emit.py").write_text("open('ran', 'w').write('x')\n")
    s = session(tmp_path)
    env = s.run(str(folder), cli_inputs=["word=hello"], authority=authority(effects="none"))
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "effects_none"
    assert not (folder / "ran").exists()


EVERY_FIELD = Path(__file__).resolve().parents[2] / "assets" / "runx" / "every-field"


def test_a_runx_package_using_every_field_runs_unchanged(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    shutil.copytree(EVERY_FIELD, tmp_path / "skills" / "every-field")
    (tmp_path / "notes.md").write_text("one\ntwo\nthree\n")
    environ = {"PROCTOR_HOME": str(tmp_path / ".home"), "PATH": "/usr/bin:/bin",
               "REPORT_MODE": "brief", "REPORTER_API_KEY": "rk-test-0123456789abcdef"}  # fmt: skip
    clock = Clock(START)
    s = session(tmp_path, environ=environ, clock=clock)
    embargo = _ms(START + timedelta(days=1))
    inputs = ["topic=tides", "notes=notes.md", f"embargo_until={embargo}"]
    env = s.run("every-field", cli_inputs=inputs, cwd=tmp_path)
    assert env.status == "needs_agent", env.refusal
    assert env.requests[0]["kind"] == "wait"
    clock.now = START + timedelta(days=1, minutes=1)
    done = s.resume(env.run_id, {})
    assert done.status == "sealed" and done.outcome == "completed", done.refusal
    assert isinstance(done.result, dict)
    report = done.result["report"]
    assert report["json"] == {"topic": "tides", "notes_lines": 3, "mode": "brief",
                              "has_key": True}  # fmt: skip


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

"""runx packages as their authors wrote them: result_as, inputs read without being declared,
a step's own effects and reach (attacks: what it does not declare does not happen), and a
package using every runx field at once."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.runtime.driver_support import (
    Clock,
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


START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


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

"""Process-tool steps (tool: {command, args}): one command.execute call in the package's
folder, under the same floor, sandbox and delivery as any command."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

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


def test_a_process_tool_under_effects_none_never_starts(tmp_path: Path) -> None:
    make_workspace(tmp_path)
    folder = make_skill(tmp_path, "proc", PROCESS.format(python=_python()))
    (folder / "emit.py").write_text("open('ran', 'w').write('x')\n")
    s = session(tmp_path)
    env = s.run(str(folder), cli_inputs=["word=hello"], authority=authority(effects="none"))
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "effects_none"
    assert not (folder / "ran").exists()


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


def test_a_process_tool_of_a_package_outside_the_workspace_never_starts(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    folder = make_skill(tmp_path / "elsewhere", "proc", PROCESS.format(python=_python()))
    (folder / "emit.py").write_text("open('ran', 'w').write('x')\n")
    s = session(ws)
    env = s.run(str(folder), cli_inputs=["word=hello"])
    assert env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "process_tool_outside_workspace"
    assert not (folder / "ran").exists()

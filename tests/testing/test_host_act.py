"""``host.act``: the act a test's host states for the run, which its steps read as
``$run.act`` (the runx reference's test field, read with its meaning); and ``proctor run
--act`` stating it from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.errors import ParseError
from proctor.parser.skill import parse_run_yaml
from tests.cli.inprocess import enter_workspace, run_main
from tests.testing.support import checks, package, run_one, workspace

RUN_YAML = """
minimum_proctor: 0.1.0
methods:
  greet:
    description: Say who the run acts for.
    steps:
      - id: say
        tool: echo
        inputs: {text: $run.act.who}
      - id: whole
        tool: data.digest
        inputs: {value: $run.act}
"""

TEST = """
host:
  act: {who: ops-team, ticket: 7}
expect:
  status: sealed
  outcome: completed
  step_outputs:
    say: {exact: {text: ops-team}}
"""


def test_host_act_reaches_the_steps(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "greeter", RUN_YAML, {"t": TEST})
    result = run_one(folder, "t")
    assert result.status == "passed", (result.failures, result.error)


def test_a_different_act_fails_the_expectation(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "greeter", RUN_YAML, {"t": TEST.replace("ops-team}", "other}", 1)})
    assert checks(run_one(folder, "t")) == ["step_outputs"]


def test_without_an_act_a_field_of_it_fails_the_step(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    text = """
expect:
  status: sealed
  steps: {say: {outcome: failed, code: unresolved_reference}}
"""
    folder = package(root, "greeter", RUN_YAML, {"t": text})
    result = run_one(folder, "t")
    assert result.status == "passed", (result.failures, result.error)


def test_run_act_needs_no_declared_input() -> None:
    profile = parse_run_yaml(RUN_YAML.lstrip(), "run.yaml")
    assert "greet" in profile.methods
    with pytest.raises(ParseError) as caught:
        parse_run_yaml(RUN_YAML.replace("$run.act.who", "$run.actor"), "run.yaml")
    assert caught.value.code == "invalid_reference"


def test_proctor_run_act(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(tmp_path / "ws")
    package(root, "greeter", RUN_YAML, {})
    enter_workspace(monkeypatch, root, tmp_path / "home")
    act = json.dumps({"who": "cli-host"})
    code, out, _ = run_main(capsys, "run", "skills/greeter", "--act", act, "--json")
    assert code == 0, out
    envelope = json.loads(out)
    assert envelope["outcome"] == "completed"
    code, out, err = run_main(capsys, "run", "skills/greeter", "--act", "{not json", "--json")
    assert code != 0
    assert "act_invalid" in out + err
    assert "not json" not in out + err

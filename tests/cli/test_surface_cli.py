"""The CLI behaves the same in every command: ``--json`` documents carry a ``schema`` id from
the contract list, errors under ``--json`` are a ``proctor.error.v1`` object on stdout, a
malformed ``-i`` is a usage error (exit 2) before any run starts, ``-i`` with ``--inputs`` is
refused, ``null`` for an optional input means absent, help is written for users with one
example each, and ``proctor mcp`` without the SDK says how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from proctor.cli.main import cli
from proctor.contracts.cli_json import CLI_SCHEMAS, ERROR_SCHEMA
from tests.cli.inprocess import enter_workspace, run_main

REPO = Path(__file__).resolve().parents[2]

OPTIONAL = """\
minimum_proctor: 0.1.0
methods:
  greet:
    inputs:
      type: object
      properties:
        message: {type: string}
        suffix: {type: string}
      required: [message]
      additionalProperties: false
    steps:
      - id: greet
        tool: echo
        inputs: {text: $input.message}
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "hello-world", root / "skills" / "hello-world")
    optional = root / "skills" / "optional"
    optional.mkdir()
    (optional / "SKILL.md").write_text(
        "---\nname: optional\ndescription: Optional inputs.\n---\n# optional\n", encoding="utf-8"
    )
    (optional / "run.yaml").write_text(OPTIONAL, encoding="utf-8")
    enter_workspace(monkeypatch, root, tmp_path / "home")
    return root


_proctor = run_main


def _runs(root: Path) -> int:
    audit = root / ".proctor" / "audit.jsonl"
    if not audit.exists():
        return 0
    return audit.read_text(encoding="utf-8").count('"run_started"')


JSON_COMMANDS = [
    ("audit", "verify", "--json"),
    ("audit", "tail", "--json"),
    ("tool", "list", "--json"),
    ("tool", "inspect", "fs.read", "--json"),
    ("authority", "list", "--json"),
    ("credential", "list", "--json"),
    ("config", "show", "--json"),
    ("directives", "list", "--json"),
    ("skill", "inspect", "hello-world", "--json"),
    ("check", "--json"),
    ("history", "--json"),
    ("key", "show", "--json"),
    ("skill", "list", "--json"),
    ("pending", "--json"),
    ("process", "list", "--json"),
    ("connector", "list", "--json"),
    ("package", "skills/hello-world", "--json"),
    ("trust", "--show", "--json"),
]


def test_every_json_document_names_a_listed_schema(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _proctor(capsys, "run", "hello-world", "-i", "message=hi")[0] == 0
    listed = set(CLI_SCHEMAS.values())
    for argv in JSON_COMMANDS:
        _code, out, err = _proctor(capsys, *argv)
        doc = json.loads(out)
        assert isinstance(doc, dict), argv
        assert doc.get("schema") in listed, (argv, doc.get("schema"), err)
    docs = (REPO / "docs" / "cli-json.md").read_text(encoding="utf-8")
    assert all(schema in docs for schema in listed)


def test_errors_under_json_are_an_object_on_stdout(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, code in [
        (("tool", "inspect", "nope", "--json"), 2),
        (("run", "--json"), 2),  # a click usage error
        (("run", "no-such-skill", "--json"), 2),
    ]:
        exit_code, out, err = _proctor(capsys, *argv)
        doc = json.loads(out)
        assert doc["schema"] == ERROR_SCHEMA and doc["code"] and doc["message"], argv
        assert exit_code == doc["exit_code"] == code, (argv, doc)
    # people read the error on stderr either way; without --json stdout stays empty
    exit_code, out, err = _proctor(capsys, "tool", "inspect", "nope")
    assert exit_code == 2 and out == "" and "error[unknown_tool]" in err


def test_malformed_or_conflicting_inputs_are_usage_errors_before_any_run(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "hunter2-typed-without-a-name"
    code, out, err = _proctor(capsys, "run", "hello-world", "-i", secret)
    assert code == 2 and "input_malformed" in err and secret not in out + err
    # refused before stdin is read
    code, out, err = _proctor(
        capsys, "run", "hello-world", "-i", "message=a", "--inputs", "-", "--json"
    )
    assert code == 2 and json.loads(out)["code"] == "inputs_conflict"
    assert _runs(ws) == 0


def test_null_for_an_optional_input_means_absent(
    ws: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.json"
    inputs.write_text('{"message": "hi", "suffix": null}', encoding="utf-8")
    code, out, _ = _proctor(capsys, "run", "optional", "--inputs", str(inputs), "--json")
    assert code == 0 and json.loads(out)["outcome"] == "completed"
    inputs.write_text('{"message": null}', encoding="utf-8")  # required: still refused
    code, out, _ = _proctor(capsys, "run", "optional", "--inputs", str(inputs), "--json")
    assert code == 1 and json.loads(out)["refusal"]["code"] == "inputs_invalid"


def _commands(group: click.Group, ctx: click.Context, path: list[str]) -> list[Any]:
    out: list[Any] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        out.append((" ".join([*path, name]), command))
        if isinstance(command, click.Group):
            out += _commands(command, ctx, [*path, name])
    return out


def test_help_is_for_users_with_an_example_per_command() -> None:
    ctx = click.Context(cli)
    for name, command in _commands(cli, ctx, []):
        text = command.help or ""
        assert "Raises:" not in text, name
        assert "Example" in text and "proctor " in text.partition("Example")[2], name


def test_mcp_without_the_sdk_says_how_to_install_it(ws: Path) -> None:
    blocked = (
        "import sys; sys.modules['mcp'] = None; sys.modules['mcp_types'] = None;"
        " from proctor.cli.main import main; main(['mcp', 'hello-world'])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "error[mcp_sdk_missing]" in proc.stderr and "proctor[mcp]" in proc.stderr
    assert "Traceback" not in proc.stderr


QUIZ = """\
minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: pick
        ask:
          questions:
            - {id: colour, prompt: Which colour?, choices: [red, blue]}
            - {id: why, prompt: Why this one?, required: false}
"""


def test_a_paused_question_prints_its_prompts_and_choices(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiz = ws / "skills" / "quiz"
    quiz.mkdir()
    (quiz / "SKILL.md").write_text("---\nname: quiz\ndescription: Asks.\n---\n# q\n", "utf-8")
    (quiz / "run.yaml").write_text(QUIZ, encoding="utf-8")
    code, out, _ = _proctor(capsys, "run", "quiz")
    assert code == 10
    assert "question colour: Which colour?" in out and "choices: red, blue" in out
    assert "question why (optional): Why this one?" in out and "free text" in out

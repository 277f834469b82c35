"""JSON given on the command line or in a file a command names (``run --run-authority``,
``authority save``, ``config set agent.cost``, ``test record --inputs``) is read by the strict
boundary reader: nesting deep enough to exhaust Python's recursion, a repeated key and a
document that is not an object are refused with a code and a message, never a traceback, and
nothing is saved or run."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.cli.main import main

DEEP = "[" * 50_000 + "]" * 50_000
SKILL = "---\nname: hello\ndescription: Echo.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  greet:
    inputs: {type: object, properties: {message: {type: string}}}
    steps:
      - {id: greet, tool: echo, inputs: {text: $input.message}}
"""


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    (root / "skills" / "hello").mkdir(parents=True)
    (root / "skills" / "hello" / "SKILL.md").write_text(SKILL)
    (root / "skills" / "hello" / "run.yaml").write_text(RUN_YAML)
    monkeypatch.setenv("PROCTOR_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(root)
    return root


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert isinstance(ended.value.code, int)
    return ended.value.code, err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (DEEP, "deeper than 64 levels"),
        ('{"effects": "ask", "effects": "allow"}', "repeats a key"),
        ("{", "not JSON"),
    ],
)
def test_run_authority_that_is_not_strict_json_is_refused_before_a_run(
    workspace: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    code, err = _refused(
        ["run", "skills/hello", "-i", "message=hi", "--run-authority", text], capsys
    )
    assert code == 2 and "error[authority_invalid]" in err and says in err
    assert not (workspace / ".proctor" / "runs.sqlite").exists()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (DEEP.encode(), "deeper than 64 levels"),
        (b'{"effects": "ask", "effects": "allow"}', "repeats a key"),
        (b'{"effects": "\xff"}', "not UTF-8"),
    ],
)
def test_authority_save_refuses_a_document_that_is_not_strict_json(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, says: str
) -> None:
    document = tmp_path / "authority.json"
    document.write_bytes(data)
    code, err = _refused(["authority", "save", "p", str(document)], capsys)
    assert code == 2 and "error[authority_invalid]" in err and says in err
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*p*.json"))


def test_config_set_agent_cost_refuses_deep_json(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _refused(["config", "set", "agent.cost", DEEP[:60_000]], capsys)
    assert code == 3 and "error[cost_invalid]" in err and "deeper than 64 levels" in err
    assert not (tmp_path / "home" / "config.json").exists()


@pytest.mark.parametrize(
    ("data", "code_name"),
    [(DEEP.encode(), "too_deep"), (b"[1]", "inputs_not_object"), (b"{", "inputs_not_json")],
)
def test_test_record_refuses_inputs_that_are_not_one_strict_object(
    workspace: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    data: bytes,
    code_name: str,
) -> None:
    document = tmp_path / "inputs.json"
    document.write_bytes(data)
    out = workspace / "skills" / "hello" / "tests" / "hi.yaml"
    argv = ["test", "record", "skills/hello#greet", "--inputs", str(document), "--out", str(out)]
    code, err = _refused(argv, capsys)
    assert code == 2 and f"error[{code_name}]" in err
    assert not out.exists() and not (workspace / ".proctor" / "runs.sqlite").exists()

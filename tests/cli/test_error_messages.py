"""The CLI's refusals read as written: proctor's own words in a parse error are not taken for a
secret (``credentials: Input should be a valid dictionary``), a file named on the command line is
named as it was typed (``.`` is not an empty name, ``/dev/zero`` not ``zero``), and ``audit
tail`` reads a tampered log without a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from proctor.cli.main import main
from tests.cli.inprocess import enter_workspace, run_main

BAD_CREDENTIALS = """\
minimum_proctor: 0.1.0
credentials: [1]
methods:
  m:
    steps:
      - id: a
        tool: echo
        inputs: {text: hi}
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    bad = root / "skills" / "bad"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\nname: bad\ndescription: Bad.\n---\n", encoding="utf-8")
    (bad / "run.yaml").write_text(BAD_CREDENTIALS, encoding="utf-8")
    enter_workspace(monkeypatch, root, tmp_path / "home")
    return root


_proctor = run_main


def test_a_parse_error_under_credentials_is_shown_whole(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = "skills/bad/run.yaml:2:1: credentials: Input should be a valid dictionary"
    code, _out, err = _proctor(capsys, "run", "skills/bad")
    assert code == 2 and err == f"error[run_yaml_invalid]: {said}\n"
    code, out, _err = _proctor(capsys, "run", "skills/bad", "--json")
    assert code == 2 and json.loads(out)["message"] == said


def test_inputs_files_are_named_as_given(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _proctor(capsys, "run", "skills/bad", "--inputs", ".")
    assert code == 2 and "--inputs: cannot read '.': Is a directory" in err
    if os.path.exists("/dev/zero"):
        code, _out, err = _proctor(capsys, "run", "skills/bad", "--inputs", "/dev/zero")
        assert code == 2 and "error[inputs_too_large]: /dev/zero: inputs document is" in err


def test_audit_paths_are_named_as_given(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _proctor(capsys, "audit", "verify", ".")
    assert code == 2 and "error[audit_unreadable]: cannot read '.'" in err
    code, _out, err = _proctor(capsys, "audit", "tail", ".")
    assert code == 2 and "no audit log at '.'" in err


def test_audit_tail_reads_a_tampered_log(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = ws / "tampered.jsonl"
    good = {"event": "run_started", "run_id": "r1", "sequence": 1, "timestamp": "t"}
    log.write_text(
        "[" * 100_000 + "\n" + "5\n" + '{"a": 1, "a": 2}\n' + json.dumps(good) + "\n",
        encoding="utf-8",
    )
    code, out, err = _proctor(capsys, "audit", "tail", str(log), "--json")
    assert code == 0 and "Traceback" not in err
    assert json.loads(out)["records"] == [{"event": "<unreadable line>"}] * 3 + [good]
    code, out, _err = _proctor(capsys, "audit", "tail", str(log))
    assert code == 0 and out.count("<unreadable line>") == 3 and "run_started" in out


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc")
def test_audit_tail_names_a_log_it_cannot_read(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # /proc/self/mem is a regular file whose first page is never mapped: reading it fails.
    code, _out, err = _proctor(capsys, "audit", "tail", "/proc/self/mem")
    assert code == 2 and "error[audit_unreadable]: cannot read '/proc/self/mem'" in err


def test_directive_files_are_named_as_given(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _proctor(capsys, "directives", "validate", "missing/review.md")
    assert code == 2
    assert err == (
        "error[directive_unreadable]: cannot read 'missing/review.md': No such file or directory\n"
    )
    (ws / "directives").mkdir()
    (ws / "directives" / "review.md").write_text("no frontmatter\n", encoding="utf-8")
    code, _out, err = _proctor(capsys, "directives", "validate", "directives/review.md")
    assert code == 2 and err.startswith("error[directive_frontmatter]: directives/review.md: ")


def test_init_names_its_folder_as_given(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ws / "plain").write_text("a file\n", encoding="utf-8")
    code, _out, err = _proctor(capsys, "init", "plain/sub")
    assert code == 2
    assert "error[init_failed]: cannot create the workspace in 'plain/sub': Not a directory" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["history", "--after", "9" * 25],
        ["history", "--after", "-1"],
        ["registry", "serve", "--dir", ".", "--port", "99999"],
    ],
    ids=["cursor-past-63-bits", "cursor-negative", "port-past-65535"],
)
def test_numbers_out_of_range_are_refused_as_usage(
    ws: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # A cursor past what the run store holds crashed history with an OverflowError traceback.
    with pytest.raises(SystemExit) as ended:
        main(argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "Traceback" not in err
    assert "is not in the range" in err

"""``proctor audit verify`` names the first bad line of a tampered log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from proctor.cli.main import cli
from proctor.runtime.records.audit import AuditLog


def _log(tmp_path: Path, count: int = 5) -> Path:
    path = tmp_path / ".proctor" / "audit.jsonl"
    with AuditLog(path) as log:
        for i in range(count):
            log.emit("call", run_id="r", step_index=i, tool="echo", n=i)
    return path


def _verify(path: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["audit", "verify", str(path), *extra])
    return result.exit_code, result.output


def test_intact_log_verifies(tmp_path: Path) -> None:
    code, out = _verify(_log(tmp_path))
    assert code == 0 and "5 lines" in out


def _rewrite(path: Path, change: str) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    if change == "delete":
        del lines[2]
    elif change == "edit":
        lines[2] = lines[2].replace(b'"n":2', b'"n":9')
    elif change == "swap":
        lines[1], lines[2] = lines[2], lines[1]
    elif change == "truncate":
        lines[-1] = lines[-1][:-10]
    elif change == "insert":
        lines.insert(3, lines[3])
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize(
    ("change", "line"),
    [("delete", 3), ("edit", 4), ("swap", 2), ("truncate", 5), ("insert", 5)],
)
def test_tampering_is_named_by_line(tmp_path: Path, change: str, line: int) -> None:
    path = _log(tmp_path)
    _rewrite(path, change)
    code, out = _verify(path, "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert report["first_bad_line"] == line, report


def test_edit_a_byte_in_the_middle_of_a_line(tmp_path: Path) -> None:
    path = _log(tmp_path)
    data = bytearray(path.read_bytes())
    offset = data.index(b'"tool":"echo"', data.index(b"\n") + 1)  # in line 2
    data[offset + 9] = ord("E")
    path.write_bytes(bytes(data))
    code, out = _verify(path)
    # line 2 still parses; line 3's prev no longer matches it
    assert code == 1 and "line 3" in out


def test_default_path_from_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _log(tmp_path)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    monkeypatch.delenv("PROCTOR_AUDIT_LOG", raising=False)
    result = CliRunner().invoke(cli, ["audit", "verify"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["audit", "tail", "-n", "2", "--json"])
    doc = json.loads(result.output)
    assert doc["schema"] == "proctor.audit_tail.v1"
    assert [r["n"] for r in doc["records"]] == [3, 4]

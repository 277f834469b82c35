"""``proctor audit verify`` names the first bad line of a tampered log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    ended=st.booleans(),
    count=st.integers(0, 40),
    block=st.integers(1, 16),
)
def test_tail_reads_the_last_lines_backwards_exactly_as_the_whole_file_would_give(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    ended: bool,
    count: int,
    block: int,
) -> None:
    from proctor.cli import audit as audit_cli

    path = tmp_path_factory.mktemp("tail") / "audit.jsonl"
    data = b"\n".join(lines) + (b"\n" if ended and lines else b"")
    path.write_bytes(data)
    whole = data.splitlines()[-count:] if count > 0 else []
    saved = audit_cli._BLOCK
    audit_cli._BLOCK = block  # small blocks: every line end lands on a block's edge somewhere
    try:
        assert audit_cli._last_lines(path, count) == whole
    finally:
        audit_cli._BLOCK = saved


def test_tail_of_a_long_log_reads_only_its_end(tmp_path: Path) -> None:
    """A log of 4 GiB (sparse: a long history before the last lines) tailed by a process
    capped at 1 GiB of memory: reading the whole file would end it with a MemoryError."""
    import subprocess
    import sys

    path = _log(tmp_path, count=3)
    body = path.read_bytes()
    with path.open("r+b") as handle:
        handle.truncate(0)
        handle.seek(4 * 2**30)
        handle.write(b"\n" + body)
    capped = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from proctor.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", capped, "audit", "tail", str(path), "-n", "3", "--json"],
        capture_output=True, text=True, timeout=120, check=False,
        env={"PROCTOR_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    records = json.loads(done.stdout)["records"]
    assert [r["n"] for r in records] == [0, 1, 2]

"""An audit line with a key given twice is tampering: ``proctor audit verify`` names it with a
code, whether it is the last line (decoded) or a line another hand appended and a writer came
after (the writer does not chain over it, so the fast path cannot take it undecoded)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.cli.main import cli
from proctor.runtime.records.audit import AuditLog
from proctor.runtime.records.chain import verify_bytes, verify_chain

_DUP = "audit_line_duplicate_key"
UNCHAINED = "sha256:" + "f" * 64  # the writer's prev after a line it does not chain over


def _log(path: Path, count: int = 4) -> Path:
    with AuditLog(path) as log:
        for i in range(count):
            log.emit("tool_call", run_id="r", step_index=i, tool="fs.write", decision="allow")
    return path


def _replace_last(path: Path, change: bytes) -> None:
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join([*lines[:-1], change]) + b"\n")


def test_the_last_line_with_an_event_given_twice_is_refused(tmp_path: Path) -> None:
    path = _log(tmp_path / "audit.jsonl")
    last = path.read_bytes().splitlines()[-1]
    # a reader keeping the first copy reads a denial, Python's json the allow: the prev is
    # untouched, the fixed fields stay first and in order
    forged = last.replace(b'"event":"tool_call"', b'"event":"denied","event":"tool_call"', 1)
    _replace_last(path, forged)
    report = verify_chain(path)
    assert not report.ok and report.first_bad_line == 4
    assert report.code == _DUP and "repeats a key" in str(report.reason)


def test_a_prev_given_twice_is_refused(tmp_path: Path) -> None:
    path = _log(tmp_path / "audit.jsonl")
    last = path.read_bytes().splitlines()[-1]
    # the line still ends with the prev the fast path compares as bytes
    forged = last.replace(b',"prev":', b',"prev":"sha256:' + b"e" * 64 + b'","prev":', 1)
    _replace_last(path, forged)
    report = verify_chain(path)
    assert (report.ok, report.first_bad_line, report.code) == (False, 4, _DUP)


def test_a_nested_key_given_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        log.emit("policy_decision", run_id="r", step_index=0, verdict={"code": "ok"})
    last = path.read_bytes().splitlines()[-1]
    _replace_last(path, last.replace(b'{"code":"ok"}', b'{"code":"deny","code":"ok"}'))
    assert verify_chain(path).code == _DUP


def test_a_line_appended_by_another_hand_is_not_chained_over(tmp_path: Path) -> None:
    path = _log(tmp_path / "audit.jsonl")
    last = path.read_bytes().splitlines()[-1]
    # a copy of the last line with its event given twice, chained to the last line: to the
    # fast path it has the writer's head and the right prev
    prev = b"sha256:" + hashlib.sha256(last).hexdigest().encode()
    forged = re.sub(rb'"prev":"sha256:[0-9a-f]{64}"', b'"prev":"' + prev + b'"', last)
    forged = forged.replace(b'"event":"tool_call"', b'"event":"denied","event":"tool_call"', 1)
    with path.open("ab") as handle:
        handle.write(forged + b"\n")
    with AuditLog(path) as log:  # a later command writes after it
        log.emit("tool_call", run_id="r2", step_index=0, tool="fs.read")
    lines = path.read_bytes().splitlines()
    assert len(lines) == 6 and lines[4] == forged
    assert json.loads(lines[5])["prev"] == UNCHAINED  # no link vouches for the forged line
    report = verify_chain(path)
    assert (report.ok, report.first_bad_line, report.code) == (False, 5, _DUP), report


def test_a_line_another_proctor_wrote_is_chained_over(tmp_path: Path) -> None:
    path = _log(tmp_path / "audit.jsonl")
    with AuditLog(path) as first, AuditLog(path) as second:
        first.emit("a", run_id="r", step_index=None)
        second.emit("b", run_id="r", step_index=None)  # after a line it did not write
        first.emit("c", run_id="r", step_index=None)
    assert verify_chain(path).ok
    assert UNCHAINED.encode() not in path.read_bytes()


def test_verify_reports_the_code(tmp_path: Path) -> None:
    path = _log(tmp_path / "audit.jsonl")
    last = path.read_bytes().splitlines()[-1]
    _replace_last(path, last.replace(b'"tool":"fs.write"', b'"tool":"x","tool":"fs.write"'))
    result = CliRunner().invoke(cli, ["audit", "verify", str(path), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert (report["ok"], report["first_bad_line"], report["code"]) == (False, 4, _DUP)
    assert "Traceback" not in result.output
    plain = CliRunner().invoke(cli, ["audit", "verify", str(path)])
    assert plain.exit_code == 1 and "at line 4: repeats a key" in plain.output


def test_nan_in_the_last_line_is_refused(tmp_path: Path) -> None:
    path = _log(tmp_path / "audit.jsonl")
    last = path.read_bytes().splitlines()[-1]
    _replace_last(path, last.replace(b'"tool":"fs.write"', b'"tool":NaN', 1))
    assert verify_chain(path).code == "audit_line_not_json"


def test_every_code_is_documented() -> None:
    from proctor.runtime.records.chain import CODES

    text = (Path(__file__).parents[3] / "docs" / "audit.md").read_text(encoding="utf-8")
    assert [code for code in CODES if f"`{code}`" not in text] == []


_LOG: dict[str, bytes] = {}


def _written(tmp: Path) -> bytes:
    if "log" not in _LOG:
        path = tmp / "fuzz.jsonl"
        with AuditLog(path) as log:
            log.emit("policy_decision", run_id="r", step_index=0, tool="t", verdict={"a": [1]})
            log.emit("tool_call", run_id="r", step_index=1, tool="t", outcome="completed")
        _LOG["log"] = path.read_bytes()
    return _LOG["log"]


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(line=st.integers(0, 1), which=st.integers(0, 100), value=_values)
def test_any_key_given_twice_in_any_line_is_refused(
    tmp_path: Path, line: int, which: int, value: object
) -> None:
    lines = _written(tmp_path).splitlines()
    target = lines[line]
    keys = [m.start() for m in re.finditer(rb'"[a-z_]+":', target)]
    at = keys[which % len(keys)]
    key = target[at : target.index(b":", at) + 1]
    # a copy just before the key, in the same object: json.loads keeps the original value
    lines[line] = target[:at] + key + json.dumps(value).encode() + b"," + target[at:]
    report = verify_bytes(b"\n".join(lines) + b"\n")
    # a middle line whose link broke is decoded with the line after it, and named itself
    assert (report.ok, report.first_bad_line, report.code) == (False, line + 1, _DUP)

"""The audit log: record shape, sanitizing, the hash chain, concurrent writers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proctor.runtime.boundary.sanitize import TaintSet
from proctor.runtime.records.audit import (
    FIXED_FIELDS,
    GENESIS,
    AuditLog,
    audit_path,
    line_digest,
    verify_chain,
)


def test_record_shape_sequence_and_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        first = log.emit("run_started", run_id="r1", step_index=None, skill="hello")
        log.emit("call", run_id="r1", step_index=0, tool="echo")
        log.emit("config_changed", run_id=None, step_index=None)
    lines = path.read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    assert list(records[0])[: len(FIXED_FIELDS)] == list(FIXED_FIELDS)
    assert records[0]["prev"] == GENESIS and first["skill"] == "hello"
    assert records[1]["prev"] == line_digest(lines[0])
    assert [r["sequence"] for r in records] == [1, 2, None]
    assert verify_chain(path).ok and verify_chain(path).lines == 3


def test_fields_are_sanitized_with_paths(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    token = "ghp_" + "a1B2" * 9
    with AuditLog(path) as log:
        log.emit(
            "call_refused",
            run_id="r",
            step_index=1,
            taint=TaintSet(["delivered-secret-value"]),
            args={"headers": {"Authorization": "x"}, "body": f"t={token}"},
            note="uses delivered-secret-value here",
        )
    text = path.read_text()
    assert token not in text and "delivered-secret-value" not in text
    record = json.loads(text)
    assert record["redacted_fields"] == [
        "$.args.body",
        "$.args.headers.Authorization",
        "$.note",
    ]


def test_write_failure_is_reported_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = AuditLog(blocker / "audit.jsonl")  # parent is a file: mkdir fails
    record = log.emit("call", run_id=None, step_index=None)
    assert record["audit_persisted"] is False and log.failures == 1


def test_audit_path_default_and_env(tmp_path: Path) -> None:
    assert audit_path(tmp_path, {}) == tmp_path / ".proctor" / "audit.jsonl"
    assert audit_path(tmp_path, {"PROCTOR_AUDIT_LOG": "logs/a.jsonl"}) == tmp_path / "logs/a.jsonl"


def test_resumes_chain_of_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as first, AuditLog(path) as other:
        first.emit("one", run_id=None, step_index=None)
        other.emit("two", run_id=None, step_index=None)
        first.emit("three", run_id=None, step_index=None)  # must see "two" before chaining
    assert verify_chain(path).ok and verify_chain(path).lines == 3


_WRITER = """
import sys
from pathlib import Path
from proctor.runtime.records.audit import AuditLog
log = AuditLog(Path(sys.argv[1]))
for i in range(200):
    log.emit("call", run_id=sys.argv[2], step_index=i, n=i)
"""


def test_two_processes_append_and_chain_verifies(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name]) for name in "ab"]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    report = verify_chain(path)
    assert report.ok, report
    assert report.lines == 400

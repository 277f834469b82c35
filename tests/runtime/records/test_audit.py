"""The audit log: record shape, sanitizing, the hash chain, concurrent writers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.runtime.boundary.sanitize import TaintSet
from proctor.runtime.records.audit import (
    FIXED_FIELDS,
    GENESIS,
    Anchor,
    AuditLog,
    audit_path,
    line_digest,
    verify_bytes,
    verify_chain,
)
from tests.runtime.records.records_support import append_elsewhere


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


# -- the head, anchors, lost events and torn lines ----------------------------------------------


def test_head_counts_lines_and_names_the_last_line_with_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log, AuditLog(path) as other:
        assert log.head() == {"lines": 0, "last_digest": None, "bytes": 0}
        log.emit("one", run_id=None, step_index=None)
        assert log.head()["lines"] == 1
        other.emit("two", run_id=None, step_index=None)
        other.emit("three", run_id=None, step_index=None)
        head = log.head()  # counts what the other writer added since
        data = path.read_bytes()
        lines = data.splitlines()
        assert head == {"lines": 3, "last_digest": line_digest(lines[-1]), "bytes": len(data)}
        log.emit("four", run_id=None, step_index=None)
        assert log.head()["lines"] == other.head()["lines"] == 4


def test_the_head_after_this_processs_own_line_takes_no_lock_and_another_writer_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the log ends where this process's own counted line ended it: the head is that line's,
    # with no lock; once another process appended (or is appending: its bytes show in the
    # size) the head is read under the lock and counts its line
    import fcntl

    from proctor.runtime.records import audit as audit_module

    path = tmp_path / "audit.jsonl"
    locks: list[int] = []
    flock = fcntl.flock

    def spy(fd: int, op: int) -> None:
        locks.append(op)
        flock(fd, op)

    with AuditLog(path) as log:
        log.emit("one", run_id=None, step_index=None)
        assert log.head()["lines"] == 1  # counted: from now on the log knows its head
        log.emit("two", run_id=None, step_index=None)
        monkeypatch.setattr(audit_module.fcntl, "flock", spy)
        data = path.read_bytes()
        mine = {"lines": 2, "last_digest": line_digest(data.splitlines()[-1]), "bytes": len(data)}
        assert log.head() == mine and locks == []
        append_elsewhere(path)  # another process's line after this one's
        data = path.read_bytes()
        head = log.head()
        assert head == {"lines": 3, "last_digest": line_digest(data.splitlines()[-1]),
                        "bytes": len(data)}  # fmt: skip
        assert locks == [fcntl.LOCK_EX, fcntl.LOCK_UN]
        log.emit("three", run_id=None, step_index=None)  # chained to the other line
    assert verify_chain(path).ok


def test_emit_head_gives_the_head_just_after_its_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"

    def now() -> dict[str, object]:
        with AuditLog(path) as reader:
            return reader.head()

    with AuditLog(path) as log, AuditLog(path) as other:
        # never counted yet: the head is read as head() reads it
        record, head = log.emit_head("sealed", run_id="r", step_index=None, outcome="done")
        assert head == now() and head is not None and head["lines"] == 1
        assert record["outcome"] == "done" and "audit_persisted" not in record
        # counted up to its own line: the head is the one its write made, the same bytes
        # (read nowhere: no head() under the lock)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(log, "head", lambda *a: pytest.fail("read again"))
            record, head = log.emit_head("sealed", run_id="r", step_index=None)
        assert head == now() and head is not None and head["lines"] == 2
        assert head["last_digest"] == line_digest(path.read_bytes().splitlines()[-1])
        # another writer appended since this log's count: its lines are counted too
        other.emit("between", run_id=None, step_index=None)
        other.emit("between", run_id=None, step_index=None)
        record, head = log.emit_head("sealed", run_id="r", step_index=None)
        assert head == now() and head is not None and head["lines"] == 5
        # and after a line another writer appended, with nothing written since the count
        log.head()
        other.emit("between", run_id=None, step_index=None)
        assert log.emit_head("sealed", run_id="r", step_index=None)[1] == now()
    assert verify_chain(path).ok


def test_emit_head_names_no_head_when_the_line_was_not_written(tmp_path: Path) -> None:
    folder = tmp_path / "file"
    folder.write_text("")
    log = AuditLog(folder / "audit.jsonl")
    record, head = log.emit_head("run_sealed", run_id="r", step_index=None)
    assert record["audit_persisted"] is False and head is None and log.lost("r") == 1


def test_a_new_process_counts_from_a_known_head_only_when_it_still_holds(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        for n in range(5):
            log.emit("call", run_id=None, step_index=n)
        known = log.head()
        log.emit("after", run_id=None, step_index=None)
    with AuditLog(path) as fresh:
        assert fresh.head(known)["lines"] == 6
    # the count is taken from the hint (the run store's own anchor) only while the line it
    # names is still there with its digest; otherwise every line is counted again
    for stale in ({**known, "last_digest": GENESIS}, {**known, "bytes": known["bytes"] - 1}):
        with AuditLog(path) as fresh:
            assert fresh.head({**stale, "lines": 50})["lines"] == 6
    with AuditLog(path) as fresh:
        assert fresh.head({**known, "lines": 50})["lines"] == 51


def _anchor(path: Path, lines: int, source: str = "test") -> Anchor:
    data = path.read_bytes().splitlines()
    return Anchor(lines, line_digest(data[lines - 1]), source)


def test_verify_chain_holds_anchors_and_names_cuts_and_rewrites(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        for n in range(6):
            log.emit("call", run_id="r", step_index=n, n=n)
    anchors = [_anchor(path, 2, "early"), _anchor(path, 6, "late")]
    report = verify_chain(path, anchors)
    assert report.ok and report.anchors == 2
    original = path.read_bytes()
    path.write_bytes(b"".join(original.splitlines(keepends=True)[:4]))
    report = verify_chain(path, anchors)
    assert not report.ok and report.first_bad_line == 5
    assert report.broken_anchors[0]["problem"] == "cut"
    assert "late commits 6 lines but the log has 4: lines 5 to 6" in str(report.reason)
    # the same number of lines, one changed and the rest chained again: the digest differs
    lines = original.splitlines()
    lines[3] = lines[3].replace(b'"n":3', b'"n":7')
    path.write_bytes(b"\n".join(lines) + b"\n")
    report = verify_chain(path, anchors)
    assert report.first_bad_line == 5  # the chain breaks at the line after the change
    assert report.broken_anchors == ()  # line 6's bytes are as anchored
    prev = line_digest(lines[2])
    for n in range(3, 6):  # chain the rest again: the chain is fooled, the anchor is not
        record = json.loads(lines[n])
        record["prev"] = prev
        lines[n] = json.dumps(record, separators=(",", ":")).encode()
        prev = line_digest(lines[n])
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert verify_chain(path).ok
    report = verify_chain(path, anchors)
    assert report.first_bad_line == 6
    assert [b["problem"] for b in report.broken_anchors] == ["rewritten"]
    assert "lines after 2 (intact as early commits) up to 6" in report.broken_anchors[0]["message"]
    assert verify_bytes(b"", anchors).first_bad_line == 1


def test_lost_events_are_counted_per_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = AuditLog(blocker / "audit.jsonl")
    for _ in range(3):
        log.emit("call", run_id="a", step_index=None)
    log.emit("call", run_id="b", step_index=None)
    log.emit("config", run_id=None, step_index=None)
    assert (log.failures, log.lost("a"), log.lost("b")) == (5, 3, 1)
    assert log.take_lost("a") == 3 and log.lost("a") == 0


def test_a_torn_last_line_is_moved_aside_and_the_repair_audited(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        log.emit("one", run_id=None, step_index=None)
    whole = path.read_bytes()
    torn = b'{"schema_version":"1","event_id":"cut-here'
    path.write_bytes(whole + torn)
    assert not verify_chain(path).ok
    with AuditLog(path) as log:
        log.emit("two", run_id="r", step_index=None)
    report = verify_chain(path)
    assert report.ok and report.lines == 3, report
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [r["event"] for r in records] == ["one", "audit_repaired", "two"]
    repaired = records[1]
    assert repaired["line"] == 2 and repaired["torn_bytes"] == len(torn)
    assert repaired["moved_to"] == "audit.jsonl.torn"
    assert (tmp_path / "audit.jsonl.torn").read_bytes() == torn + b"\n"
    assert path.read_bytes().startswith(whole)  # the complete lines are untouched


_FULL = """
import json, os, resource, signal, sys
from pathlib import Path
from proctor.runtime.records.audit import AuditLog
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
size = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, size + 40))
log = AuditLog(path)
first = log.emit("cut_short", run_id="r", step_index=None, pad="x" * 200)
second = log.emit("refused", run_id="r", step_index=None)
print(json.dumps([first.get("audit_persisted", True), second.get("audit_persisted", True),
                  log.lost("r"), path.stat().st_size - size]))
log.close()
"""


def test_a_write_the_disk_cuts_short_leaves_no_half_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        log.emit("before", run_id=None, step_index=None)
    proc = subprocess.run(
        [sys.executable, "-c", _FULL, str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [False, False, 2, 0]
    assert verify_chain(path).ok


_LINE_FIELDS = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(
        lambda k: k not in ("prev", "event", "run_id", "step_index", "taint", "fsync")
    ),
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=12)
    | st.lists(st.text(max_size=4)),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(
    fields=_LINE_FIELDS,
    run_id=st.none() | st.text(max_size=10),
    step_index=st.none() | st.integers(0, 10**6),
)
def test_a_line_from_pre_encoded_parts_is_the_record_as_json(
    tmp_path_factory: pytest.TempPathFactory,
    fields: dict[str, object],
    run_id: str | None,
    step_index: int | None,
) -> None:
    from proctor.runtime.records.audit import FIXED_FIELDS

    fields = {k: v for k, v in fields.items() if k not in FIXED_FIELDS}
    log = AuditLog(tmp_path_factory.mktemp("audit") / "audit.jsonl")
    written = log.emit("some_event", run_id=run_id, step_index=step_index, **fields)
    line = log.path.read_bytes().splitlines()[-1]
    written.pop("audit_persisted", None)
    assert line == json.dumps(written, ensure_ascii=False, separators=(",", ":")).encode()
    assert json.loads(line) == written
    log.close()


def test_event_ids_and_timestamps_keep_their_forms(tmp_path: Path) -> None:
    # made without uuid.uuid4() and without a datetime per line: the same forms as those give
    import uuid
    from datetime import UTC, datetime

    log = AuditLog(tmp_path / "audit.jsonl")
    before = datetime.now(UTC)
    records = [log.emit("note", run_id="r", step_index=None, n=i) for i in range(200)]
    after = datetime.now(UTC)
    stamps = []
    for record in records:
        event_id = uuid.UUID(record["event_id"])
        assert event_id.version == 4 and event_id.variant == uuid.RFC_4122
        assert str(event_id) == record["event_id"]
        moment = datetime.fromisoformat(record["timestamp"])
        assert moment.isoformat(timespec="microseconds") == record["timestamp"]
        stamps.append(moment)
    assert before <= min(stamps) and max(stamps) <= after
    assert len({r["event_id"] for r in records}) == len(records)


def test_event_ids_read_no_random_bytes_and_differ_across_a_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an event id is counted under a per-process prefix: no getrandom per line; a forked
    # child draws its own prefix, so two processes appending to one log never share an id
    import os

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.emit("warm", run_id="r", step_index=None)

    def refused(n: int) -> bytes:
        raise AssertionError("an audit line read random bytes for its event id")

    with monkeypatch.context() as patched:
        patched.setattr(os, "urandom", refused)
        mine = [log.emit("note", run_id="r", step_index=None, n=i)["event_id"] for i in range(50)]
    pid = os.fork()
    if pid == 0:  # the child appends its own lines to the same log, then leaves at once
        try:
            child_log = AuditLog(path)
            for i in range(50):
                child_log.emit("child_note", run_id="c", step_index=None, n=i)
            child_log.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    mine += [log.emit("note", run_id="r", step_index=None, n=i)["event_id"] for i in range(50)]
    log.close()
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    theirs = [r["event_id"] for r in records if r["event"] == "child_note"]
    assert len(theirs) == 50
    ids = [r["event_id"] for r in records]
    assert len(set(ids)) == len(ids) == 151
    assert {i[:24] for i in theirs}.isdisjoint({i[:24] for i in mine})
    assert verify_chain(path).ok

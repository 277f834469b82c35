"""The streaming audit verifier (:func:`proctor.runtime.records.chain.verify_chain`) names
the same first bad line, for the same reason, as decoding every line of the whole file does,
whatever was done to the log and wherever its blocks end."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.runtime.records import chain_lines
from proctor.runtime.records.audit import FIXED_FIELDS, GENESIS, Anchor, AuditLog, verify_chain
from proctor.runtime.records.audit_breaks import accept_break


def _reference(data: bytes, anchors: list[Anchor]) -> tuple[bool, int, int | None]:
    """Every line decoded in full, the whole file in memory (the verifier before streaming):
    ``(ok, lines, first bad line)``, anchors included."""
    lines = data.split(b"\n") if data else []
    truncated = bool(lines) and lines[-1] != b""
    if lines and not truncated:
        lines.pop()
    prev, bad, digests = GENESIS, None, {}
    for number, line in enumerate(lines, start=1):
        if bad is None:
            try:
                record = json.loads(line)
                fine = (
                    isinstance(record, dict)
                    and all(k in record for k in (*FIXED_FIELDS, "prev"))
                    and list(record)[: len(FIXED_FIELDS)] == list(FIXED_FIELDS)
                    and record["prev"] == prev
                )
            except ValueError:
                fine = False
            if not fine or (truncated and number == len(lines)):
                bad = number
        prev = "sha256:" + hashlib.sha256(line).hexdigest()
        digests[number] = prev
    complete = len(lines) - (1 if truncated else 0)
    for anchor in sorted(anchors, key=lambda a: a.lines):
        if anchor.lines > complete:
            line = complete + 1
        elif digests.get(anchor.lines) != anchor.last_digest:
            line = anchor.lines
        else:
            continue
        bad = line if bad is None else min(bad, line)
        break
    return bad is None, len(lines), bad


_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["delete", "copy", "byte", "garbage", "cut", "swap"]),
        st.integers(0, 10_000),
        st.integers(0, 255),
    ),
    max_size=3,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(_TEXT, min_size=1, max_size=8),
    edits=_EDITS,
    block=st.sampled_from([1, 7, 64, 1 << 20]),
    anchored=st.booleans(),
)
def test_the_stream_names_what_decoding_every_line_names(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    texts: list[str],
    edits: list[tuple[str, int, int]],
    block: int,
    anchored: bool,
) -> None:
    path = tmp_path_factory.mktemp("log") / "audit.jsonl"
    with AuditLog(path) as log:
        for n, text in enumerate(texts):
            log.emit("call", run_id=text or None, step_index=n, text=text, nested={"n": [n]})
    written = path.read_bytes()
    whole = written.splitlines()
    anchors = (
        [
            Anchor(n, "sha256:" + hashlib.sha256(whole[n - 1]).hexdigest(), f"a{n}")
            for n in (1, len(whole))
        ]
        if anchored
        else []
    )
    data = bytearray(written)
    for kind, where, value in edits:
        lines = bytes(data).split(b"\n")
        at = where % max(1, len(lines))
        if kind == "delete" and lines:
            del lines[at]
        elif kind == "copy" and lines:
            lines.insert(at, lines[at])
        elif kind == "swap" and len(lines) > 1:
            lines[at - 1], lines[at] = lines[at], lines[at - 1]
        elif kind == "garbage":
            lines.insert(at, bytes([value]) * 3)
        if kind in ("delete", "copy", "swap", "garbage"):
            data = bytearray(b"\n".join(lines))
        elif kind == "byte" and data:
            data[where % len(data)] = value
        elif kind == "cut":
            del data[where % (len(data) + 1) :]
    path.write_bytes(bytes(data))
    monkeypatch.setattr(chain_lines, "BLOCK", block)
    report = verify_chain(path, anchors)
    assert (report.ok, report.lines, report.first_bad_line) == _reference(bytes(data), anchors)


def test_a_log_with_a_recorded_break_is_walked_with_its_break(tmp_path: Path) -> None:
    """A recorded break read in blocks: the lines it sets aside are frozen by its digest."""
    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as log:
        for n in range(4):
            log.emit("call", run_id="r", step_index=n, n=n)
    lines = path.read_bytes().splitlines()
    lines[1] = lines[1].replace(b'"n":1', b'"n":9')  # line 3 no longer chains
    path.write_bytes(b"\n".join(lines) + b"\n")
    with AuditLog(path) as log:
        assert accept_break(log, []) is not None
        log.emit("call", run_id="r", step_index=5, n=5)
    for block in (5, 1 << 20):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(chain_lines, "BLOCK", block)
            report = verify_chain(path)
        assert report.ok, report
        assert [b["line"] for b in report.recorded_breaks] == [5]
        assert report.lines == 6
    lines = path.read_bytes().splitlines()
    lines[1] = lines[1].replace(b'"n":9', b'"n":8')  # a set-aside line changed after
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chain_lines, "BLOCK", 5)
        report = verify_chain(path)
    # the record no longer fits: nothing is set aside, line 3 breaks the chain again
    assert not report.ok and report.first_bad_line == 3 and report.lines == 6

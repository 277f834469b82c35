"""The mark of how far the audit log verified: a process that wrote it holds the newer mark and
writes the file again only every so often, and the check it feeds still verifies every line
appended after it (``proctor.runtime.records.audit_breaks``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.runtime.records import audit_breaks
from proctor.runtime.records.audit import AuditLog
from proctor.runtime.records.audit_breaks import MARK_SUFFIX, refuse_broken_log


def _log(tmp_path: Path) -> tuple[AuditLog, Path]:
    path = tmp_path / "audit.jsonl"
    return AuditLog(path), path


def _mark(path: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads(Path(str(path) + MARK_SUFFIX).read_bytes())
    return doc


def test_a_held_mark_is_written_again_only_every_so_often(tmp_path: Path) -> None:
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    written = _mark(path)
    assert written["bytes"] == path.stat().st_size
    log.emit("two", run_id=None, step_index=None, pad="x" * 100)
    refuse_broken_log(path, None, path.name)
    assert _mark(path) == written  # held: the file is not rewritten for a few lines
    while path.stat().st_size - int(written["bytes"]) < audit_breaks._WRITE_AFTER:  # type: ignore[call-overload]
        log.emit("more", run_id=None, step_index=None, pad="x" * 4000)
    refuse_broken_log(path, None, path.name)
    assert _mark(path)["bytes"] == path.stat().st_size  # far enough: written again
    log.close()


def _head(path: Path) -> dict[str, object]:
    from proctor.runtime.records.chain import line_digest

    lines = path.read_bytes().splitlines(keepends=True)
    return {"lines": len(lines), "last_digest": line_digest(lines[-1].rstrip(b"\n"))}


def test_a_new_anchor_is_held_and_still_checked(tmp_path: Path) -> None:
    # every seal records a new anchor: the mark checked against it is held, not rewritten,
    # and an anchor that does not match the log is refused by this process and by another
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, _head(path), path.name)
    written = _mark(path)
    log.emit("two", run_id=None, step_index=None)
    refuse_broken_log(path, _head(path), path.name)  # a new anchor, checked
    assert _mark(path) == written  # held: the file still names the first anchor
    forged = {**_head(path), "last_digest": "sha256:" + "0" * 64}
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, forged, path.name)
    assert info.value.code == "audit_broken"
    audit_breaks._held.clear()  # another process: it reads the file's older mark
    refuse_broken_log(path, _head(path), path.name)
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, forged, path.name)
    assert info.value.code == "audit_broken"
    log.close()


def test_every_line_after_a_held_mark_is_still_verified(tmp_path: Path) -> None:
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    log.emit("two", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)  # the mark now held reaches past "two"
    log.emit("three", run_id=None, step_index=None)
    log.close()
    lines = path.read_bytes().splitlines(keepends=True)
    cut = lines[2].index(b'"prev":"sha256:') + len(b'"prev":"sha256:')
    forged = lines[2][:cut] + b"0" * 64 + lines[2][cut + 64 :]  # chained to no line
    path.write_bytes(b"".join(lines[:2]) + forged)
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, None, path.name)
    assert info.value.code == "audit_broken" and info.value.details["line"] == 3


def test_a_mark_another_process_wrote_is_read(tmp_path: Path) -> None:
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    log.emit("two", run_id=None, step_index=None)
    log.close()
    # another process rewrote the mark (here: garbage, which costs a whole check)
    Path(str(path) + MARK_SUFFIX).write_bytes(b"{not json")
    refuse_broken_log(path, None, path.name)
    assert _mark(path)["bytes"] == path.stat().st_size  # read it, checked all, wrote anew


def test_a_long_torn_tail_is_read_back_past_its_first_blocks(tmp_path: Path) -> None:
    # the last complete line ends 100 KiB before the end (a torn write): the check reads back
    # block after block to it, and verifies the lines before it
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    log.close()
    size = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(b"x" * (100 << 10))
    refuse_broken_log(path, None, path.name)
    assert _mark(path)["bytes"] == size


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    verify = audit_breaks.verify_bytes

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return verify(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(audit_breaks, "verify_bytes", counted)
    return calls


def test_the_lines_this_process_wrote_since_the_check_are_compared_not_verified_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines past the mark that are byte for byte those this process appended (chained
    to the mark's digest) are not hashed and parsed again: the mark moves on as a full
    verification would move it, and a seal's anchor naming their last line holds."""
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    calls = _spied(monkeypatch)
    for n in range(3):
        log.emit("more", run_id="r", step_index=n, pad="x" * 50)
    refuse_broken_log(path, _head(path), path.name)
    assert calls == []
    held = audit_breaks._held[str(path) + MARK_SUFFIX][0]
    assert held["bytes"] == path.stat().st_size
    assert [held["lines"], held["last_digest"]] == list(_head(path).values())
    assert held["anchor_ok"] == list(_head(path).values())
    log.close()


def test_a_byte_changed_in_this_processs_own_lines_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    log.emit("two", run_id=None, step_index=None, text="hello")
    log.emit("three", run_id=None, step_index=None)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"hello"', b'"hellp"'))  # same length, still JSON
    calls = _spied(monkeypatch)
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, None, path.name)
    assert info.value.code == "audit_broken" and calls == [1]
    path.write_bytes(data)
    refuse_broken_log(path, None, path.name)  # what it wrote is verified in full from now on
    assert calls == [1, 1]
    log.close()


def test_lines_another_writer_added_or_an_earlier_anchor_are_verified_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    calls = _spied(monkeypatch)
    log.emit("two", run_id=None, step_index=None)
    subprocess.run(  # another process's line after this one's
        [sys.executable, "-c", "import sys; from pathlib import Path;"
         " from proctor.runtime.records.audit import AuditLog;"
         " AuditLog(Path(sys.argv[1])).emit('elsewhere', run_id=None, step_index=None)",
         str(path)],
        check=True,
    )  # fmt: skip
    refuse_broken_log(path, None, path.name)
    assert calls == [1]
    log.emit("three", run_id=None, step_index=None)
    earlier = _head(path)
    log.emit("four", run_id=None, step_index=None)
    refuse_broken_log(path, earlier, path.name)  # an anchor that names no last line
    assert calls == [1, 1]
    log.emit("five", run_id=None, step_index=None)
    forged = {**_head(path), "last_digest": "sha256:" + "0" * 64}
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, forged, path.name)
    assert info.value.code == "audit_broken" and calls == [1, 1, 1]
    log.close()

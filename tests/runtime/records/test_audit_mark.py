"""The mark of how far the audit log verified: a process that wrote it holds the newer mark and
writes the file again only every so often, and the check it feeds still verifies every line
appended after it (``proctor.runtime.records.audit_breaks``)."""

from __future__ import annotations

import json
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


def _head_at(path: Path, n: int) -> dict[str, object]:
    from proctor.runtime.records.chain import line_digest

    lines = path.read_bytes().splitlines()
    return {"lines": n, "last_digest": line_digest(lines[n - 1])}


def _starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The line each chain check of the log starts at."""
    seen: list[int] = []
    verify = audit_breaks.verify_bytes

    def spy(data: bytes, anchors: object, **kw: object) -> object:
        seen.append(int(kw.get("first_line", 1)))  # type: ignore[call-overload]
        return verify(data, anchors, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(audit_breaks, "verify_bytes", spy)
    return seen


def test_an_anchor_inside_the_verified_part_is_checked_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # runs sealing out of order: the newest anchor names a line the mark has passed; the
    # line is checked where it is, and the log is not read again from its start
    log, path = _log(tmp_path)
    for n in range(6):
        log.emit(f"e{n}", run_id=None, step_index=None, pad="x" * 300)
    refuse_broken_log(path, _head(path), path.name)  # the mark at line 6
    log.emit("later", run_id=None, step_index=None)
    seen = _starts(monkeypatch)
    for n in (1, 3, 6):
        refuse_broken_log(path, _head_at(path, n), path.name)
    assert seen == [7, 8, 8]  # only the lines after the mark verified, each time
    forged = {**_head_at(path, 3), "last_digest": "sha256:" + "0" * 64}
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, forged, path.name)
    assert info.value.code == "audit_broken" and seen[-1] == 1  # read whole: the report
    log.close()


def test_an_anchor_past_the_reach_read_back_costs_a_whole_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, path = _log(tmp_path)
    log.emit("first", run_id=None, step_index=None)
    while path.stat().st_size < audit_breaks._BACK_MAX + 8192:
        log.emit("more", run_id=None, step_index=None, pad="x" * 8000)
    refuse_broken_log(path, _head(path), path.name)
    seen = _starts(monkeypatch)
    refuse_broken_log(path, _head_at(path, 1), path.name)  # more than 1 MiB back
    near = len(path.read_bytes().splitlines()) - 3
    refuse_broken_log(path, _head_at(path, near), path.name)  # within it
    assert seen[0] == 1 and seen[1] > 1, seen
    log.close()


def test_a_mark_after_a_line_longer_than_a_block_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the marked line is read back whole however long it is (it was cut at its last 4 KiB
    # block, so its digest never matched and every check read the whole log)
    log, path = _log(tmp_path)
    log.emit("short", run_id=None, step_index=None)
    log.emit("long", run_id=None, step_index=None, pad="x" * 10000)
    refuse_broken_log(path, None, path.name)
    log.emit("next", run_id=None, step_index=None)
    seen = _starts(monkeypatch)
    refuse_broken_log(path, None, path.name)
    assert seen == [3]
    log.close()


def test_every_line_inside_the_verified_part_is_found_in_place(tmp_path: Path) -> None:
    # lines short and longer than the blocks read back: each is found, and only its digest holds
    import os

    from proctor.runtime.records.chain import Anchor, line_digest

    log, path = _log(tmp_path)
    for n, size in enumerate((0, 20000, 10, 40000, 5, 70000, 1, 3)):
        log.emit(f"e{n}", run_id=None, step_index=None, pad="x" * size)
    log.close()
    lines = path.read_bytes().splitlines()
    fd = os.open(path, os.O_RDONLY)
    try:
        at = path.stat().st_size
        for n in range(1, len(lines) + 1):
            good = Anchor(n, line_digest(lines[n - 1]), "test")
            bad = Anchor(n, line_digest(lines[n - 2] if n > 1 else b"x"), "test")
            assert audit_breaks._holds_in_place(fd, at, len(lines), good), n
            assert not audit_breaks._holds_in_place(fd, at, len(lines), bad), n
        # the mark's line count off by one: no line is taken for another
        shifted = Anchor(3, line_digest(lines[2]), "test")
        assert not audit_breaks._holds_in_place(fd, at, len(lines) + 1, shifted)
    finally:
        os.close(fd)

"""The mark of how far the audit log verified: a process that wrote it holds the newer mark and
writes the file again only every so often, and the check it feeds still verifies every line
appended after it (``proctor.runtime.records.audit_breaks``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import StoreError
from proctor.runtime.records import audit_breaks, audit_own
from proctor.runtime.records.audit import AuditLog
from proctor.runtime.records.audit_breaks import MARK_SUFFIX, refuse_broken_log
from tests.runtime.records.records_support import append_elsewhere


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


def _spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, note: Any) -> list[Any]:
    """The calls of ``owner.name`` from now on, each as ``note`` notes it from the call's
    arguments (the call itself goes through)."""
    seen: list[Any] = []
    real = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(note(*args, **kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return seen


def _starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The line each chain check of the log starts at."""
    return _spy(
        monkeypatch, audit_breaks, "verify_bytes", lambda *a, **kw: int(kw.get("first_line", 1))
    )


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The check's reads (``os.pread``): their sizes and offsets."""
    return _spy(monkeypatch, audit_breaks.os, "pread", lambda fd, n, at: (n, at))


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
    audit_own.forget(str(path))  # as another process's line: verified, not compared
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
    audit_own.forget(str(path))  # as another process's line: verified, not compared
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


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One ``1`` for each chain check of the log."""
    return _spy(monkeypatch, audit_breaks, "verify_bytes", lambda *a, **kw: 1)


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


def test_lines_another_writer_added_or_a_forged_anchor_are_verified_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    calls = _spied(monkeypatch)
    log.emit("two", run_id=None, step_index=None)
    append_elsewhere(path)  # another process's line after this one's
    refuse_broken_log(path, None, path.name)
    assert calls == [1]
    log.emit("five", run_id=None, step_index=None)
    forged = {**_head(path), "last_digest": "sha256:" + "0" * 64}
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, forged, path.name)
    assert info.value.code == "audit_broken" and calls == [1, 1]
    log.close()


def test_an_earlier_anchor_on_this_processs_own_lines_takes_the_digest_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seal's anchor names its own line; another session of the same process (an MCP
    server's request line) may have written after it before the next run's check. The lines
    past the mark are this process's, byte for byte: the anchor is checked against the digest
    taken when its line was written, not by hashing the lines again. Any other digest for that
    line (or a line before the mark) is still verified in full and refused."""
    log, path = _log(tmp_path)
    other, _ = _log(tmp_path)  # another session's log object in this process
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    calls = _spied(monkeypatch)
    log.emit("seal", run_id="r", step_index=None)
    earlier = _head(path)
    other.emit("mcp_request", run_id=None, step_index=None)
    refuse_broken_log(path, earlier, path.name)
    assert calls == []
    log.emit("seal", run_id="r2", step_index=None)
    earlier = _head(path)
    other.emit("mcp_request", run_id=None, step_index=None)
    log.emit("more", run_id=None, step_index=None)
    forged = {**earlier, "last_digest": "sha256:" + "0" * 64}
    with pytest.raises(StoreError) as info:
        refuse_broken_log(path, forged, path.name)
    assert info.value.code == "audit_broken" and calls == [1]
    log.close()
    other.close()


def test_the_own_lines_of_at_most_a_few_logs_are_kept(tmp_path: Path) -> None:
    # a process writing to many logs (many workspaces) keeps the newest few; a log forgotten
    # is verified in full at its next check, as another process's lines would be
    paths = [str(tmp_path / f"log{n}.jsonl") for n in range(audit_own._LOGS + 1)]
    for path in paths:
        audit_own.wrote(path, 0, "sha256:" + "0" * 64, b"{}\n", "sha256:" + "1" * 64)
    try:
        kept = [p for p in paths if audit_own.vouched(p, 0, "sha256:" + "0" * 64, b"{}\n")]
        assert kept == paths[1:]
    finally:
        for path in paths:
            audit_own.forget(path)


def test_a_check_reads_the_marked_line_and_what_follows_at_once_and_still_sees_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one read from a block before the mark answers the marked line, the lines after it and
    # the last newline; a byte changed in the marked line (same length) is still seen there:
    # the mark is not used and the whole log is verified (and refused)

    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    log.emit("two", run_id=None, step_index=None, text="hello")
    reads = _reads(monkeypatch)
    refuse_broken_log(path, None, path.name)
    assert len(reads) == 1  # the mark's line, the own line after it and the end: one read
    log.emit("three", run_id=None, step_index=None)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"hello"', b'"hellp"', 1))  # the marked line
    audit_own.forget(str(path))
    seen = _starts(monkeypatch)
    with pytest.raises(StoreError) as refused:
        refuse_broken_log(path, None, path.name)
    assert refused.value.code == "audit_broken"
    assert seen == [1]  # the marked line's digest no longer matched: verified from line 1
    log.close()


def _hashed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The lines the check hashes itself (its own line_digest calls)."""
    return _spy(monkeypatch, audit_breaks, "line_digest", lambda line: line)


def test_the_marked_line_this_process_checked_is_compared_not_hashed_and_a_change_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the marked line is the last line of this process's own that the last check took: the
    # next check compares it with the bytes kept (no hash, a read that starts just before
    # it); the same line changed in place (same length, still JSON) is seen and refused

    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    log.emit("two", run_id=None, step_index=None, text="hello")
    refuse_broken_log(path, _head(path), path.name)  # the mark ends at "two", own
    log.emit("three", run_id=None, step_index=None)
    hashed = _hashed(monkeypatch)
    reads = _reads(monkeypatch)
    refuse_broken_log(path, _head(path), path.name)
    lines = path.read_bytes().splitlines(keepends=True)
    assert hashed == []
    assert reads == [(1 + len(lines[1]) + len(lines[2]), len(lines[0]) - 1)]  # from its newline
    log.emit("four", run_id=None, step_index=None)
    refuse_broken_log(path, _head(path), path.name)  # the mark ends at "four"
    log.emit("five", run_id=None, step_index=None)
    data = path.read_bytes()
    assert data.count(b'"event":"four"') == 1
    path.write_bytes(data.replace(b'"event":"four"', b'"event":"foul"'))  # the marked line
    seen = _starts(monkeypatch)
    with pytest.raises(StoreError) as refused:
        refuse_broken_log(path, _head(path), path.name)
    assert refused.value.code == "audit_broken" and refused.value.details["line"] == 5
    assert seen == [1]  # the marked line no longer matched: verified from line 1
    log.close()


def test_a_marked_line_another_process_rewrote_between_two_runs_is_refused(
    tmp_path: Path,
) -> None:
    # the same, by another process: it rewrites this process's marked line in place (same
    # size) between two checks, and re-chains the line after it: still refused
    log, path = _log(tmp_path)
    log.emit("one", run_id=None, step_index=None)
    refuse_broken_log(path, None, path.name)
    log.emit("two", run_id=None, step_index=None, text="hello")
    refuse_broken_log(path, _head(path), path.name)
    log.emit("three", run_id=None, step_index=None)
    anchor = _head(path)
    script = (
        "import sys, hashlib; from pathlib import Path; p = Path(sys.argv[1]);"
        " lines = p.read_bytes().splitlines(keepends=True);"
        " lines[1] = lines[1].replace(b'hello', b'hellp');"
        " old = lines[2].rsplit(b'\"prev\":', 1)[0];"
        " new = b'\"sha256:' + hashlib.sha256(lines[1].rstrip(b'\\n')).hexdigest().encode();"
        " lines[2] = old + b'\"prev\":' + new + b'\"}\\n';"
        " open(p, 'r+b').write(b''.join(lines))"
    )
    size = path.stat().st_size
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    assert path.stat().st_size == size
    with pytest.raises(StoreError) as refused:
        refuse_broken_log(path, anchor, path.name)
    assert refused.value.code == "audit_broken"
    log.close()

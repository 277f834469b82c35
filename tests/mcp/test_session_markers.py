"""The open-run markers of MCP session runs (``.proctor/mcp-sessions/RUN_ID``) are written, read
and removed through the folder's descriptor: a link planted in their place is never followed."""

from __future__ import annotations

import os
from pathlib import Path

from proctor.mcp.session_markers import forget_open, holder_of, mark_open, open_folder

RUN = "ab" * 16


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    return root


def test_a_marker_is_written_whole_and_forgotten(tmp_path: Path) -> None:
    root = _root(tmp_path)
    mark_open(root, RUN, "holder-1")
    folder = root / ".proctor" / "mcp-sessions"
    assert sorted(p.name for p in folder.iterdir()) == [RUN]
    assert (folder / RUN).read_text() == "holder-1"
    forget_open(root, RUN)
    assert list(folder.iterdir()) == []


def test_a_folder_that_is_a_link_is_not_written_through(tmp_path: Path) -> None:
    root = _root(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / ".proctor" / "mcp-sessions").symlink_to(outside)
    mark_open(root, RUN, "holder-1")
    assert list(outside.iterdir()) == []
    assert open_folder(root, make=False) is None


def test_a_marker_that_is_a_link_is_not_read_nor_its_target_removed(tmp_path: Path) -> None:
    root = _root(tmp_path)
    mark_open(root, RUN, "holder-1")
    folder = root / ".proctor" / "mcp-sessions"
    target = tmp_path / "precious"
    target.write_text("keep")
    other = "cd" * 16
    (folder / other).symlink_to(target)
    fd = open_folder(root, make=False)
    assert fd is not None
    try:
        assert holder_of(fd, RUN) == "holder-1"
        assert holder_of(fd, other) is None
    finally:
        os.close(fd)
    forget_open(root, other)  # the link itself goes; what it names stays
    assert target.read_text() == "keep"

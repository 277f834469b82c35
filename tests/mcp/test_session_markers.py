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


def test_a_session_package_is_written_through_descriptors_never_through_a_link(
    tmp_path: Path,
) -> None:
    """Links planted where a session package's folder or files go (``.proctor/<kind>/…``) are
    replaced by proctor's own folder and files: the files they pointed at are unchanged."""
    import pytest

    from proctor.errors import ProctorError
    from proctor.mcp.session_runs import session_package

    root = _root(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text("mine\n")
    (outside / "run.yaml").write_text("mine too\n")
    texts = ("Desc.", "Method.", "Do it.")
    first = session_package(root, "core-tools", "core", ["fs.read"], texts)
    skill = (first / "SKILL.md").read_text()
    # a link at each file, then the package's folder itself a link, then the kind's folder
    for name in ("SKILL.md", "run.yaml"):
        (first / name).unlink()
        (first / name).symlink_to(outside / name)
    assert session_package(root, "core-tools", "core", ["fs.read"], texts) == first
    assert not (first / "SKILL.md").is_symlink() and (first / "SKILL.md").read_text() == skill
    first.rename(tmp_path / "old")
    first.symlink_to(outside, target_is_directory=True)
    session_package(root, "core-tools", "core", ["fs.read"], texts)
    assert not first.is_symlink() and (first / "SKILL.md").read_text() == skill
    kind = root / ".proctor" / "core-tools"
    kind.rename(tmp_path / "old-kind")
    kind.symlink_to(outside, target_is_directory=True)
    session_package(root, "core-tools", "core", ["fs.read"], texts)
    assert not kind.is_symlink() and (first / "run.yaml").is_file()
    assert sorted(p.name for p in outside.iterdir()) == ["SKILL.md", "run.yaml"]
    assert (outside / "SKILL.md").read_text() == "mine\n"
    assert (outside / "run.yaml").read_text() == "mine too\n"
    # .proctor itself no folder of the workspace's: refused with a code, nothing written
    (root / ".proctor").rename(tmp_path / "old-state")
    (root / ".proctor").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ProctorError) as refused:
        session_package(root, "core-tools", "core", ["fs.read"], texts)
    assert refused.value.code == "state_unusable"
    assert sorted(p.name for p in outside.iterdir()) == ["SKILL.md", "run.yaml"]

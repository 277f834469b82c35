"""Descriptor-based opening and resolution: no symlink is followed between the check and the
use, with openat2 and with the portable no-follow walk alike."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.runtime.boundary import fds


@pytest.fixture(params=["openat2", "portable"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    wanted = request.param == "openat2"
    if wanted and not fds.openat2_available():
        pytest.skip("this kernel has no openat2")
    previous = fds.set_openat2(wanted)
    try:
        yield request.param
    finally:
        fds.set_openat2(previous)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "a.txt").write_text("inside\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.txt").write_text("CANARY\n")
    return root


def read(base: Path, inner: str) -> bytes:
    fd = fds.open_below(str(base), inner, os.O_RDONLY)
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def test_the_kernel_here_has_openat2() -> None:
    # the CI machine runs a kernel with openat2: the strong path is the one tested there
    assert fds.openat2_available()


def test_open_below_reaches_a_canonical_path(tree: Path, mode: str) -> None:
    assert read(tree, "src/a.txt") == b"inside\n"
    fd = fds.open_below(str(tree), ".", fds.DIR_FLAGS)
    os.close(fd)


@pytest.mark.parametrize("where", ["folder", "file", "root"])
def test_open_below_never_follows_a_symlink_anywhere(tree: Path, mode: str, where: str) -> None:
    outside = tree.parent / "outside"
    if where == "folder":
        (tree / "src" / "deep").rmdir()
        (tree / "src" / "deep").symlink_to(outside)
        inner, base = "src/deep/a.txt", tree
    elif where == "file":
        (tree / "src" / "link.txt").symlink_to(outside / "a.txt")
        inner, base = "src/link.txt", tree
    else:
        (tree.parent / "alias").symlink_to(tree)
        inner, base = "src/a.txt", tree.parent / "alias"
    with pytest.raises(OSError) as info:
        read(base, inner)
    assert info.value.errno == errno.ELOOP
    assert fds.changed(info.value)
    assert (outside / "a.txt").read_text() == "CANARY\n"


def test_open_below_refuses_dotdot_out_of_its_base(tree: Path) -> None:
    if not fds.openat2_available():
        pytest.skip("RESOLVE_BENEATH needs openat2")
    with pytest.raises(OSError) as info:
        read(tree, "../outside/a.txt")
    assert info.value.errno == errno.EXDEV


def test_walk_follows_links_as_the_kernel_does(tree: Path, mode: str) -> None:
    root = str(tree)
    (tree / "code").symlink_to("src")
    (tree / "abs").symlink_to(tree / "src")
    (tree / "up").symlink_to(tree.parent)
    assert fds.walk(root, ["code", "a.txt"]) == f"{root}/src/a.txt"
    assert fds.walk(root, ["abs", "deep", "..", "a.txt"]) == f"{root}/src/a.txt"
    assert fds.walk(root, ["up", "outside", "a.txt"]) == str(tree.parent / "outside" / "a.txt")
    # a missing name ends the examination: the rest is what would be created
    assert fds.walk(root, ["new", "x", "..", "y"]) == f"{root}/new/y"
    assert fds.walk(root, ["src", "a.txt", "below"]) == f"{root}/src/a.txt/below"


def test_walk_counts_hops(tree: Path, mode: str) -> None:
    (tree / "a").symlink_to("b")
    (tree / "b").symlink_to("a")
    with pytest.raises(fds.SymlinkLoop):
        fds.walk(str(tree), ["a"])


def test_parents_are_made_in_their_folders(tree: Path, mode: str) -> None:
    with fds.make_parents(str(tree), "n1/n2/f.txt") as (dir_fd, name):
        assert name == "f.txt"
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
        os.close(fd)
    assert (tree / "n1" / "n2" / "f.txt").is_file()
    (tree / "n3").symlink_to(tree.parent / "outside")
    with pytest.raises(OSError) as info, fds.make_parents(str(tree), "n3/x/f.txt"):
        pass
    assert info.value.errno == errno.ELOOP
    assert sorted(p.name for p in (tree.parent / "outside").iterdir()) == ["a.txt"]


def _outside_state(tree: Path) -> dict[str, bytes]:
    outside = tree.parent / "outside"
    return {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}


def test_host_side_helpers_see_what_is_below_and_never_through_a_link(
    tree: Path, mode: str
) -> None:
    outside = tree.parent / "outside"
    (tree / "link").symlink_to(outside)
    base = str(tree)
    assert fds.kinds_below(base, "src") == {"deep": 0o040000, "a.txt": 0o100000}
    assert fds.kinds_below(base, ".")["link"] == 0o120000  # the link, not its folder
    assert set(fds.stats_below(base, "src")) == {"deep", "a.txt"}
    assert fds.read_below(base, "src/a.txt", 100) == b"inside\n"
    assert fds.read_below(base, "src/a.txt", 3) == b"insi"  # one more than asked: larger
    assert fds.lstat_below(base, "link").st_mode & 0o170000 == 0o120000
    for helper in (fds.kinds_below, fds.stats_below, fds.lstat_below):
        with pytest.raises(OSError) as caught:
            helper(base, "link/a.txt" if helper is fds.lstat_below else "link")
        assert caught.value.errno in (errno.ELOOP, errno.ENOTDIR)
    with pytest.raises(OSError) as caught:
        fds.read_below(base, "link/a.txt", 100)
    assert caught.value.errno == errno.ELOOP
    for escaping in ("../outside", "src/../../outside", "/etc"):
        with pytest.raises(OSError) as caught:
            fds.kinds_below(base, escaping)
        assert caught.value.errno == errno.EXDEV
    os.mkfifo(tree / "fifo")
    with pytest.raises(OSError) as caught:
        fds.read_below(base, "fifo", 100)  # not a regular file, and the open never blocks
    assert caught.value.errno == errno.EINVAL


def test_remove_below_removes_a_link_by_its_name_and_never_what_it_leads_to(
    tree: Path, mode: str
) -> None:
    outside = tree.parent / "outside"
    before = _outside_state(tree)
    base = str(tree)
    (tree / "src" / "deep" / "out").symlink_to(outside)
    (tree / "src" / "deep" / "f").write_text("x")
    os.link(outside / "a.txt", tree / "src" / "hard")
    fds.remove_below(base, "src/hard")  # a second name: only the name goes
    assert (outside / "a.txt").stat().st_nlink == 1
    (tree / "dir-link").symlink_to(outside)
    fds.remove_below(base, "dir-link")
    assert not os.path.lexists(tree / "dir-link")
    with pytest.raises(FileNotFoundError):
        fds.remove_below(base, "dir-link/a.txt")  # gone: its parent cannot be reached
    (tree / "dir-link").symlink_to(outside)
    with pytest.raises(OSError) as caught:
        fds.remove_below(base, "dir-link/a.txt")  # a link on the way
    assert caught.value.errno == errno.ELOOP
    fds.remove_below(base, "src")  # a folder holding a link: the link goes, not its target
    assert not (tree / "src").exists()
    fds.remove_below(base, "src")  # already gone: no error
    assert _outside_state(tree) == before and (outside / "a.txt").exists()

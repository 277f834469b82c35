"""``real_path`` answers exactly what ``os.path.realpath`` answers, for every shape of path a
containment or cache check asks about, and sees a link swapped in between two calls."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.runtime.boundary.real import real_folder, real_path


def _tree(tmp: Path) -> Path:
    base = tmp / "base"
    (base / "dir" / "sub").mkdir(parents=True)
    (base / "dir" / "file.txt").write_text("x")
    (base / "x (deleted)").write_text("x")
    (base / "outside").mkdir()
    os.symlink("dir", base / "rel_link")
    os.symlink(base / "dir" / "sub", base / "abs_link")
    os.symlink("rel_link", base / "chain")
    os.symlink("missing", base / "dangling")
    os.symlink("loop_b", base / "loop_a")
    os.symlink("loop_a", base / "loop_b")
    os.symlink("../outside", base / "dir" / "up_link")
    return base


SHAPES = [
    "",
    ".",
    "base",
    "base/dir/file.txt",
    "base//dir/./sub/",
    "base/dir/sub/../file.txt",
    "base/rel_link/file.txt",
    "base/abs_link/..",
    "base/chain/sub",
    "base/chain/../outside",
    "base/dir/up_link",
    "base/dangling",
    "base/dangling/more",
    "base/loop_a",
    "base/loop_a/x",
    "base/nothing/here",
    "base/dir/file.txt/",
    "base/dir/file.txt/more",
    "base/x (deleted)",
    "/",
    "/..",
    "a" * 300,
]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_same_answer_as_realpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert real_path(shape) == os.path.realpath(shape)
    absolute = shape if shape.startswith("/") else str(tmp_path / shape)
    assert real_path(absolute) == os.path.realpath(absolute)
    assert real_path(Path(absolute)) == os.path.realpath(Path(absolute))


@pytest.mark.parametrize("shape", SHAPES)
def test_a_real_folder_is_the_real_path_of_a_folder_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    absolute = shape if shape.startswith("/") else str(tmp_path / shape)
    for path in (shape, absolute):
        expected = os.path.realpath(path) if os.path.isdir(path) else None
        assert real_folder(path) == expected, path


def test_a_folder_swapped_for_a_link_or_a_file_is_seen_by_real_folder(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    path = str(base / "dir" / "sub")
    assert real_folder(path) == path
    os.rmdir(path)
    os.symlink(base / "outside", path)
    assert real_folder(path) == str(base / "outside")
    os.unlink(path)
    Path(path).write_text("a file now")
    assert real_folder(path) is None
    os.unlink(path)
    assert real_folder(path) is None


def test_a_nul_is_refused_as_realpath_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        os.path.realpath(f"{tmp_path}/a\0b")
    with pytest.raises(ValueError):
        real_path(f"{tmp_path}/a\0b")


def test_a_folder_swapped_for_a_link_between_two_calls_is_seen(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    path = base / "dir" / "sub"
    assert real_path(path) == str(path)
    (base / "dir" / "sub").rmdir()
    os.symlink(base / "outside", base / "dir" / "sub")
    assert real_path(path) == str(base / "outside") == os.path.realpath(path)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the kernel's answer needs /proc")
def test_an_existing_path_is_answered_by_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _tree(tmp_path)
    expected = os.path.realpath(base / "chain" / "file.txt")

    def no_walk(path: object) -> str:
        raise AssertionError("walked")

    monkeypatch.setattr(os.path, "realpath", no_walk)
    assert real_path(base / "chain" / "file.txt") == expected

"""The bubblewrap lookup along PATH answers as shutil.which does, but never in the process's
current folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from proctor.runtime.boundary.sandbox_setting import find_executable


def _program(folder: Path, name: str = "bwrap", mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    target.write_text("#!/bin/sh\n")
    target.chmod(mode)
    return target


def test_first_executable_regular_file_along_the_path_wins(tmp_path: Path) -> None:
    not_executable = _program(tmp_path / "a", mode=0o644)
    (tmp_path / "b" / "bwrap").mkdir(parents=True)  # a folder of that name is not a program
    first = _program(tmp_path / "c")
    _program(tmp_path / "d")
    search = os.pathsep.join(str(tmp_path / x) for x in ("missing", "a", "b", "c", "d"))
    assert not_executable.exists()
    assert find_executable("bwrap", search) == str(first)
    assert find_executable("bwrap", search) == shutil.which("bwrap", path=search)


def test_nothing_found_is_none(tmp_path: Path) -> None:
    _program(tmp_path / "a", mode=0o600)
    assert find_executable("bwrap", str(tmp_path / "a")) is None
    assert find_executable("bwrap", "") is None


def test_relative_and_empty_entries_are_never_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _program(tmp_path / "here")
    monkeypatch.chdir(tmp_path)
    # shutil.which would find ./here/bwrap through the relative entry; proctor does not.
    assert shutil.which("bwrap", path="here") is not None
    assert find_executable("bwrap", os.pathsep.join(["", "here", "."])) is None

"""Locating and reading a skill package refuses what the file system refuses with a code
(a name too long to look up, a file that cannot be read), never an ``OSError`` traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.errors import UsageError
from proctor.runtime.skills import locate, read_package


def test_a_reference_too_long_for_the_file_system_is_not_found(tmp_path: Path) -> None:
    name = "a" * 300  # past NAME_MAX (255) on every Linux file system
    with pytest.raises(UsageError) as info:
        locate(name, cwd=tmp_path, workspace_root=tmp_path)
    assert info.value.code == "skill_not_found"
    assert "no skill package at" in info.value.message and len(info.value.message) < 300


def test_a_reference_to_the_root_is_labelled_by_its_path(tmp_path: Path) -> None:
    _folder, label, _method = locate("/", cwd=tmp_path, workspace_root=tmp_path)
    assert label == "/"


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_a_package_file_that_cannot_be_read_is_named() -> None:
    # /proc/self/clear_refs is a regular file that only takes writes: reading it fails.
    with pytest.raises(UsageError) as info:
        read_package(Path("/proc/self"), "self")
    assert info.value.code == "package_unreadable"
    assert info.value.message.startswith("self/") and "could not be read" in info.value.message

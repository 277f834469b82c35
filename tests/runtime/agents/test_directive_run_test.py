"""Which runs are a directive's: decided from the real path of the recorded package folder.

A directive run may name credential aliases and the reference kernel's tools, and its writes
are confined, so the answer must follow the file system as it is (a symlink into the directive
packages counts; a sibling folder whose name merely starts the same does not).
"""

from __future__ import annotations

from pathlib import Path

from proctor.runtime.directives import confined_run, is_directive_run


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "ws" / ".proctor"
    (state / "directive-packages" / "writer").mkdir(parents=True)
    return state


def test_a_directive_package_is_a_directive_run(tmp_path: Path) -> None:
    state = _state(tmp_path)
    folder = state / "directive-packages" / "writer"
    assert is_directive_run({"package_folder": str(folder)}, state)
    # a record predating writable_dirs is confined all the same (fail closed)
    assert confined_run({"package_folder": str(folder)}, state)


def test_a_symlink_into_the_directive_packages_counts(tmp_path: Path) -> None:
    state = _state(tmp_path)
    link = tmp_path / "elsewhere"
    link.symlink_to(state / "directive-packages" / "writer")
    assert is_directive_run({"package_folder": str(link)}, state)
    # and a symlinked state folder is resolved too
    other = tmp_path / "state-link"
    other.symlink_to(state)
    assert is_directive_run({"package_folder": str(state / "directive-packages" / "writer")}, other)


def test_a_sibling_with_the_same_prefix_is_not(tmp_path: Path) -> None:
    state = _state(tmp_path)
    sibling = state / "directive-packages-evil" / "writer"
    sibling.mkdir(parents=True)
    assert not is_directive_run({"package_folder": str(sibling)}, state)
    assert not confined_run({"package_folder": str(sibling)}, state)
    assert confined_run({"package_folder": str(sibling), "writable_dirs": ["output"]}, state)


def test_a_changed_link_is_seen_on_the_next_question(tmp_path: Path) -> None:
    state = _state(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    link = tmp_path / "pkg"
    link.symlink_to(plain)
    data = {"package_folder": str(link)}
    assert not is_directive_run(data, state)
    link.unlink()
    link.symlink_to(state / "directive-packages" / "writer")
    assert is_directive_run(data, state)  # nothing is cached across questions


def test_no_folder_is_no_directive_run(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert not is_directive_run({}, state)
    assert not is_directive_run({"package_folder": 3}, state)

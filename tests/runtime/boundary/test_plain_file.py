"""regular_file answers what Path.is_file answers, for every kind of name a settings file's
place can hold (the run start and seal ask it of proctor.toml and config.json every run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.runtime.boundary.egress_allow import load_egress_allow
from proctor.runtime.boundary.plain_file import folder, regular_file
from proctor.runtime.home.config import load_config
from proctor.runtime.records.retention import replay_retain


def _places(tmp_path: Path) -> list[Path]:
    (tmp_path / "file").write_text("x")
    (tmp_path / "folder").mkdir()
    (tmp_path / "to-file").symlink_to(tmp_path / "file")
    (tmp_path / "to-folder").symlink_to(tmp_path / "folder")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    return [
        tmp_path / "file",
        tmp_path / "folder",
        tmp_path / "to-file",
        tmp_path / "to-folder",
        tmp_path / "dangling",
        tmp_path / "loop",
        tmp_path / "fifo",
        tmp_path / "absent",
        tmp_path / "file" / "below",  # a name below a file: ENOTDIR
    ]


def test_regular_file_answers_as_path_is_file(tmp_path: Path) -> None:
    for place in _places(tmp_path):
        assert regular_file(str(place)) is place.is_file(), place.name
    assert regular_file(str(tmp_path / "a\0b")) is False  # Path.is_file: False too


def test_folder_answers_as_path_is_dir(tmp_path: Path) -> None:
    for place in _places(tmp_path):
        assert folder(str(place)) is place.is_dir(), place.name
    assert folder(str(tmp_path / "a\0b")) is False


@pytest.mark.parametrize("kind", ["file", "folder", "link", "dangling"])
def test_settings_readers_see_what_the_name_holds_now(tmp_path: Path, kind: str) -> None:
    """The readers that ask regular_file read a proctor.toml or config.json that is a file (or
    a link to one), and read nothing from a folder or a dangling link of that name."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    toml = '[replay]\nretain = true\n[egress]\nallow = ["example.org"]\n'
    (elsewhere / "settings").write_text(toml)
    (elsewhere / "config").write_text('{"witness": {"urls": ["http://127.0.0.1:9/w"]}}')
    for name, source in (("proctor.toml", "settings"), ("config.json", "config")):
        place = tmp_path / name
        if kind == "file":
            place.write_text((elsewhere / source).read_text())
        elif kind == "folder":
            place.mkdir()
        elif kind == "link":
            place.symlink_to(elsewhere / source)
        else:
            place.symlink_to(elsewhere / "gone")
    readable = kind in ("file", "link")
    assert replay_retain(tmp_path) is readable
    assert load_egress_allow(tmp_path).hosts == (
        frozenset({"example.org"}) if readable else frozenset()
    )
    assert load_config(tmp_path) == (
        {"witness": {"urls": ["http://127.0.0.1:9/w"]}} if readable else {}
    )


def test_the_homes_config_is_read_again_at_every_load(tmp_path: Path) -> None:
    from proctor.runtime.records.witness import witness_settings

    env = {"PROCTOR_HOME": str(tmp_path)}
    assert load_config(tmp_path) == {} and witness_settings(env) == ([], [])
    (tmp_path / "config.json").write_text('{"witness": {"urls": ["http://127.0.0.1:9/w"]}}')
    assert witness_settings(env)[0] == ["http://127.0.0.1:9/w"]
    (tmp_path / "config.json").write_text('{"witness": {"urls": ["http://127.0.0.1:8/x"]}}')
    assert witness_settings(env)[0] == ["http://127.0.0.1:8/x"]
    (tmp_path / "config.json").unlink()
    assert load_config(tmp_path) == {} and witness_settings(env) == ([], [])

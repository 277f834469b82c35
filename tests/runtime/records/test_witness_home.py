"""Witness settings are read from the home the caller's environment names.

A ``Session`` given its own environment (its own ``PROCTOR_HOME``) seals to the witnesses of
that home, not of the home of the process it runs in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.runtime.records.witness import witness_settings

KEY = "ab" * 32


def _home(path: Path, url: str) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"witness": {"urls": [url], "keys": [KEY]}}))
    return path


def test_the_callers_home_is_read_not_the_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = _home(tmp_path / "mine", "http://127.0.0.1:9/mine")
    theirs = _home(tmp_path / "process", "http://127.0.0.1:9/process")
    monkeypatch.setenv("PROCTOR_HOME", str(theirs))
    urls, keys = witness_settings({"PROCTOR_HOME": str(mine)})
    assert urls == ["http://127.0.0.1:9/mine"]
    assert len(keys) == 1


def test_a_home_named_by_home_alone_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    _home(user / ".proctor", "http://127.0.0.1:9/user")
    monkeypatch.setenv("PROCTOR_HOME", str(_home(tmp_path / "process", "http://127.0.0.1:9/p")))
    assert witness_settings({"HOME": str(user)})[0] == ["http://127.0.0.1:9/user"]


def test_the_environment_still_comes_first(tmp_path: Path) -> None:
    mine = _home(tmp_path / "mine", "http://127.0.0.1:9/mine")
    env = {"PROCTOR_HOME": str(mine), "PROCTOR_WITNESS_URLS": "", "PROCTOR_WITNESS_KEYS": ""}
    assert witness_settings(env) == ([], [])

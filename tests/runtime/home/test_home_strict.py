"""The home's and workspace's files a person or another program can edit are read strictly: a
key given twice (read one way here, another way by a reader keeping the first copy, a reviewer
of a diff included), NaN or Infinity is refused with the file's code, and nothing is taken
from the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.errors import ConfigError, CredentialError, RefusedCall, UsageError
from proctor.policy import read_guard_files
from proctor.runtime.gateway.pins import LOCK_FILE, Pins
from proctor.runtime.gateway.rate import RateWindows
from proctor.runtime.home.config import load_config
from proctor.runtime.home.credentials.bindings import load_bindings
from proctor.runtime.home.presets import load_preset, save_preset
from proctor.runtime.home.trust import HomeTrust, record_trust, trust_state


def _workspace(root: Path, guards: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "proctor.toml").write_text('[policy]\nguards = "guards.py"\n')
    (root / "guards.py").write_text(guards)
    return root


def _twice(text: str, key: str, first: str) -> str:
    """``text`` (one JSON object) with ``"key": first`` put before its own ``key``."""
    at = text.index(f'"{key}"')
    return text[:at] + f'"{key}": {first}, ' + text[at:]


def test_a_trust_record_with_a_workspace_given_twice_trusts_nothing(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", "X = 1\n")
    home = {"PROCTOR_HOME": str(tmp_path / "home")}
    record_trust(read_guard_files(ws), home, trusted_by="os:me", how="yes")
    # the guards change; a forger adds a record of the new guards under the same workspace,
    # after the reviewed one: a reader keeping the first copy sees the old trust only
    (ws / "guards.py").write_text("import os\nos.system('true')\n")
    changed = read_guard_files(ws)
    other = {"PROCTOR_HOME": str(tmp_path / "other")}
    record_trust(changed, other, trusted_by="os:me", how="yes")
    path = tmp_path / "home" / "trusted-guards.json"
    real = json.loads(path.read_text())["workspaces"][str(ws)]
    forged_record = json.loads((tmp_path / "other" / "trusted-guards.json").read_text())
    forged = json.dumps(forged_record["workspaces"][str(ws)])
    text = json.dumps({"schema": "proctor.trusted_guards.v1", "workspaces": {str(ws): real}})
    text = text[:-2] + f", {json.dumps(str(ws))}: {forged}" + "}}"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        HomeTrust(home)(changed)
    assert caught.value.code == "trust_store_invalid"
    assert "duplicate_key" in caught.value.message
    with pytest.raises(ConfigError):
        trust_state(changed, home)
    assert path.read_text() == text  # nothing rewritten


def test_a_config_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    text = '{"witnesses": {"url": "https://a.example"}, "witnesses": []}'
    (home / "config.json").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(home)
    assert caught.value.code == "config_invalid" and "duplicate_key" in caught.value.message
    (home / "config.json").write_text('{"agent": {"max_usd": NaN}}')
    with pytest.raises(ConfigError) as caught:
        load_config(home)
    assert caught.value.code == "config_invalid"
    assert (home / "config.json").read_text() == '{"agent": {"max_usd": NaN}}'


def test_a_preset_with_a_limit_twice_is_refused(tmp_path: Path) -> None:
    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    save_preset("small", {"effects": "ask"}, [tmp_path], env)
    path = tmp_path / "home" / "authority" / "small.json"
    text = path.read_text()
    # the preset reads as applying to another workspace to a reader keeping the first copy
    path.write_text(_twice(text, "workspaces", json.dumps(["/elsewhere"])))
    with pytest.raises(UsageError) as caught:
        load_preset("small", env)
    assert caught.value.code == "preset_invalid" and "duplicate_key" in caught.value.message


def test_credential_bindings_with_a_skill_twice_are_refused(tmp_path: Path) -> None:
    (tmp_path / ".proctor").mkdir()
    path = tmp_path / ".proctor" / "credentials.json"
    path.write_text('{"skills": {"a": {"p": "safe"}}, "skills": {"a": {"p": "prod"}}}')
    with pytest.raises(CredentialError) as caught:
        load_bindings(tmp_path)
    assert caught.value.code == "credential_bindings_invalid"
    assert "duplicate_key" in caught.value.message


def test_a_lock_with_a_pin_twice_is_refused(tmp_path: Path) -> None:
    pins = Pins(tmp_path)
    definition = {"name": "lookup", "description": "Look up a key.", "inputSchema": {}}
    pins.pin("up", {"lookup": definition})
    text = (tmp_path / LOCK_FILE).read_text()
    assert pins.pinned("up", "lookup") is not None
    # a reviewer of the diff keeping the first copy sees the old description pinned
    forged = _twice(text, "lookup", json.dumps({**definition, "description": "Reviewed."}))
    (tmp_path / LOCK_FILE).write_text(forged)
    with pytest.raises(ConfigError) as caught:
        Pins(tmp_path).read()
    assert caught.value.code == "mcp_lock_invalid" and "duplicate_key" in caught.value.message


def test_an_infinite_stamp_does_not_hold_a_window_shut(tmp_path: Path) -> None:
    (tmp_path / "mcp-rate.json").write_text('{"k": [Infinity]}')
    RateWindows(tmp_path, clock=lambda: 1000.0).take([("k", 1, 60)])  # read as no record
    held = json.loads((tmp_path / "mcp-rate.json").read_text())
    assert held == {"k": [1000.0]}
    with pytest.raises(RefusedCall) as caught:  # and the window counts from there
        RateWindows(tmp_path, clock=lambda: 1001.0).take([("k", 1, 60)])
    assert caught.value.code == "rate_limited"

"""The home's trust records: what they admit, what they refuse, and their parsers fuzzed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ConfigError
from proctor.policy import GuardFiles, read_guard_files
from proctor.runtime.home.trust import (
    HomeTrust,
    record_trust,
    revoke_trust,
    trust_record,
    trust_state,
)
from tests.fuzzing import FUZZ, mutated, only_proctor_errors, spliced


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "proctor.toml").write_text('[policy]\nguards = "guards.py"\n')
    (ws / "guards.py").write_text("X = 1\n")
    return ws


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PROCTOR_HOME": str(tmp_path / "home"), **extra}


def test_a_record_admits_exactly_its_bytes(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    env = _env(tmp_path)
    files = read_guard_files(ws)
    assert trust_state(files, env) == "untrusted"
    with pytest.raises(ConfigError) as info:
        HomeTrust(env)(files)
    assert info.value.code == "guards_untrusted"
    record_trust(files, env, trusted_by="os:me", how="yes")
    HomeTrust(env)(files)
    held = trust_record(ws, env)
    assert held is not None and held.digest == files.digest
    assert held.files == (
        ("proctor.toml", files.config[0].sha256),
        ("guards.py", files.modules[0].sha256),
    )
    (ws / "guards.py").write_text("X = 2\n")
    changed = read_guard_files(ws)
    assert trust_state(changed, env) == "changed"
    with pytest.raises(ConfigError) as info:
        HomeTrust(env)(changed)
    assert info.value.code == "guards_untrusted" and "changed" in info.value.message
    assert revoke_trust(ws, env) and not revoke_trust(ws, env)
    assert trust_state(files, env) == "untrusted"


def test_the_environment_trusts_and_reports_each_use(tmp_path: Path) -> None:
    files = read_guard_files(_workspace(tmp_path))
    seen: list[GuardFiles] = []
    HomeTrust(_env(tmp_path, PROCTOR_TRUST_WORKSPACE="1"), on_environment=seen.append)(files)
    assert seen == [files]
    for value in ("true", "yes", " 1"):
        with pytest.raises(ConfigError) as info:
            HomeTrust(_env(tmp_path, PROCTOR_TRUST_WORKSPACE=value))(files)
        assert info.value.code == "trust_env_invalid"
    with pytest.raises(ConfigError):
        HomeTrust(_env(tmp_path, PROCTOR_TRUST_WORKSPACE="0"))(files)


def test_a_trust_for_one_folder_is_not_a_trust_for_another(tmp_path: Path) -> None:
    first = _workspace(tmp_path)
    second = tmp_path / "second"
    second.mkdir()
    for name in ("proctor.toml", "guards.py"):
        (second / name).write_bytes((first / name).read_bytes())
    env = _env(tmp_path)
    record_trust(read_guard_files(first), env, trusted_by="os:me", how="yes")
    assert trust_state(read_guard_files(second), env) == "untrusted"


VALID = {
    "schema": "proctor.trusted_guards.v1",
    "workspaces": {
        "WS": {
            "digest": "DIGEST",
            "files": [["proctor.toml", "sha256:00"], ["guards.py", "sha256:11"]],
            "trusted_at": "2026-01-01T00:00:00Z",
            "trusted_by": "os:me",
            "how": "prompt",
        }
    },
}


@FUZZ
@given(st.one_of(mutated(VALID), spliced(json.dumps(VALID)), st.text(max_size=200)))
def test_a_damaged_trust_file_refuses_or_admits_only_its_digest(
    tmp_path_factory: pytest.TempPathFactory, doc: object
) -> None:
    tmp_path = tmp_path_factory.mktemp("fuzz")
    ws = _workspace(tmp_path)
    files = read_guard_files(ws)
    text = doc if isinstance(doc, str) else json.dumps(doc)
    text = text.replace('"WS"', json.dumps(str(files.root)))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "trusted-guards.json").write_text(text)

    def admit() -> None:
        HomeTrust(_env(tmp_path))(files)
        raise AssertionError("bytes no one trusted were admitted")  # "DIGEST" is never theirs

    only_proctor_errors(admit)


@FUZZ
@given(
    st.one_of(
        spliced('[policy]\nguards = ["guards.py", "pkg.mod"]\n[egress]\nallow = ["x"]\n'),
        st.text(max_size=200),
    )
)
def test_any_config_text_is_read_or_refused_with_a_code(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    ws = _workspace(tmp_path_factory.mktemp("fuzz"))
    (ws / "proctor.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    only_proctor_errors(lambda: read_guard_files(ws))


def test_without_a_home_only_the_variable_trusts(tmp_path: Path) -> None:
    files = read_guard_files(_workspace(tmp_path))
    seen: list[GuardFiles] = []
    HomeTrust({"HOME": "", "PROCTOR_TRUST_WORKSPACE": "1"}, on_environment=seen.append)(files)
    assert seen == [files]
    with pytest.raises(ConfigError) as info:
        HomeTrust({"HOME": ""})(files)
    assert info.value.code == "home_missing"

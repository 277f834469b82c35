"""The local signing key: created once at mode 0600, refused when exposed."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from proctor.errors import ConfigError
from proctor.receipts.signing import signer_from_seed
from proctor.runtime.home.keys import load_signer, trusted_local_key
from proctor.runtime.limits import max_receipts_from_env

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


def test_created_on_first_use_with_0600(tmp_path: Path) -> None:
    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    assert trusted_local_key(env) is None
    assert not (tmp_path / "home").exists()  # looking never creates
    first = load_signer(env)
    assert first.created
    path = tmp_path / "home" / "signing_key.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700
    assert first.shown_path == "$PROCTOR_HOME/signing_key.pem"
    again = load_signer(env)
    assert not again.created and again.signer.key_id == first.signer.key_id
    raw = first.signer.public_key.raw
    assert first.signer.key_id == "sha256:" + hashlib.sha256(raw).hexdigest()
    local = trusted_local_key(env)
    assert local is not None and local.key_id == first.signer.key_id


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o644])
def test_exposed_key_is_refused(tmp_path: Path, mode: int) -> None:
    env = {"PROCTOR_HOME": str(tmp_path)}
    load_signer(env)
    path = tmp_path / "signing_key.pem"
    path.chmod(mode)
    before = path.read_bytes()
    with pytest.raises(ConfigError) as info:
        load_signer(env)
    assert info.value.code == "signing_key_exposed"
    assert "chmod 600" in info.value.message
    assert str(tmp_path) not in info.value.message
    assert path.read_bytes() == before  # not replaced by a fresh key


def test_named_key_file(tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, signer_from_seed(b"\x05" * 32).private_pem())
    os.close(fd)
    env = {"PROCTOR_HOME": str(tmp_path / "home"), "PROCTOR_SIGNING_KEY": str(key)}
    local = load_signer(env)
    assert local.signer.key_id == signer_from_seed(b"\x05" * 32).key_id
    assert local.shown_path == "$PROCTOR_SIGNING_KEY"
    assert not (tmp_path / "home").exists()


def test_named_key_file_must_exist(tmp_path: Path) -> None:
    env = {"PROCTOR_SIGNING_KEY": str(tmp_path / "missing.pem")}
    with pytest.raises(ConfigError) as info:
        load_signer(env)
    assert info.value.code == "signing_key_missing"
    assert not (tmp_path / "missing.pem").exists()


def test_garbage_key_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"not a key")
    os.close(fd)
    with pytest.raises(ConfigError) as info:
        load_signer({"PROCTOR_SIGNING_KEY": str(key)})
    assert info.value.code == "signing_key_invalid"


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 16_000_000), ("", 16_000_000), ("1", 1), (" 30002 ", 30_002)]
)
def test_max_receipts(value: str | None, expected: int) -> None:
    env = {} if value is None else {"PROCTOR_MAX_RECEIPTS": value}
    assert max_receipts_from_env(env) == expected


@pytest.mark.parametrize("value", ["0", "16000001", "-1", "1e3", "ten", "٣"])
def test_max_receipts_refused(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        max_receipts_from_env({"PROCTOR_MAX_RECEIPTS": value})
    assert info.value.code == "max_receipts_invalid"


def test_sessions_of_one_process_creating_the_key_at_once_share_one_key(tmp_path: Path) -> None:
    import threading

    from proctor.runtime.home.keys import load_signer

    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    ids: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def load() -> None:
        start.wait()
        try:
            ids.append(load_signer(env).signer.key_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(ids)) == 1


def test_a_missing_key_is_not_replaced_where_receipts_name_another(tmp_path: Path) -> None:
    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    old = signer_from_seed(b"\x07" * 32)
    with pytest.raises(ConfigError) as info:
        load_signer(env, held_key_ids=lambda: [old.key_id])
    assert info.value.code == "signing_key_missing"
    assert info.value.details["key_ids"] == [old.key_id]
    assert not (tmp_path / "home" / "signing_key.pem").exists()
    # kept trusted (what `proctor key rotate` leaves): nothing is lost by a new key
    trusted = tmp_path / "home" / "trusted_keys"
    trusted.mkdir(parents=True)
    (trusted / "old.pem").write_text(old.public_key.pem())
    assert load_signer(env, held_key_ids=lambda: [old.key_id]).created


def test_the_held_keys_are_asked_only_when_the_key_is_missing(tmp_path: Path) -> None:
    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    load_signer(env)
    asked: list[bool] = []
    load_signer(env, held_key_ids=lambda: asked.append(True) or ["sha256:" + "0" * 64])
    assert asked == []


def test_rotation_retires_the_old_key_into_the_trusted_folder(tmp_path: Path) -> None:
    from proctor.runtime.home.keys import retired_keys, rotate_key, trusted_local_keys

    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    first = load_signer(env).signer
    seen: list[str] = []
    rotation = rotate_key(env, before_replace=lambda r: seen.append(r.new.signer.key_id))
    assert rotation.old is not None and rotation.old.key_id == first.key_id
    assert seen == [rotation.new.signer.key_id]
    assert load_signer(env).signer.key_id == rotation.new.signer.key_id
    assert [k.key_id for k in retired_keys(env)] == [first.key_id]
    assert {k.key_id for k in trusted_local_keys(env)} == {first.key_id, rotation.new.signer.key_id}
    key = tmp_path / "home" / "signing_key.pem"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_failing_audit_stops_the_rotation_before_the_key_changes(tmp_path: Path) -> None:
    from proctor.errors import ProctorError
    from proctor.runtime.home.keys import rotate_key

    env = {"PROCTOR_HOME": str(tmp_path / "home")}
    first = load_signer(env).signer

    def refuse(_rotation: object) -> None:
        raise ProctorError("no audit", code="audit_unwritable")

    with pytest.raises(ProctorError):
        rotate_key(env, before_replace=refuse)
    assert load_signer(env).signer.key_id == first.key_id


@pytest.mark.parametrize("home", ["", "not/absolute"])
def test_no_home_is_a_config_error(home: str) -> None:
    from proctor.runtime.home.files import home_dir

    with pytest.raises(ConfigError) as info:
        home_dir({"HOME": home})
    assert info.value.code == "home_missing"

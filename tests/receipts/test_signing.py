"""Ed25519 against Wycheproof (verify) and the RFC 8032 seeds (sign)."""

from __future__ import annotations

import hashlib
import json

import pytest

from proctor.errors import ConfigError
from proctor.receipts.signing import (
    PublicKey,
    key_id_of,
    parse_private_key_pem,
    parse_public_key,
    signer_from_seed,
)
from tests.corpora import corpus_dir


def _groups() -> list[dict]:  # type: ignore[type-arg]
    path = corpus_dir("wycheproof-ed25519") / "testvectors_v1" / "ed25519_test.json"
    return list(json.loads(path.read_text())["testGroups"])


def test_wycheproof_verify_matches_expected() -> None:
    checked = 0
    for group in _groups():
        key = PublicKey.from_raw(bytes.fromhex(group["publicKey"]["pk"]))
        for case in group["tests"]:
            ok = key.verify(bytes.fromhex(case["sig"]), bytes.fromhex(case["msg"]))
            assert ok == (case["result"] == "valid"), f"tcId {case['tcId']}: {case['comment']}"
            checked += 1
    assert checked >= 150


def test_wycheproof_pem_keys_parse_to_the_same_key() -> None:
    for group in _groups():
        assert (
            parse_public_key(group["publicKeyPem"].encode()).raw.hex() == group["publicKey"]["pk"]
        )


def test_rfc8032_seeds_sign_exactly() -> None:
    doc = json.loads((corpus_dir("wycheproof-ed25519") / "rfc8032_derived.json").read_text())
    assert len(doc["vectors"]) == 4
    for vector in doc["vectors"]:
        signer = signer_from_seed(bytes.fromhex(vector["secret_key"]))
        assert signer.public_key.raw.hex() == vector["public_key"]
        message = bytes.fromhex(vector["message"])
        assert signer.sign(message).hex() == vector["signature"]
        assert signer.public_key.verify(signer.sign(message), message)


def test_key_id_is_sha256_of_raw_public_key() -> None:
    signer = signer_from_seed(b"\x01" * 32)
    raw = signer.public_key.raw
    assert signer.key_id == "sha256:" + hashlib.sha256(raw).hexdigest() == key_id_of(raw)


def test_pem_round_trip_and_public_forms() -> None:
    signer = signer_from_seed(b"\x02" * 32)
    again = parse_private_key_pem(signer.private_pem())
    assert again.key_id == signer.key_id
    pub = signer.public_key
    assert parse_public_key(pub.pem().encode()).key_id == pub.key_id
    assert parse_public_key(pub.raw.hex().encode()).key_id == pub.key_id
    doc = json.dumps({"public_key_hex": pub.raw.hex()}).encode()
    assert parse_public_key(doc).key_id == pub.key_id


@pytest.mark.parametrize(
    "data", [b"", b"zz", b"00" * 31, b"{}", b"-----BEGIN PUBLIC KEY-----\nx\n"]
)
def test_bad_public_keys_are_refused(data: bytes) -> None:
    with pytest.raises(ConfigError) as info:
        parse_public_key(data)
    assert info.value.code == "public_key_invalid"


def test_wrong_length_signature_is_false_not_an_error() -> None:
    signer = signer_from_seed(b"\x03" * 32)
    assert not signer.public_key.verify(b"\x00" * 63, b"m")


def _pem_of(key: object, password: bytes | None = None) -> bytes:
    from cryptography.hazmat.primitives import serialization

    encryption = (
        serialization.NoEncryption()
        if password is None
        else serialization.BestAvailableEncryption(password)
    )
    return key.private_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


@pytest.mark.parametrize("seed", [b"\x00" * 32, b"\xff" * 32, bytes(range(32))])
def test_the_plain_key_file_reads_as_cryptography_reads_it(seed: bytes) -> None:
    from cryptography.hazmat.primitives import serialization

    signer = signer_from_seed(seed)
    pem = signer.private_pem()
    theirs = serialization.load_pem_private_key(pem, password=None)
    assert parse_private_key_pem(pem).sign(b"m") == theirs.sign(b"m")  # type: ignore[union-attr, call-arg]
    # Line endings and surrounding space change nothing.
    assert parse_private_key_pem(b"\n" + pem.replace(b"\n", b"\r\n")).key_id == signer.key_id


def test_other_key_files_go_to_the_full_reader_and_are_refused_as_before() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    signer = signer_from_seed(b"\x05" * 32)
    pem = signer.private_pem()
    lines = pem.split(b"\n")
    body = b"".join(lines[1:-2])
    cases = {
        "encrypted": _pem_of(signer._key, b"pw"),
        "not Ed25519": _pem_of(ec.generate_private_key(ec.SECP256R1())),
        "seed cut short": lines[0] + b"\n" + body[:-8] + b"\n" + lines[-2] + b"\n",
        "not base64": pem.replace(body[:4], b"!!!!"),
        "a public key": signer.public_key.pem().encode(),
        "empty": b"",
    }
    for name, data in cases.items():
        with pytest.raises(ConfigError) as info:
            parse_private_key_pem(data)
        assert info.value.code == "signing_key_invalid", name


def _full_reader(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """What parse_public_key gives with the plain PEM path switched off."""
    import proctor.receipts.signing as signing

    with monkeypatch.context() as patched:
        patched.setattr(signing, "_plain_spki_raw", lambda text: None)
        try:
            return "key", parse_public_key(data).raw.hex()
        except ConfigError as exc:
            return exc.code, exc.message


def _either(data: bytes) -> tuple[str, str]:
    try:
        return "key", parse_public_key(data).raw.hex()
    except ConfigError as exc:
        return exc.code, exc.message


@pytest.mark.parametrize("seed", [b"\x00" * 32, b"\xff" * 32, bytes(range(32))])
def test_the_public_pem_proctor_writes_is_read_without_cryptographys_reader(
    seed: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.receipts.signing import _plain_spki_raw

    pub = signer_from_seed(seed).public_key
    pem = pub.pem().encode()
    assert _plain_spki_raw(pem.strip()) == pub.raw
    assert _either(pem) == _full_reader(pem, monkeypatch) == ("key", pub.raw.hex())
    assert parse_public_key(pem) == pub


def test_every_other_public_pem_goes_to_cryptographys_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from proctor.receipts.signing import _plain_spki_raw

    pem = signer_from_seed(b"\x07" * 32).public_key.pem().encode()
    head, body, tail = pem.split(b"\n")[:3]
    odd_bits = body[:-2] + bytes([body[-2] ^ 1]) + body[-1:]  # the unused low bits set
    x25519 = bytes.fromhex("302a300506032b656e032100") + b"\x09" * 32
    import base64

    cases = {
        "CRLF": pem.replace(b"\n", b"\r\n"),
        "split body": b"\n".join([head, body[:30], body[30:], tail]) + b"\n",
        "non-canonical base64": b"\n".join([head, odd_bits, tail]) + b"\n",
        "X25519 key": b"\n".join([head, base64.b64encode(x25519), tail]) + b"\n",
        "two blocks": pem + pem,
        "cut short": b"\n".join([head, body[:-8] + b"====", tail]),
        "a point that is no key": b"\n".join(
            [head, base64.b64encode(x25519[:9] + b"\x70" + x25519[10:12] + b"\xff" * 32), tail]
        ),
    }
    for name, data in cases.items():
        assert _plain_spki_raw(data.strip()) is None or name == "a point that is no key", name
        assert _either(data) == _full_reader(data, monkeypatch), name


def test_a_public_key_behaves_as_the_frozen_dataclass_it_was() -> None:
    a = signer_from_seed(b"\x0b" * 32).public_key
    b = PublicKey.from_raw(a.raw)
    other = signer_from_seed(b"\x0c" * 32).public_key
    assert a == b and a != other and a != a.raw and (a == object()) is False
    assert repr(a) == f"PublicKey(raw={a.raw!r}, key_id={a.key_id!r}, _key={a._key!r})"
    with pytest.raises(AttributeError, match="cannot assign to field 'raw'"):
        a.raw = b"x" * 32  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'key_id'"):
        del a.key_id  # type: ignore[misc]
    with pytest.raises(TypeError):  # its cryptography key is unhashable, as it always was
        hash(a)
    match a:
        case PublicKey(raw, key_id):
            assert (raw, key_id) == (a.raw, a.key_id)

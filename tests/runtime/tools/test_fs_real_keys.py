"""Real private keys, freshly generated with ``cryptography`` in every serialisation it offers,
saved under innocent names: fs.read, fs.search, fs.list and fs.write never let one through.

Keys are generated at test time rather than kept in ``tests/assets`` so the repository never
carries private key material a secret scanner would (rightly) flag.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from proctor.errors import RefusedCall
from tests.runtime.tools.test_fs_support import Env, snapshot
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export


def real_keys() -> dict[str, bytes]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ed_key = ed25519.Ed25519PrivateKey.generate()
    pem, raw = ser.Encoding.PEM, ser.NoEncryption()
    return {
        "rsa-traditional": rsa_key.private_bytes(pem, ser.PrivateFormat.TraditionalOpenSSL, raw),
        "rsa-pkcs8": rsa_key.private_bytes(pem, ser.PrivateFormat.PKCS8, raw),
        "rsa-encrypted": rsa_key.private_bytes(
            pem, ser.PrivateFormat.PKCS8, ser.BestAvailableEncryption(b"pw")
        ),
        "ec-traditional": ec_key.private_bytes(pem, ser.PrivateFormat.TraditionalOpenSSL, raw),
        "ed25519-openssh": ed_key.private_bytes(pem, ser.PrivateFormat.OpenSSH, raw),
        "utf16-le-no-bom": ec_key.private_bytes(pem, ser.PrivateFormat.PKCS8, raw)
        .decode()
        .encode("utf-16-le"),
        "crlf": ec_key.private_bytes(pem, ser.PrivateFormat.PKCS8, raw).replace(b"\n", b"\r\n"),
    }


KEYS = real_keys()


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_real_key_under_an_innocent_name_is_never_read(env: Env, kind: str) -> None:
    env.write("docs/notes.md", b"# notes\n\n" + KEYS[kind])
    before = snapshot(env.root)
    with pytest.raises(RefusedCall) as info:
        env.call("fs.read", {"path": "docs/notes.md"})
    assert info.value.details["rule"] == "private_key_content"
    listed = env.call("fs.list", {"path": "docs"})
    assert listed["entries"] == [] and listed["withheld"] == 1
    found = env.call("fs.search", {"pattern": "notes"})
    assert found["results"] == []
    with pytest.raises(RefusedCall):
        env.call(
            "fs.write",
            {
                "path": "docs/notes.md",
                "content": "x",
                "expected_digest": env.digest("docs/notes.md"),
            },
        )
    assert snapshot(env.root) == before


@pytest.mark.parametrize("kind", ["rsa-pkcs8", "ed25519-openssh"])
def test_a_real_key_is_never_written(env: Env, kind: str) -> None:
    before = snapshot(env.root)
    with pytest.raises(RefusedCall) as info:
        env.call("fs.write", {"path": "a.txt", "content": KEYS[kind].decode(), "create": True})
    assert info.value.code == "sensitive_path"
    assert snapshot(env.root) == before


def test_public_material_is_readable(env: Env) -> None:
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    pub = key.public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo)
    env.write("pub.txt", pub)
    assert env.call("fs.read", {"path": "pub.txt"})["content"] == pub.decode()

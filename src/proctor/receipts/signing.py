"""Ed25519 signing and verification, pure (no files, no clock, no randomness).

A key is identified by its **key id**: ``sha256:`` followed by the lowercase hex SHA-256 of the
32 raw public-key bytes (RFC 8032 encoding, the bytes ``Ed25519PublicKey.public_bytes(Raw,
Raw)`` returns). Nothing else (no PEM, no DER header) enters the digest, so any tool that holds
the raw key can recompute the id.

Creating a key (randomness) and reading key files (I/O) live in :mod:`proctor.runtime.home.keys`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError
from proctor.receipts.canonical import digest_bytes

__all__ = [
    "PublicKey",
    "Signer",
    "key_id_of",
    "parse_private_key_pem",
    "parse_public_key",
    "signer_from_seed",
]


def key_id_of(raw_public_key: bytes) -> str:
    """The key id: ``sha256:<hex>`` of the 32 raw public-key bytes."""
    return digest_bytes(raw_public_key)


@dataclass(frozen=True, slots=True)
class PublicKey:
    """An Ed25519 public key with its id; verifies signatures."""

    raw: bytes
    key_id: str
    _key: Ed25519PublicKey

    @classmethod
    def from_raw(cls, raw: bytes) -> PublicKey:
        """A public key from its 32 raw bytes.

        Raises:
            ConfigError: (code ``public_key_invalid``) not 32 bytes or not a valid point.
        """
        if len(raw) != 32:
            raise ConfigError(
                f"an Ed25519 public key is 32 bytes, not {len(raw)}", code="public_key_invalid"
            )
        try:
            key = Ed25519PublicKey.from_public_bytes(raw)
        except ValueError as exc:
            raise ConfigError("not a valid Ed25519 public key", code="public_key_invalid") from exc
        return cls(raw=bytes(raw), key_id=key_id_of(raw), _key=key)

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True when ``signature`` is this key's valid Ed25519 signature of ``message``."""
        if len(signature) != 64:
            return False
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def pem(self) -> str:
        """The key as a PEM ``PUBLIC KEY`` (SubjectPublicKeyInfo), as OpenSSL reads it."""
        from cryptography.hazmat.primitives import serialization

        return self._key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode("ascii")


class Signer:
    """An Ed25519 private key that signs; ``key_id`` names its public half."""

    __slots__ = ("_key", "public_key")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_key = PublicKey.from_raw(key.public_key().public_bytes_raw())

    @property
    def key_id(self) -> str:
        """The key id of the public half (see the module docstring)."""
        return self.public_key.key_id

    def sign(self, message: bytes) -> bytes:
        """The 64-byte deterministic Ed25519 signature of ``message``."""
        return self._key.sign(message)

    def private_pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM (what the key file holds)."""
        from cryptography.hazmat.primitives import serialization

        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def signer_from_seed(seed: bytes) -> Signer:
    """A signer from a 32-byte RFC 8032 secret seed.

    Raises:
        ConfigError: (code ``signing_key_invalid``) the seed is not 32 bytes.
    """
    if len(seed) != 32:
        raise ConfigError("an Ed25519 seed is 32 bytes", code="signing_key_invalid")
    return Signer(Ed25519PrivateKey.from_private_bytes(seed))


def parse_private_key_pem(data: bytes) -> Signer:
    """A signer from an unencrypted PKCS#8 PEM Ed25519 private key.

    The form proctor writes (RFC 8410's 48-byte ``PrivateKeyInfo``, nothing after the seed) is
    read here directly; any other form goes to ``cryptography``'s PEM reader, which accepts or
    refuses it. (Its serialization module costs more to import than the rest of a run's key
    handling.)

    Raises:
        ConfigError: (code ``signing_key_invalid``) not a PEM Ed25519 private key.
    """
    seed = _plain_pkcs8_seed(data)
    if seed is not None:
        return signer_from_seed(seed)
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            "the signing key file is not an unencrypted PEM Ed25519 private key",
            code="signing_key_invalid",
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(
            "the signing key file holds a key that is not Ed25519", code="signing_key_invalid"
        )
    return Signer(key)


#: DER of RFC 8410's PrivateKeyInfo for Ed25519 up to the 32 seed bytes: SEQUENCE (46 bytes)
#: { INTEGER 0, SEQUENCE { OID 1.3.101.112 }, OCTET STRING { OCTET STRING (32 bytes) } }.
_PKCS8_ED25519_HEAD = bytes.fromhex("302e020100300506032b657004220420")
_PEM_BEGIN = b"-----BEGIN PRIVATE KEY-----"
_PEM_END = b"-----END PRIVATE KEY-----"


def _plain_pkcs8_seed(data: bytes) -> bytes | None:
    """The 32-byte seed of a PEM holding exactly one plain PKCS#8 Ed25519 key, else None
    (anything else, however close, is left to the full reader)."""
    text = data.strip()
    if not (text.startswith(_PEM_BEGIN) and text.endswith(_PEM_END)):
        return None
    body = text[len(_PEM_BEGIN) : -len(_PEM_END)]
    try:
        der = base64.b64decode(b"".join(body.split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(der) != 48 or not der.startswith(_PKCS8_ED25519_HEAD):
        return None
    return der[len(_PKCS8_ED25519_HEAD) :]


#: DER of RFC 8410's SubjectPublicKeyInfo for Ed25519 up to the 32 key bytes: SEQUENCE (42
#: bytes) { SEQUENCE { OID 1.3.101.112 }, BIT STRING (33 bytes, no unused bits) }.
_SPKI_ED25519_HEAD = bytes.fromhex("302a300506032b6570032100")
_PEM_PUBLIC_BEGIN = b"-----BEGIN PUBLIC KEY-----"
_PEM_PUBLIC_END = b"-----END PUBLIC KEY-----"


def _plain_spki_raw(text: bytes) -> bytes | None:
    """The 32 raw key bytes of a stripped PEM that is exactly what :meth:`PublicKey.pem` writes
    (one line of base64 between the two markers), else None: anything else, however close, is
    left to ``cryptography``'s PEM reader, whose serialization module costs more to import than
    the rest of ``proctor verify``'s start-up but the interpreter."""
    if not (text.startswith(_PEM_PUBLIC_BEGIN) and text.endswith(_PEM_PUBLIC_END)):
        return None
    body = text[len(_PEM_PUBLIC_BEGIN) : -len(_PEM_PUBLIC_END)]
    try:
        der = binascii.a2b_base64(body.strip(), strict_mode=True)
    except binascii.Error:
        return None
    if len(der) != 44 or not der.startswith(_SPKI_ED25519_HEAD):
        return None
    if body != b"\n" + binascii.b2a_base64(der, newline=False) + b"\n":
        return None  # not the one form the key is written in
    return der[len(_SPKI_ED25519_HEAD) :]


def parse_public_key(data: bytes) -> PublicKey:
    """A public key from any form proctor prints: PEM ``PUBLIC KEY``, the JSON document of
    ``proctor key show --json`` (its ``public_key_hex``), or 64 hex digits. The PEM form
    :meth:`PublicKey.pem` writes is read here directly; any other goes to ``cryptography``.

    Raises:
        ConfigError: (code ``public_key_invalid``) none of those forms, or not Ed25519.
    """
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        raw = _plain_spki_raw(text)
        if raw is not None:
            with contextlib.suppress(ConfigError):  # the full reader says why it is refused
                return PublicKey.from_raw(raw)
        from cryptography.hazmat.primitives import serialization

        try:
            key = serialization.load_pem_public_key(text)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                "the public key PEM could not be read", code="public_key_invalid"
            ) from exc
        if not isinstance(key, Ed25519PublicKey):
            raise ConfigError("the public key is not Ed25519", code="public_key_invalid")
        return PublicKey.from_raw(key.public_bytes_raw())
    if text.startswith(b"{"):
        try:
            doc = json.loads(text)
            hexed = doc["public_key_hex"]
            raw = bytes.fromhex(hexed)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                "the public key document has no valid public_key_hex", code="public_key_invalid"
            ) from exc
        return PublicKey.from_raw(raw)
    try:
        raw = binascii.unhexlify(text)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(
            "the public key is neither PEM, a proctor key document nor 64 hex digits",
            code="public_key_invalid",
        ) from exc
    return PublicKey.from_raw(raw)


def b64(data: bytes) -> str:
    """Standard base64 with padding (RFC 4648 section 4)."""
    return base64.b64encode(data).decode("ascii")

"""The signed manifest of a published version, and its verification (pure: no I/O).

A publisher signs a **statement** ``{schema, name, version, content_digest, publisher_key}``
(canonical JSON, Ed25519), with ``kind: connector`` added for a connector package (a skill's
statement has no ``kind``, so every skill signature made before connectors were packaged still
verifies, and a signature over one kind never verifies as the other). The registry accepts it
only from a key of the name's namespace, then countersigns the **manifest**: the statement's
fields, the publisher's signature, the namespace, the tier it gives the publisher, and its own
key; ``registry_signature`` signs the
canonical manifest without that field. The installed copy is kept as ``signature.json``.

:func:`verify_manifest` refuses a manifest unless both signatures verify, the registry key is
one the caller trusts, and the name lies in the namespace the registry vouched for.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

from proctor.contracts import json_strict
from proctor.contracts.values import dataclass
from proctor.errors import ParseError, ProctorError, UsageError
from proctor.receipts.canonical import canonical, is_digest
from proctor.receipts.signing import PublicKey, Signer, b64
from proctor.runtime.packages.package import check_version

__all__ = [
    "KINDS",
    "TIERS",
    "Manifest",
    "RegistryRefused",
    "check_name",
    "countersign",
    "parse_manifest",
    "sign_statement",
    "statement",
    "tier_rank",
    "verify_manifest",
]

TIERS = ("community", "verified", "first_party")
KINDS = ("skill", "connector")
_SEGMENT = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_STATEMENT_SCHEMA = "proctor.publish_statement.v1"
_MANIFEST_SCHEMA = "proctor.registry_manifest.v1"
_FIELDS = frozenset(
    {
        "schema",
        "name",
        "version",
        "content_digest",
        "publisher_key",
        "publisher_signature",
        "namespace",
        "tier",
        "registry_key",
        "registry_signature",
    }
)


class RegistryRefused(ProctorError):
    """The registry or the install refused a package, a manifest or a request."""

    code = "registry_refused"


def check_name(name: object) -> tuple[str, str]:
    """``(publisher, skill)`` of a name ``<publisher>/<skill>`` (lowercase, digits, ``-``).

    Raises:
        UsageError: (code ``package_name_invalid``) any other shape.
    """
    parts = name.split("/") if isinstance(name, str) else []
    if len(parts) != 2 or not all(_SEGMENT.fullmatch(part) for part in parts):
        raise UsageError(
            f"package name {str(name)[:80]!r} is not <publisher>/<name> (each 1-63 lowercase "
            "letters, digits or '-')",
            code="package_name_invalid",
        )
    return parts[0], parts[1]


def tier_rank(tier: str) -> int:
    """The rank of a tier (``community`` < ``verified`` < ``first_party``).

    Raises:
        UsageError: (code ``tier_invalid``) not one of the three tiers.
    """
    if tier not in TIERS:
        raise UsageError(
            f"tier {tier[:40]!r} is not one of {', '.join(TIERS)}", code="tier_invalid"
        )
    return TIERS.index(tier)


def _kind_field(kind: str) -> dict[str, str]:
    if kind not in KINDS:
        raise UsageError(f"package kind {kind[:40]!r} is not a skill or a connector",
                         code="package_kind_invalid")  # fmt: skip
    return {} if kind == "skill" else {"kind": kind}


def statement(
    name: str, version: str, content_digest: str, publisher_key: str, kind: str = "skill"
) -> dict[str, str]:
    """The publish statement a publisher signs (``publisher_key`` is 64 hex digits)."""
    return {
        "schema": _STATEMENT_SCHEMA,
        **_kind_field(kind),
        "name": name,
        "version": version,
        "content_digest": content_digest,
        "publisher_key": publisher_key,
    }


def sign_statement(
    signer: Signer, name: str, version: str, content_digest: str, kind: str = "skill"
) -> dict[str, str]:
    """The statement and its base64 ``signature`` by ``signer``."""
    body = statement(name, version, content_digest, signer.public_key.raw.hex(), kind)
    return {**body, "signature": b64(signer.sign(canonical(body)))}


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed manifest (shape checked, signatures not yet); ``document`` is what was read."""

    name: str
    version: str
    content_digest: str
    publisher_key: PublicKey
    namespace: str
    tier: str
    registry_key: PublicKey
    document: Mapping[str, Any]
    kind: str = "skill"
    """What the publisher signed it as: ``skill`` or ``connector``."""

    @property
    def publisher(self) -> str:
        """The ``<publisher>`` part of the name."""
        return self.name.split("/")[0]


def _unb64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise RegistryRefused(f"the manifest's {what} is not base64 text", code="manifest_invalid")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RegistryRefused(
            f"the manifest's {what} is not base64", code="manifest_invalid"
        ) from exc


def _key(text: object, what: str) -> PublicKey:
    try:
        if not isinstance(text, str) or len(text) != 64:
            raise ValueError(what)
        return PublicKey.from_raw(bytes.fromhex(text))
    except (ValueError, ProctorError) as exc:
        raise RegistryRefused(
            f"the manifest's {what} is not a 64-hex-digit Ed25519 key", code="manifest_invalid"
        ) from exc


def parse_manifest(data: bytes | Mapping[str, Any]) -> Manifest:
    """A manifest from its JSON bytes or mapping, its shape checked.

    Raises:
        RegistryRefused: (code ``manifest_invalid``) not JSON, a missing or unknown field, a
            field of the wrong shape.
    """
    doc: Any = data
    if isinstance(data, bytes):
        try:
            # strict: a field given twice would name one package here and another elsewhere
            doc = json_strict.loads(data, source="the manifest")
        except ParseError as exc:
            raise RegistryRefused(
                f"the manifest is not strict JSON ({exc.code})", code="manifest_invalid"
            ) from exc
    if not isinstance(doc, dict) or set(doc) - {"kind"} != _FIELDS:
        raise RegistryRefused(
            f"a manifest is an object with exactly the fields {', '.join(sorted(_FIELDS))}",
            code="manifest_invalid",
        )
    if "kind" in doc and doc["kind"] != "connector":
        raise RegistryRefused(
            "a manifest's kind, when present, is connector", code="manifest_invalid"
        )
    if doc["schema"] != _MANIFEST_SCHEMA:
        raise RegistryRefused(
            f"the manifest's schema is not {_MANIFEST_SCHEMA}", code="manifest_invalid"
        )
    try:
        check_name(doc["name"])
        version = check_version(doc["version"])
        tier_rank(str(doc["tier"]))
    except UsageError as exc:
        raise RegistryRefused(f"the manifest is invalid: {exc}", code="manifest_invalid") from exc
    if not is_digest(doc["content_digest"]) or not isinstance(doc["namespace"], str):
        raise RegistryRefused(
            "the manifest's content_digest or namespace is malformed", code="manifest_invalid"
        )
    _unb64(doc["publisher_signature"], "publisher_signature")
    _unb64(doc["registry_signature"], "registry_signature")
    return Manifest(
        name=doc["name"],
        version=version,
        content_digest=doc["content_digest"],
        publisher_key=_key(doc["publisher_key"], "publisher_key"),
        namespace=doc["namespace"],
        tier=doc["tier"],
        registry_key=_key(doc["registry_key"], "registry_key"),
        document=dict(doc),
        kind=str(doc.get("kind", "skill")),
    )


def countersign(
    registry: Signer, signed_statement: Mapping[str, str], *, namespace: str, tier: str
) -> dict[str, str]:
    """The registry's manifest over a statement it accepted (it has checked the key)."""
    body = {
        "schema": _MANIFEST_SCHEMA,
        **_kind_field(signed_statement.get("kind", "skill")),
        "name": signed_statement["name"],
        "version": signed_statement["version"],
        "content_digest": signed_statement["content_digest"],
        "publisher_key": signed_statement["publisher_key"],
        "publisher_signature": signed_statement["signature"],
        "namespace": namespace,
        "tier": tier,
        "registry_key": registry.public_key.raw.hex(),
    }
    return {**body, "registry_signature": b64(registry.sign(canonical(body)))}


def verify_manifest(data: bytes | Mapping[str, Any], trusted: Iterable[PublicKey]) -> Manifest:
    """A manifest whose two signatures verify under a registry key in ``trusted``.

    Raises:
        RegistryRefused: ``manifest_invalid`` (shape), ``registry_untrusted`` (its registry key
            is not trusted here), ``signature_invalid`` (either signature fails),
            ``namespace_mismatch`` (the name is outside the namespace the registry vouched for).
    """
    manifest = parse_manifest(data)
    doc = manifest.document
    if manifest.registry_key.key_id not in {key.key_id for key in trusted}:
        raise RegistryRefused(
            f"the manifest of {manifest.name}@{manifest.version} is signed by registry key "
            f"{manifest.registry_key.key_id[:19]}…, which is not trusted here (add it with "
            "`proctor registry trust KEY`)",
            code="registry_untrusted",
        )
    body = {k: v for k, v in doc.items() if k != "registry_signature"}
    if not manifest.registry_key.verify(_unb64(doc["registry_signature"], "sig"), canonical(body)):
        raise RegistryRefused(
            f"the registry's signature on {manifest.name}@{manifest.version} does not verify",
            code="signature_invalid",
        )
    said = statement(
        manifest.name,
        manifest.version,
        manifest.content_digest,
        manifest.publisher_key.raw.hex(),
        manifest.kind,
    )
    if not manifest.publisher_key.verify(
        _unb64(doc["publisher_signature"], "sig"), canonical(said)
    ):
        raise RegistryRefused(
            f"the publisher's signature on {manifest.name}@{manifest.version} does not verify",
            code="signature_invalid",
        )
    if manifest.namespace != manifest.publisher:
        raise RegistryRefused(
            f"{manifest.name} is outside the namespace {manifest.namespace[:64]!r} its "
            "publisher key was vouched for",
            code="namespace_mismatch",
        )
    return manifest

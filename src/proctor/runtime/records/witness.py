"""Witnesses: copies of every seal kept outside the workspace, countersigned by their holders.

At every seal (when witnesses are configured) the run's receipt id and the audit log's head
just after its ``run_sealed`` line are sent, signed by the workspace's receipt key, to each
witness (``proctor witness serve``, :mod:`.witness_server`), which appends them to its own
hash-chained log and countersigns them with its own key. Whoever can write ``.proctor/`` can
delete both the receipts and the run store's anchor; they cannot change what the witnesses hold.
``proctor audit verify --witnesses`` fetches the witnessed seals of this workspace, checks each
countersignature against the trusted witness keys and checks the log against every witnessed
head as an anchor (a cut, emptied or re-chained log breaks one), and that every witnessed run
receipt is still in the receipt store.

Configuration: ``PROCTOR_WITNESS_URLS`` (comma-separated) or ``witness.urls`` in the home's
``config.json``; the trusted witness public keys (64 hex digits, raw Ed25519) in
``PROCTOR_WITNESS_KEYS`` or ``witness.keys``. Nothing is sent, and nothing read, without URLs.

A seal never fails because a witness cannot be reached: the run records how many witnesses took
it (``data.witnesses``) and ``proctor audit verify --witnesses`` names what is missing.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.errors import ConfigError, StoreError
from proctor.receipts.canonical import canonical
from proctor.receipts.signing import PublicKey, Signer
from proctor.runtime.home.config import load_config
from proctor.runtime.home.files import home_dir
from proctor.runtime.records.chain import Anchor

__all__ = [
    "CLAIM_SCHEMA",
    "ENTRY_SCHEMA",
    "WitnessedSeal",
    "claim_of",
    "entry_body",
    "fetch_seals",
    "seal_to_witnesses",
    "send_seal",
    "witness_settings",
    "workspace_id",
]

CLAIM_SCHEMA = "proctor.witness_claim.v1"
ENTRY_SCHEMA = "proctor.witness_entry.v1"
TIMEOUT_S = 5.0


def workspace_id(root: Path) -> str:
    """The id witnesses file a workspace's seals under: ``sha256:`` of its real path (the path
    itself never leaves the machine)."""
    return "sha256:" + hashlib.sha256(str(root).encode("utf-8")).hexdigest()


def witness_settings(
    environ: Mapping[str, str], home: Path | None = None
) -> tuple[list[str], list[PublicKey]]:
    """The witness URLs and trusted witness keys (environment first, then ``config.json``).

    Raises:
        ConfigError: (``witness_config_invalid``) a URL that is not http(s), a key that is not
            64 hex digits of an Ed25519 key.
    """
    urls_text = environ.get("PROCTOR_WITNESS_URLS")
    keys_text = environ.get("PROCTOR_WITNESS_KEYS")
    section: Mapping[str, Any] = {}
    if urls_text is None or keys_text is None:
        if home is None:  # the caller's environment names the home, not this process's
            try:
                home = home_dir(environ)[0]
            except ConfigError:
                home = None
        found = {} if home is None else load_config(home).get("witness")
        section = found if isinstance(found, Mapping) else {}
    urls = (
        [u.strip() for u in urls_text.split(",") if u.strip()]
        if urls_text is not None
        else list(section.get("urls") or [])
    )
    keys = (
        [k.strip() for k in keys_text.split(",") if k.strip()]
        if keys_text is not None
        else list(section.get("keys") or [])
    )
    for url in urls:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(
                "a witness URL is http(s)://HOST[:PORT]", code="witness_config_invalid"
            )
    trusted = []
    for key in keys:
        try:
            trusted.append(PublicKey.from_raw(bytes.fromhex(str(key))))
        except (ValueError, ConfigError) as exc:
            raise ConfigError(
                "a witness key is the 64 hex digits of its raw Ed25519 public key",
                code="witness_config_invalid",
            ) from exc
    return [u.rstrip("/") for u in urls], trusted


def claim_of(
    signer: Signer, workspace: str, run_id: str, receipt_id: str, head: Mapping[str, Any]
) -> dict[str, Any]:
    """A seal as sent to witnesses: the claim and the workspace key's signature of it."""
    claim = {
        "schema": CLAIM_SCHEMA,
        "workspace": workspace,
        "public_key": signer.public_key.raw.hex(),
        "run_id": run_id,
        "receipt_id": receipt_id,
        "audit_head": {"lines": int(head["lines"]), "last_digest": head["last_digest"]},
    }
    signature = base64.b64encode(signer.sign(canonical(claim))).decode("ascii")
    return {"claim": claim, "signature": signature}


def entry_body(entry: Mapping[str, Any]) -> bytes:
    """The bytes a witness signs of an entry: canonical JSON without its own signature."""
    return canonical({k: v for k, v in entry.items() if k not in ("signature", "witness_key_id")})


def send_seal(urls: list[str], signed_claim: Mapping[str, Any]) -> int:
    """Send one seal to every witness; how many took it (never raises: a seal goes on)."""
    import httpx

    took = 0
    for url in urls:
        try:
            answer = httpx.post(f"{url}/v1/claims", json=dict(signed_claim), timeout=TIMEOUT_S)
            took += 1 if answer.status_code == 200 else 0
        except httpx.HTTPError:
            continue
    return took


class WitnessedSeal:
    """One seal a witness holds, its countersignature checked."""

    __slots__ = ("anchor", "receipt_id", "run_id", "seq", "url")

    def __init__(self, url: str, entry: Mapping[str, Any]) -> None:
        claim = entry["claim"]
        head = claim["audit_head"]
        self.url = url
        self.seq = int(entry["seq"])
        self.run_id = str(claim["run_id"])
        self.receipt_id = str(claim["receipt_id"])
        self.anchor = Anchor(
            int(head["lines"]),
            str(head["last_digest"]),
            f"the witness at {url} (seal {self.seq}, run {self.run_id})",
        )


def fetch_seals(
    urls: list[str], trusted: list[PublicKey], workspace: str, key_ids: set[str]
) -> list[WitnessedSeal]:
    """Every seal of ``workspace`` the witnesses hold, each countersignature checked.

    Raises:
        ConfigError: (``witness_key_missing``) no trusted witness key is configured.
        StoreError: ``witness_unreachable`` (a witness did not answer),
            ``witness_signature_invalid`` (an entry not signed by a trusted witness key, or
            malformed: a witness that lies or was tampered with).
    """
    import httpx

    if not trusted:
        raise ConfigError(
            "no witness key is trusted: set PROCTOR_WITNESS_KEYS (or witness.keys in the"
            " home's config.json) to the keys `proctor witness serve` prints",
            code="witness_key_missing",
        )
    by_id = {k.key_id: k for k in trusted}
    out: list[WitnessedSeal] = []
    for url in urls:
        try:
            answer = httpx.get(
                f"{url}/v1/claims", params={"workspace": workspace}, timeout=TIMEOUT_S * 4
            )
            answer.raise_for_status()
            entries = answer.json()["entries"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"the witness at {url} could not be read ({type(exc).__name__})",
                code="witness_unreachable",
            ) from exc
        for entry in entries if isinstance(entries, list) else []:
            try:
                key = by_id.get(entry["witness_key_id"])
                good = key is not None and key.verify(
                    base64.b64decode(entry["signature"], validate=True), entry_body(entry)
                )
                claim = entry["claim"]
                seal = WitnessedSeal(url, entry)
            except (KeyError, TypeError, ValueError) as exc:
                raise _lying(url) from exc
            if not good or claim.get("workspace") != workspace:
                raise _lying(url)
            if PublicKey.from_raw(bytes.fromhex(claim["public_key"])).key_id in key_ids:
                out.append(seal)
    return out


def _lying(url: str) -> StoreError:
    return StoreError(
        f"the witness at {url} gave an entry no trusted witness key signed",
        code="witness_signature_invalid",
    )


def seal_to_witnesses(
    environ: Mapping[str, str],
    signer: Signer,
    root: Path,
    run_id: str,
    receipt_id: str,
    head: Mapping[str, Any] | None,
) -> dict[str, int] | None:
    """Send a seal to the configured witnesses: ``{"witnesses", "took"}``, or ``None`` when
    none is configured (nothing is sent). Never raises for a witness that cannot be reached.

    Raises:
        ConfigError: (``witness_config_invalid``) the configuration is malformed.
    """
    if head is None:
        return None
    urls, _keys = witness_settings(environ)
    if not urls:
        return None
    claim = claim_of(signer, workspace_id(root), run_id, receipt_id, head)
    return {"witnesses": len(urls), "took": send_seal(urls, claim)}

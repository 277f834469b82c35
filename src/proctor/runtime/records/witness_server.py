"""The witness service (``proctor witness serve``): an append-only, countersigning copy of
seals sent by workspaces (see :mod:`.witness`).

Its folder holds ``witness_key.pem`` (its own Ed25519 key, made on first start, mode 0600) and
``entries.jsonl``: one entry a line, ``{schema, seq, claim, claim_signature, received_at,
prev, witness_key_id, signature}``, ``prev`` the SHA-256 of the line before (hash-chained like
the audit log), ``signature`` the witness key's over the entry without its two key fields.
Nothing is ever rewritten or removed.

HTTP (JSON): ``POST /v1/claims`` takes ``{claim, signature}`` and answers the entry it
appended; it refuses (400) a claim that is not ``proctor.witness_claim.v1``, whose signature is
not its own key's, or that is over 16 KiB, and a body that is not strict JSON (a key given
twice, NaN, nesting too deep: ``{"error": "claim_invalid", "why": CODE}``).
``GET /v1/claims?workspace=ID`` lists a workspace's entries; ``GET /v1/key`` the witness's
public key.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from proctor.contracts import json_strict
from proctor.errors import ConfigError, ParseError
from proctor.receipts.canonical import canonical, digest_bytes
from proctor.receipts.signing import PublicKey, Signer, parse_private_key_pem
from proctor.runtime.records.chain import GENESIS
from proctor.runtime.records.witness import CLAIM_SCHEMA, ENTRY_SCHEMA, entry_body

__all__ = ["WitnessLog", "serve_witness"]

MAX_CLAIM_BYTES = 16 * 1024
_CLAIM_KEYS = {"schema", "workspace", "public_key", "run_id", "receipt_id", "audit_head"}


def _load_key(folder: Path) -> Signer:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = folder / "witness_key.pem"
    if not path.exists():
        signer = Signer(Ed25519PrivateKey.generate())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(signer.private_pem())
        return signer
    if path.stat().st_mode & 0o077:
        raise ConfigError(
            "the witness key is readable by others: chmod 600 it", code="signing_key_exposed"
        )
    return parse_private_key_pem(path.read_bytes())


class WitnessLog:
    """The witness's append-only entries and its key (one process writes a folder)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.signer = _load_key(folder)
        self.path = folder / "entries.jsonl"
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []
        self._prev = GENESIS
        if self.path.exists():
            for number, line in enumerate(self.path.read_bytes().splitlines(), start=1):
                try:
                    entry = json_strict.loads(line, source=f"entries.jsonl line {number}")
                except ParseError as exc:
                    raise ConfigError(
                        f"the witness's log cannot be read ({exc.code}: {exc}); it serves"
                        " nothing until the line is restored",
                        code="witness_log_invalid",
                    ) from None
                self._entries.append(entry)
                self._prev = digest_bytes(line)

    def append_body(self, data: bytes) -> dict[str, Any]:
        """:meth:`append` of a request body, read strictly: a body with a key twice (at any
        depth), ``NaN`` or nesting too deep is refused before its signature is checked (the
        claim countersigned must be the one every reader of the body reads).

        Raises:
            ParseError: ``duplicate_key``, ``not_json``, ``not_utf8``, ``too_deep``.
            ValueError: as :meth:`append`.
        """
        return self.append(json_strict.loads(data, source="claim"))

    def append(self, doc: Any) -> dict[str, Any]:
        """Check a signed claim and append it, countersigned.

        Raises:
            ValueError: the claim is malformed or its signature is not its key's.
        """
        if not isinstance(doc, dict) or set(doc) != {"claim", "signature"}:
            raise ValueError("a claim is {claim, signature}")
        claim, signature = doc["claim"], doc["signature"]
        if not isinstance(claim, dict) or set(claim) != _CLAIM_KEYS:
            raise ValueError(f"not a {CLAIM_SCHEMA}")
        head = claim["audit_head"]
        if (
            claim["schema"] != CLAIM_SCHEMA
            or not isinstance(head, dict)
            or set(head) != {"lines", "last_digest"}
            or type(head["lines"]) is not int
            or not isinstance(head["last_digest"], str)
            or not all(isinstance(claim[k], str) for k in ("workspace", "run_id", "receipt_id"))
        ):
            raise ValueError(f"not a {CLAIM_SCHEMA}")
        key = PublicKey.from_raw(bytes.fromhex(str(claim["public_key"])))
        if not isinstance(signature, str) or not key.verify(
            base64.b64decode(signature, validate=True), canonical(claim)
        ):
            raise ValueError("the claim's signature is not its key's")
        with self._lock:
            entry: dict[str, Any] = {
                "schema": ENTRY_SCHEMA,
                "seq": len(self._entries) + 1,
                "claim": claim,
                "claim_signature": signature,
                "received_at": datetime.now(UTC).isoformat(timespec="microseconds"),
                "prev": self._prev,
            }
            entry["witness_key_id"] = self.signer.key_id
            entry["signature"] = base64.b64encode(self.signer.sign(entry_body(entry))).decode()
            line = canonical(entry)
            with open(self.path, "ab") as handle:
                handle.write(line + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            self._prev = digest_bytes(line)
            self._entries.append(entry)
            return entry

    def entries(self, workspace: str) -> list[dict[str, Any]]:
        """Every entry of ``workspace``, oldest first."""
        with self._lock:
            return [e for e in self._entries if e["claim"]["workspace"] == workspace]


def serve_witness(folder: Path, host: str, port: int, ready: Any = None) -> None:
    """Serve ``folder``'s witness log until interrupted; ``ready(url, key)`` once listening."""
    log = WitnessLog(folder)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, doc: Any) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path == "/v1/key":
                key = log.signer.public_key
                self._answer(200, {"key_id": key.key_id, "public_key_hex": key.raw.hex()})
            elif parts.path == "/v1/claims":
                workspace = (parse_qs(parts.query).get("workspace") or [""])[0]
                self._answer(200, {"entries": log.entries(workspace)})
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if urlsplit(self.path).path != "/v1/claims":
                self._answer(404, {"error": "not_found"})
                return
            size = int(self.headers.get("Content-Length") or 0)
            if not 0 < size <= MAX_CLAIM_BYTES:
                self._answer(400, {"error": "claim_too_large"})
                return
            try:
                entry = log.append_body(self.rfile.read(size))
            except ParseError as exc:
                self._answer(400, {"error": "claim_invalid", "why": exc.code})
                return
            except (ValueError, ConfigError, KeyError, TypeError):
                self._answer(400, {"error": "claim_invalid"})
                return
            self._answer(200, entry)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    try:
        if ready is not None:
            ready(f"http://{host}:{server.server_address[1]}", log.signer.public_key)
        server.serve_forever()
    finally:
        server.server_close()

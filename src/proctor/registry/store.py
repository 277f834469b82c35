"""The registry's state on disk: an SQLite index, content-addressed file blobs, an audit log.

Layout of a registry folder::

    registry.db          publishers (namespace, key, tier, token digest), packages, versions
                         (or PostgreSQL: see :mod:`proctor.registry.index`)
    registry_key.pem     the registry's own Ed25519 key (0600), made on first use
    blobs/sha256/<hex>   each package file's bytes, named by their digest (written once)
    audit.jsonl          one line per write or refused write, hash-chained (``prev``)

A version row is written once: the same name and version again with the same content digest
is ``unchanged``; with any other digest it is refused. Blobs are written (and fsynced) before
the row that names them is committed, so a crash leaves at most an unreferenced blob.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.receipts.signing import PublicKey, Signer, parse_private_key_pem, signer_from_seed
from proctor.registry.index import open_index
from proctor.runtime.home.files import write_private
from proctor.runtime.packages.manifest import RegistryRefused, check_name, tier_rank
from proctor.runtime.packages.package import Package
from proctor.runtime.records.chain import GENESIS, line_digest

__all__ = ["Publisher", "RegistryStore"]


@dataclass(frozen=True, slots=True)
class Publisher:
    """A key allowed to publish under ``namespace``, with the tier its packages get."""

    namespace: str
    key_hex: str
    tier: str


class RegistryStore:
    """The registry folder (see the module docstring); safe to share between threads."""

    def __init__(self, folder: Path, database_url: str | None = None) -> None:
        """Open (creating) the registry in ``folder``; the index on PostgreSQL when
        ``database_url`` is given.

        Raises:
            StoreError / ConfigError: the index cannot be opened (see :func:`open_index`).
        """
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder = folder
        self._lock = threading.Lock()
        self._db = open_index(folder, database_url)
        self._blobs = folder / "blobs" / "sha256"
        self._blobs.mkdir(parents=True, exist_ok=True)
        self._audit = folder / "audit.jsonl"
        self._prev = GENESIS
        if self._audit.exists():
            with self._audit.open("rb") as handle:
                for line in handle:
                    if line.strip():
                        self._prev = line_digest(line)
        self.signer = self._load_key()

    def _load_key(self) -> Signer:
        path = self.folder / "registry_key.pem"
        if path.exists():
            return parse_private_key_pem(path.read_bytes())
        signer = signer_from_seed(secrets.token_bytes(32))
        write_private(path, signer.private_pem())
        return signer

    def close(self) -> None:
        """Close the index connection."""
        self._db.close()

    # -- audit ------------------------------------------------------------------------------

    def audit(self, event: str, actor: str | None, detail: Mapping[str, Any]) -> None:
        """Append one hash-chained line (the caller holds no lock; this takes it)."""
        with self._lock:
            self._audit_locked(event, actor, detail)

    def _audit_locked(self, event: str, actor: str | None, detail: Mapping[str, Any]) -> None:
        line = json.dumps(
            {
                "timestamp": round(time.time(), 3),
                "event": event,
                "actor": actor,
                "detail": dict(detail),
                "prev": self._prev,
            },
            sort_keys=True,
            separators=(",", ":"),
        ).encode("utf-8")
        with self._audit.open("ab") as handle:
            handle.write(line + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._prev = line_digest(line)

    # -- publishers -------------------------------------------------------------------------

    def add_publisher(self, namespace: str, key: PublicKey, tier: str) -> str:
        """Let ``key`` publish under ``namespace``; returns the new bearer token (shown once).

        Raises:
            UsageError: the namespace or tier is invalid.
        """
        check_name(f"{namespace}/x")
        tier_rank(tier)
        token = "prt_" + secrets.token_urlsafe(32)
        with self._lock, self._db.transaction():
            self._db.execute(
                "INSERT INTO registry_publishers VALUES (?, ?, ?, ?)"
                " ON CONFLICT (namespace, key_hex) DO UPDATE SET tier = excluded.tier,"
                " token_sha256 = excluded.token_sha256",
                (namespace, key.raw.hex(), tier, hashlib.sha256(token.encode()).hexdigest()),
            )
            self._audit_locked(
                "publisher_added",
                None,
                {"namespace": namespace, "key_id": key.key_id, "tier": tier},
            )
        return token

    def publishers_for_token(self, token: str) -> list[Publisher]:
        """The publisher entries a bearer token authenticates (none for an unknown token)."""
        hashed = hashlib.sha256(token.encode()).hexdigest()
        rows = self._db.execute(
            "SELECT namespace, key_hex, tier FROM registry_publishers WHERE token_sha256 = ?",
            (hashed,),
        )
        return [Publisher(*row) for row in rows]

    # -- packages ---------------------------------------------------------------------------

    def blob(self, file_digest: str) -> bytes | None:
        """The bytes stored under ``sha256:<hex>``, or ``None``."""
        path = self._blobs / file_digest.removeprefix("sha256:")
        return path.read_bytes() if path.is_file() else None

    def _write_blob(self, data: bytes) -> None:
        hexed = hashlib.sha256(data).hexdigest()
        path = self._blobs / hexed
        if path.exists():
            return
        tmp = path.with_name(f".{hexed}.{secrets.token_hex(4)}.tmp")
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def put_version(
        self, name: str, package: Package, manifest: Mapping[str, str], actor: str
    ) -> bool:
        """Record a countersigned version; ``False`` when the identical one was there already.

        Raises:
            RegistryRefused: ``version_exists`` (the version holds other content),
                ``kind_mismatch`` (the name is published as the other kind: a skill's name
                never takes a connector, nor a connector's a skill).
        """
        kind = manifest.get("kind", "skill")
        with self._lock:  # one lock over the checks, the rows and the audit line
            with self._db.transaction():
                held = self._db.execute(
                    "SELECT manifest FROM registry_versions WHERE name = ? LIMIT 1", (name,)
                )
                had = json.loads(held[0][0]).get("kind", "skill") if held else kind
                if had != kind:
                    raise RegistryRefused(
                        f"{name} is published as a {had}; a {kind} takes a name of its own",
                        code="kind_mismatch",
                    )
                rows = self._db.execute(
                    "SELECT content_digest FROM registry_versions WHERE name = ? AND version = ?",
                    (name, package.version),
                )
                if rows:
                    if rows[0][0] == package.content_digest:
                        return False
                    raise RegistryRefused(
                        f"{name}@{package.version} is already published with other content; a "
                        "version is written once",
                        code="version_exists",
                    )
                for data in package.files.values():
                    self._write_blob(data)
                now = time.time()
                self._db.execute(
                    "INSERT INTO registry_versions VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        name,
                        package.version,
                        package.content_digest,
                        json.dumps(dict(manifest), sort_keys=True),
                        json.dumps(dict(package.digests), sort_keys=True),
                        package.size,
                        now,
                    ),
                )
                self._db.execute(
                    "INSERT INTO registry_packages VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (name) DO UPDATE SET description = excluded.description,"
                    " tier = excluded.tier,"
                    " latest_version = excluded.latest_version, updated_at = excluded.updated_at",
                    (name, package.description, manifest["tier"], package.version, now),
                )
            self._audit_locked(
                "published",
                actor,
                {
                    "name": name,
                    "version": package.version,
                    "content_digest": package.content_digest,
                },
            )
        return True

    def search(self, term: str, limit: int = 50) -> list[dict[str, Any]]:
        """Packages whose name or description holds ``term`` (ASCII case-insensitive: SQLite's
        LIKE, PostgreSQL's ILIKE), by name."""
        pattern = (
            "%" + term.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        )
        rows = self._db.execute(
            "SELECT name, description, tier, latest_version FROM registry_packages"
            " WHERE name LIKE ? ESCAPE '\\' OR description LIKE ? ESCAPE '\\'"
            " ORDER BY name LIMIT ?",
            (pattern, pattern, limit),
        )
        return [
            {"name": n, "description": d, "tier": t, "latest_version": v} for n, d, t, v in rows
        ]

    def versions(self, name: str) -> list[dict[str, Any]]:
        """Every version of ``name``, oldest first (empty when it is unknown)."""
        rows = self._db.execute(
            "SELECT version, content_digest, size, published_at FROM registry_versions"
            " WHERE name = ? ORDER BY published_at",
            (name,),
        )
        return [
            {"version": v, "content_digest": c, "size": s, "published_at": round(p, 3)}
            for v, c, s, p in rows
        ]

    def version(self, name: str, version: str | None) -> dict[str, Any] | None:
        """The manifest and file digests of ``name@version`` (latest when ``None``)."""
        if version is None:
            found = self._db.execute(
                "SELECT latest_version FROM registry_packages WHERE name = ?", (name,)
            )
            if not found:
                return None
            version = str(found[0][0])
        rows = self._db.execute(
            "SELECT manifest, files FROM registry_versions WHERE name = ? AND version = ?",
            (name, version),
        )
        if not rows:
            return None
        return {"manifest": json.loads(rows[0][0]), "files": json.loads(rows[0][1])}

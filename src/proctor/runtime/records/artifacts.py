"""The artifact store: content-addressed snapshots under ``.proctor/artifacts/``.

An artifact is an immutable byte string a run admitted (a workspace file, or a canonical JSON
value), named by the digest of its bytes and described by a ``proctor.artifact.v1``
descriptor that never holds a host path. Large step inputs and floor payloads use it too.

Layout (all below the workspace's private ``artifacts`` folder, which no tool path reaches):

- ``blobs/<hex>``: the bytes (read-only; holes of a sparse source stay holes);
- ``blobs/<hex>.blocks``: the SHA-256 of every 64 KiB block, concatenated, so a page is
  checked against what was admitted by reading only the blocks it covers;
- ``runs/<run key>/<hex>``: the run's claim on the artifact (its size, media type and the
  digest of the block list). A reference is scoped to the run that admitted it: another run
  holding the same reference reads nothing (``artifact_unknown``).

Refusals (:class:`~proctor.errors.RefusedCall`): ``artifact_too_large`` and
``artifact_store_full`` (the store holds at most :data:`MAX_STORE_BYTES` in all),
``artifact_unknown``, ``artifact_ref_invalid``, ``artifact_offset_invalid``,
``artifact_size_mismatch`` (opening with a descriptor of another size), and
``artifact_tampered`` when the stored bytes or block list no longer match what was admitted.
A run opens an artifact another run of its tree admitted (``artifact.open``) by taking a claim
of its own, once the bytes are checked whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from proctor.contracts import json_strict
from proctor.contracts.values import dataclass
from proctor.errors import ParseError, RefusedCall

__all__ = [
    "ARTIFACT_SCHEMA",
    "BLOCK_BYTES",
    "MAX_PAGE_BYTES",
    "MAX_STORE_BYTES",
    "PAGE_SCHEMA",
    "REF_PATTERN",
    "ArtifactStore",
    "Page",
]

ARTIFACT_SCHEMA = "proctor.artifact.v1"
PAGE_SCHEMA = "proctor.artifact_page.v1"
MAX_STORE_BYTES = 512 * 1024 * 1024
"""The ceiling of the whole store (and so of one artifact)."""
MAX_PAGE_BYTES = 4 * 1024 * 1024
BLOCK_BYTES = 64 * 1024
REF_PATTERN = r"^artifact:sha256:[0-9a-f]{64}$"

_REF = re.compile(REF_PATTERN)
_COPY_CHUNK = 1024 * 1024
_OVERLAP = 256  # a private-key header straddling two chunks is still seen
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

ContentCheck = Callable[[bytes], None]
"""Refuses bytes that may never be admitted (a private key block); raises to refuse."""


@dataclass(frozen=True)
class Page:
    """One page of an artifact: its bytes and where they lie."""

    data: bytes
    offset: int
    size: int
    digest: str
    media_type: str

    @property
    def next_offset(self) -> int:
        """Where the next page starts."""
        return self.offset + len(self.data)

    @property
    def eof(self) -> bool:
        """Whether this page ends the artifact."""
        return self.next_offset >= self.size


def _refused(code: str, message: str, **details: Any) -> RefusedCall:
    return RefusedCall(message, code=code, details=details)


def _hex_of(ref: str) -> str:
    if not isinstance(ref, str) or not _REF.match(ref):
        raise _refused(
            "artifact_ref_invalid",
            "an artifact reference is 'artifact:sha256:<64 hex>', as a descriptor's ref gives it",
        )
    return ref.rsplit(":", 1)[1]


class ArtifactStore:
    """The content-addressed store in ``folder`` (a workspace's ``.proctor/artifacts``).

    Args:
        folder: a real folder proctor owns (``Workspace.private_dir("artifacts")``).
        max_bytes: the ceiling of the whole store (tests lower it).
    """

    def __init__(self, folder: Path, *, max_bytes: int = MAX_STORE_BYTES) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self._blobs = folder / "blobs"
        self._runs = folder / "runs"
        self._tmp = folder / "tmp"
        for sub in (self._blobs, self._runs, self._tmp):
            sub.mkdir(mode=0o700, exist_ok=True)

    # -- admission ---------------------------------------------------------------------------

    def admit_fd(
        self,
        fd: int,
        *,
        run_id: str,
        media_type: str,
        source: str,
        check: ContentCheck | None = None,
    ) -> dict[str, Any]:
        """Snapshot the open regular file ``fd`` (read from its start, not closed here) and
        return its descriptor. ``check`` sees every chunk (with a small overlap) first.

        Raises:
            RefusedCall: ``artifact_too_large``, ``artifact_store_full``, or what ``check``
                raises; nothing is kept then.
        """
        size = os.fstat(fd).st_size
        self._check_size(size, source)
        return self._admit(lambda: _chunks_of(fd), run_id, media_type, source, check)

    def put_bytes(
        self, data: bytes, *, run_id: str, media_type: str, source: str
    ) -> dict[str, Any]:
        """Keep ``data`` (canonical JSON, a large input) and return its descriptor.

        Raises:
            RefusedCall: ``artifact_too_large``, ``artifact_store_full``.
        """
        self._check_size(len(data), source)
        view = memoryview(data)
        chunks = (bytes(view[i : i + _COPY_CHUNK]) for i in range(0, len(data), _COPY_CHUNK))
        return self._admit(lambda: chunks, run_id, media_type, source, None)

    def _check_size(self, size: int, source: str) -> None:
        if size > self.max_bytes:
            raise _refused(
                "artifact_too_large",
                f"'{source}' is {size} bytes; an artifact holds at most {self.max_bytes} bytes",
                size=size,
                max_bytes=self.max_bytes,
            )

    def _admit(
        self,
        chunks: Callable[[], Iterator[bytes]],
        run_id: str,
        media_type: str,
        source: str,
        check: ContentCheck | None,
    ) -> dict[str, Any]:
        temp = self._tmp / os.urandom(16).hex()
        whole = hashlib.sha256()
        blocks = bytearray()
        total, tail, pending = 0, b"", b""
        out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            for chunk in chunks():
                total += len(chunk)
                self._check_size(total, source)
                if check is not None:
                    check(tail + chunk)
                    tail = chunk[-_OVERLAP:]
                whole.update(chunk)
                pending += chunk
                cut = len(pending) - len(pending) % BLOCK_BYTES
                _write_blocks(out, pending[:cut], blocks)
                pending = pending[cut:]
            _write_blocks(out, pending, blocks)
            os.ftruncate(out, total)
            os.fsync(out)
        except BaseException:
            os.close(out)
            temp.unlink(missing_ok=True)
            raise
        os.close(out)
        hex_digest = whole.hexdigest()
        try:
            with self._locked():
                self._commit(temp, hex_digest, total, bytes(blocks))
        finally:
            temp.unlink(missing_ok=True)
        claim = {
            "size": total,
            "media_type": media_type,
            "source": source,
            "blocks_digest": "sha256:" + hashlib.sha256(bytes(blocks)).hexdigest(),
        }
        self._write_claim(run_id, hex_digest, claim)
        return self._descriptor(hex_digest, claim)

    def _commit(self, temp: Path, hex_digest: str, size: int, blocks: bytes) -> None:
        blob = self._blobs / hex_digest
        if blob.exists():
            return  # the same bytes are already kept: content addressing deduplicates
        used = self._used()
        if used + size > self.max_bytes:
            raise _refused(
                "artifact_store_full",
                f"the artifact store holds {used} bytes and this artifact adds {size}; the "
                f"store holds at most {self.max_bytes} bytes",
                used=used,
                size=size,
                max_bytes=self.max_bytes,
            )
        listing = self._blobs / f"{hex_digest}.blocks"
        listing.write_bytes(blocks)
        os.chmod(listing, 0o400)
        os.chmod(temp, 0o400)
        os.rename(temp, blob)

    def _used(self) -> int:
        total = 0
        with os.scandir(self._blobs) as entries:
            for entry in entries:
                if "." not in entry.name:
                    with contextlib.suppress(OSError):
                        total += entry.stat(follow_symlinks=False).st_size
        return total

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _claim_path(self, run_id: str, hex_digest: str) -> Path:
        key = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self._runs / key / hex_digest

    def _write_claim(self, run_id: str, hex_digest: str, claim: dict[str, Any]) -> None:
        path = self._claim_path(run_id, hex_digest)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        temp = path.with_name(f".{hex_digest}.{os.urandom(4).hex()}")
        temp.write_text(json.dumps(claim, sort_keys=True))
        os.replace(temp, path)

    @staticmethod
    def _descriptor(hex_digest: str, claim: dict[str, Any]) -> dict[str, Any]:
        return {
            "schema": ARTIFACT_SCHEMA,
            "ref": f"artifact:sha256:{hex_digest}",
            "digest": f"sha256:{hex_digest}",
            "size": claim["size"],
            "media_type": claim["media_type"],
            "source": claim["source"],
        }

    # -- reading -----------------------------------------------------------------------------

    def describe(self, ref: str, *, run_id: str) -> dict[str, Any]:
        """The descriptor of ``ref`` as the run ``run_id`` admitted it.

        Raises:
            RefusedCall: ``artifact_ref_invalid``, ``artifact_unknown``.
        """
        hex_digest = _hex_of(ref)
        return self._descriptor(hex_digest, self._claim(run_id, hex_digest, ref))

    def _claim(self, run_id: str, hex_digest: str, ref: str) -> dict[str, Any]:
        try:
            # strict: a claim with a key twice is no claim this run wrote
            claim = json_strict.loads(self._claim_path(run_id, hex_digest).read_bytes())
        except (OSError, ParseError) as exc:
            raise _refused(
                "artifact_unknown",
                "no artifact with this reference was admitted by this run (a reference is "
                "scoped to the run that admitted it)",
                ref=ref,
            ) from exc
        if not isinstance(claim, dict):
            raise _refused("artifact_tampered", "the artifact's record is damaged", ref=ref)
        return claim

    def read(
        self, ref: str, *, run_id: str, offset: int, length: int, ceiling: int = MAX_PAGE_BYTES
    ) -> Page:
        """Up to ``length`` (at most ``ceiling``, :data:`MAX_PAGE_BYTES` unless a caller reads a
        margin around a page) bytes of ``ref`` from ``offset``, each block they touch checked
        against the block list recorded at admission.

        Raises:
            RefusedCall: ``artifact_ref_invalid``, ``artifact_unknown``,
                ``artifact_offset_invalid``, ``artifact_tampered``.
        """
        hex_digest = _hex_of(ref)
        claim = self._claim(run_id, hex_digest, ref)
        size = int(claim["size"])
        if offset < 0 or offset > size:
            raise _refused(
                "artifact_offset_invalid",
                f"offset {offset} lies outside the artifact ({size} bytes)",
                offset=offset,
                size=size,
            )
        length = max(0, min(length, ceiling, size - offset))
        listing = self._listing(hex_digest, claim, ref)
        try:
            fd = os.open(self._blobs / hex_digest, _FLAGS)
        except OSError as exc:
            raise _tampered(ref, "its bytes are missing") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size != size:
                raise _tampered(ref, "its size changed")
            first = offset // BLOCK_BYTES
            last = (offset + length - 1) // BLOCK_BYTES if length else first - 1
            data = bytearray()
            for index in range(first, last + 1):
                block = os.pread(fd, BLOCK_BYTES, index * BLOCK_BYTES)
                want = listing[index * 32 : index * 32 + 32]
                if hashlib.sha256(block).digest() != want:
                    raise _tampered(ref, f"block {index} changed")
                data += block
        finally:
            os.close(fd)
        start = offset - first * BLOCK_BYTES
        page = bytes(data[start : start + length])
        return Page(page, offset, size, f"sha256:{hex_digest}", str(claim["media_type"]))

    # -- opening an artifact another run of the tree holds -------------------------------------

    def held_claim(
        self, ref: str, *, holders: Iterable[str], size: int
    ) -> tuple[str, dict[str, Any]]:
        """The first of ``holders`` (run ids) that admitted ``ref``, with its claim, once the
        stored bytes are checked whole: their size, every block against the block list, and
        the digest of all of them against the reference.

        Raises:
            RefusedCall: ``artifact_ref_invalid``; ``artifact_unknown`` (no holder admitted
                it); ``artifact_size_mismatch`` (``size`` is not what was admitted);
                ``artifact_tampered``.
        """
        hex_digest = _hex_of(ref)
        for holder in holders:
            if self._claim_path(holder, hex_digest).is_file():
                claim = self._claim(holder, hex_digest, ref)
                break
        else:
            raise _refused(
                "artifact_unknown",
                "no run of this run's tree admitted an artifact with this reference (a run opens"
                " only what its own tree admitted)",
                ref=ref,
            )
        if int(claim.get("size", -1)) != size:
            raise _refused(
                "artifact_size_mismatch",
                f"the descriptor says {size} bytes; the artifact admitted has {claim.get('size')}",
                ref=ref,
            )
        whole = hashlib.sha256()
        offset = 0
        while offset < size:
            page = self.read(ref, run_id=holder, offset=offset, length=MAX_PAGE_BYTES)
            whole.update(page.data)
            offset += len(page.data)
        if whole.hexdigest() != hex_digest:
            raise _tampered(ref, "its bytes no longer have its digest")
        return holder, claim

    def grant(self, ref: str, claim: dict[str, Any], *, run_id: str) -> dict[str, Any]:
        """Record ``claim`` (from :meth:`held_claim`) as ``run_id``'s own, so its reads page
        ``ref``; returns the descriptor.

        Raises:
            RefusedCall: ``artifact_ref_invalid``.
        """
        hex_digest = _hex_of(ref)
        kept = {k: claim[k] for k in ("size", "media_type", "source", "blocks_digest")}
        self._write_claim(run_id, hex_digest, kept)
        return self._descriptor(hex_digest, kept)

    def _listing(self, hex_digest: str, claim: dict[str, Any], ref: str) -> bytes:
        try:
            fd = os.open(self._blobs / f"{hex_digest}.blocks", _FLAGS)
            try:
                listing = b"".join(iter(lambda: os.read(fd, _COPY_CHUNK), b""))
            finally:
                os.close(fd)
        except OSError as exc:
            raise _tampered(ref, "its block list is missing") from exc
        if "sha256:" + hashlib.sha256(listing).hexdigest() != claim.get("blocks_digest"):
            raise _tampered(ref, "its block list changed")
        return listing


def _tampered(ref: str, why: str) -> RefusedCall:
    return _refused(
        "artifact_tampered",
        f"the stored artifact no longer matches what was admitted ({why}); it is not read",
        ref=ref,
    )


def _chunks_of(fd: int) -> Iterator[bytes]:
    offset = 0
    while chunk := os.pread(fd, _COPY_CHUNK, offset):
        offset += len(chunk)
        yield chunk


def _write_blocks(out: int, data: bytes, blocks: bytearray) -> None:
    """Append whole blocks (and a last partial one) to ``out``, leaving zero blocks as holes,
    and add each block's digest to ``blocks``."""
    view = memoryview(data)
    for start in range(0, len(data), BLOCK_BYTES):
        block = view[start : start + BLOCK_BYTES]
        blocks += hashlib.sha256(block).digest()
        if len(block) == BLOCK_BYTES and data.count(0, start, start + BLOCK_BYTES) == BLOCK_BYTES:
            os.lseek(out, BLOCK_BYTES, os.SEEK_CUR)
        else:
            os.write(out, block)

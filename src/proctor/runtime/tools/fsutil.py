"""File-system primitives the fs tools share: digests, safe reads, atomic writes.

Every function takes a :class:`proctor.runtime.boundary.workspace.Resolved` (or an absolute path
inside
``.proctor/``) so nothing here ever turns a caller string into a path on its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from proctor.errors import RefusedCall, ToolFailed
from proctor.receipts.canonical import DIGEST_PREFIX
from proctor.runtime.boundary.workspace import Resolved, Workspace, refusal

__all__ = [
    "DIGEST_PATTERN",
    "MAX_WRITE_BYTES",
    "FileState",
    "atomic_create",
    "atomic_replace",
    "current_state",
    "digest_of",
    "encode_text",
    "fsync_dir",
    "open_regular",
    "read_text_file",
    "require_digest",
]

DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$"
MAX_WRITE_BYTES = 16 * 1024 * 1024
_CHUNK = 1024 * 1024
_OVERLAP = 256  # a private key header straddling two chunks is still seen


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class FileState:
    """What is at a path now: ``exists``, and for a regular file its digest, bytes and mode."""

    exists: bool
    digest: str | None = None
    data: bytes | None = None
    mode: int | None = None


def open_regular(path: Path | str, rel: str) -> int:
    """Open a regular file for reading without following a symlink or blocking on a FIFO.

    Raises:
        ToolFailed: ``not_found``, ``not_a_file``.
        RefusedCall: ``path_changed`` (a symlink appeared after resolution).
    """
    fd = _open_nofollow(Path(path), rel)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolFailed(f"'{rel}' is not a regular file", code="not_a_file", details={"path": rel})
    return fd


def _open_nofollow(path: Path, rel: str) -> int:
    try:
        # O_NONBLOCK: a FIFO planted in the workspace must not hang the call (fstat refuses it).
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        return os.open(path, flags)
    except FileNotFoundError as exc:
        raise ToolFailed(
            f"'{rel}' does not exist", code="not_found", details={"path": rel}
        ) from exc
    except IsADirectoryError as exc:
        raise ToolFailed(f"'{rel}' is a folder", code="not_a_file", details={"path": rel}) from exc
    except OSError as exc:
        # ELOOP here means a symlink appeared after resolution: refuse, never follow it.
        raise refusal(
            "path_changed", f"'{rel}' changed while it was being opened ({exc.strerror})", rel
        ) from exc


def current_state(ws: Workspace, target: Resolved) -> FileState:
    """Read what is at ``target`` now (whole file); refuse a private key in it.

    Raises:
        ToolFailed: ``not_a_file`` (a folder or special file is there).
        RefusedCall: ``sensitive_path`` (private key content), ``path_changed``.
    """
    try:
        info = os.lstat(target.abs)
    except FileNotFoundError:
        return FileState(exists=False)
    except OSError as exc:
        raise ToolFailed(
            f"'{target.rel}' cannot be examined ({exc.strerror})", code="not_a_file"
        ) from exc
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailed(
            f"'{target.rel}' is not a regular file", code="not_a_file", details={"path": target.rel}
        )
    fd = open_regular(target.abs, target.rel)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    ws.check_content(target.rel, data)
    return FileState(True, digest_of(data), data, stat.S_IMODE(info.st_mode))


def require_digest(target: Resolved, state: FileState, expected: str | None) -> None:
    """Refuse changing an existing file without, or with a stale, ``expected_digest``.

    Raises:
        RefusedCall: ``blind_overwrite`` (no digest given), ``stale_digest`` (it differs),
            ``not_found`` (nothing there to replace; pass ``create: true``).
    """
    if not state.exists:
        raise RefusedCall(
            f"'{target.rel}' does not exist; pass create: true to create it",
            code="not_found",
            details={"path": target.rel},
        )
    if expected is None:
        raise RefusedCall(
            f"'{target.rel}' exists; changing it needs the expected_digest of its current content "
            "(read it first)",
            code="blind_overwrite",
            details={"path": target.rel, "rule": "blind_overwrite"},
        )
    if expected != state.digest:
        raise RefusedCall(
            f"'{target.rel}' changed since it was read: expected_digest does not match its "
            "current content",
            code="stale_digest",
            details={"path": target.rel, "expected": expected, "actual": state.digest},
        )


def read_text_file(ws: Workspace, target: Resolved, max_bytes: int) -> tuple[str, str, int, bool]:
    """``(content, digest of the whole file, size, truncated)`` of a UTF-8 text file.

    The whole file is hashed and scanned for a private key; ``content`` holds at most
    ``max_bytes`` and, when truncated, ends at the last newline inside the cap, so a secret is
    either returned whole (for the scrubber to find) or not at all.

    Raises:
        ToolFailed: ``not_found``, ``not_a_file``, ``binary_file`` (not UTF-8 text).
        RefusedCall: ``sensitive_path`` (a private key anywhere in the file).
    """
    fd = open_regular(target.abs, target.rel)
    with os.fdopen(fd, "rb") as handle:
        hasher = hashlib.sha256()
        kept = bytearray()
        size = 0
        tail = b""
        while chunk := handle.read(_CHUNK):
            ws.check_content(target.rel, tail + chunk)
            tail = chunk[-_OVERLAP:]
            hasher.update(chunk)
            size += len(chunk)
            if len(kept) <= max_bytes:
                kept += chunk[: max_bytes + 1 - len(kept)]
    truncated = size > max_bytes
    body = bytes(kept[:max_bytes])
    if truncated:
        cut = body.rfind(b"\n")
        body = body[: cut + 1] if cut >= 0 else b""
    if b"\x00" in body:
        raise _binary(target.rel)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _binary(target.rel) from exc
    return text, DIGEST_PREFIX + hasher.hexdigest(), size, truncated


def _binary(rel: str) -> ToolFailed:
    return ToolFailed(
        f"'{rel}' is not UTF-8 text; fs.read returns text only",
        code="binary_file",
        details={"path": rel},
    )


def fsync_dir(folder: Path) -> None:
    """Make a rename or create in ``folder`` durable (best effort where unsupported)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(folder: Path, data: bytes, mode: int | None) -> Path:
    temp = folder / f".proctor-tmp-{secrets.token_hex(8)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temp, 0o666 & ~umask)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return temp


def atomic_replace(target: Path, data: bytes, mode: int | None = None) -> None:
    """Replace (or create) ``target`` with ``data``: temp file in the same folder, fsync, rename."""
    temp = _write_temp(target.parent, data, mode)
    try:
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(target.parent)


def atomic_create(target: Path, rel: str, data: bytes) -> None:
    """Create ``target`` only if nothing is there: temp file, fsync, ``link`` (never clobbers).

    Raises:
        RefusedCall: ``file_exists`` when a file appeared at ``target``.
        ToolFailed: ``parent_missing`` when a parent is not a folder.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolFailed(
            f"a parent of '{rel}' is not a folder", code="parent_missing", details={"path": rel}
        ) from exc
    temp = _write_temp(target.parent, data, None)
    try:
        os.link(temp, target)
    except FileExistsError as exc:
        raise RefusedCall(
            f"'{rel}' already exists; replacing it needs its expected_digest",
            code="file_exists",
            details={"path": rel},
        ) from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
    fsync_dir(target.parent)


def encode_text(ws: Workspace, rel: str, content: str) -> bytes:
    """``content`` as UTF-8 bytes, refusing an oversized write or a private key in it.

    Raises:
        RefusedCall: ``write_too_large``, ``sensitive_path`` (private key content).
    """
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RefusedCall(
            f"the content for '{rel}' is not valid Unicode text (a lone surrogate)",
            code="invalid_text",
            details={"path": rel},
        ) from exc
    if len(data) > MAX_WRITE_BYTES:
        raise RefusedCall(
            f"the content for '{rel}' is larger than {MAX_WRITE_BYTES} bytes",
            code="write_too_large",
            details={"path": rel},
        )
    ws.check_content(rel, data)
    return data

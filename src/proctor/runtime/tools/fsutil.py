"""File-system primitives the fs tools share: digests, safe reads, atomic writes, clean errors.

Every function takes a :class:`proctor.runtime.boundary.workspace.Resolved` (a path containment
decided, or one of proctor's own files from ``Workspace.private_file``) and reaches it through
descriptors (:mod:`proctor.runtime.boundary.fds`): the folder a file lives in is opened from
its root with no symlink allowed on the way, and the read, the temp file, the rename, the link
and the unlink all happen relative to that folder's descriptor. A folder swapped for a symlink
meanwhile fails the call (``path_changed``); it never leads outside.

A file is judged by what it is when opened: a regular file with more than one hard link is
refused (``hard_link``), as is a private key in it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import RefusedCall, ToolFailed
from proctor.receipts.canonical import DIGEST_PREFIX
from proctor.runtime.boundary.fds import DIR_FLAGS, changed, make_parents, open_below, parent_of
from proctor.runtime.boundary.workspace import Resolved, Workspace, check_links

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
    "io_refusal",
    "open_regular",
    "os_errors_refused",
    "read_bytes",
    "read_text_file",
    "remove",
    "require_digest",
]

DIGEST_PATTERN = "^sha256:[0-9a-f]{64}$"
MAX_WRITE_BYTES = 16 * 1024 * 1024
_CHUNK = 1024 * 1024
_OVERLAP = 256  # a private key header straddling two chunks is still seen
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted in the workspace must not hang us
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def io_refusal(exc: OSError, rel: str | None = None) -> RefusedCall:
    """The refusal an :class:`OSError` inside a tool becomes: ``path_changed`` when the tree
    changed under a decided path, else ``io_error`` naming the error (never a host path)."""
    details: dict[str, Any] = {} if rel is None else {"path": rel}
    named = f"'{rel}'" if rel is not None else "the file"
    if changed(exc):
        return RefusedCall(
            f"{named} changed while it was being used (a folder or file on the way was "
            "replaced); nothing outside was reached",
            code="path_changed",
            details=details,
        )
    number = exc.errno or 0
    details["errno"] = errno.errorcode.get(number, "unknown")
    reason = os.strerror(number) if number else type(exc).__name__
    return RefusedCall(
        f"the file system refused the operation on {named} ({reason})",
        code="io_error",
        details=details,
    )


def os_errors_refused(
    handler: Callable[[Any, dict[str, Any]], dict[str, Any]],
) -> Callable[[Any, dict[str, Any]], dict[str, Any]]:
    """``handler`` with any :class:`OSError` it lets out turned into :func:`io_refusal`, so a
    tool never ends a call with a traceback or a host path."""

    @functools.wraps(handler)
    def guarded(ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return handler(ctx, args)
        except OSError as exc:
            raise io_refusal(exc) from exc

    return guarded


@dataclass(frozen=True)
class FileState:
    """What is at a path now: ``exists``, and for a regular file its digest, bytes and mode."""

    exists: bool
    digest: str | None = None
    data: bytes | None = None
    mode: int | None = None


def _open(target: Resolved, flags: int) -> int:
    base, inner = target.where
    try:
        return open_below(base, inner, flags)
    except FileNotFoundError as exc:
        raise ToolFailed(
            f"'{target.rel}' does not exist", code="not_found", details={"path": target.rel}
        ) from exc
    except NotADirectoryError as exc:
        raise ToolFailed(
            f"'{target.rel}' does not exist (a folder on its way is a file)",
            code="not_found",
            details={"path": target.rel},
        ) from exc
    except OSError as exc:
        raise io_refusal(exc, target.rel) from exc


def open_regular(target: Resolved) -> int:
    """Open ``target`` for reading: no symlink followed anywhere on the way, no blocking on a
    FIFO, a regular file with one link only.

    Raises:
        ToolFailed: ``not_found``, ``not_a_file``.
        RefusedCall: ``hard_link``, ``path_changed`` (a symlink appeared after resolution),
            ``io_error``.
    """
    return _open_regular(target)[0]


def _open_regular(target: Resolved) -> tuple[int, os.stat_result]:
    """:func:`open_regular`, with what ``fstat`` said of the file when it was opened."""
    fd = _open(target, os.O_RDONLY | _NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise ToolFailed(
                f"'{target.rel}' is {kind}", code="not_a_file", details={"path": target.rel}
            )
        check_links(target.rel, info.st_nlink)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _chunks(fd: int, size: int) -> Iterator[bytes]:
    """Every byte of ``fd`` to its end, in chunks. The first read asks for one byte more than
    the ``size`` fstat gave (when that is under a chunk): asking a 4 KiB file for a whole chunk
    allocates and faults in 1 MiB first, which costs several times the read itself, and a read
    that comes back short with exactly ``size`` bytes has met the end, so no empty read is
    needed to see it. A size of 0 (a file that does not know its size), a short read before
    ``size`` (a network file system may give one) and a file that grew are read on to the end
    all the same."""
    want = min(_CHUNK, size + 1) if size else _CHUNK
    got = 0
    while chunk := os.read(fd, want):
        yield chunk
        got += len(chunk)
        if len(chunk) < want and got == size:
            return
        want = _CHUNK


def _read_all(fd: int, size: int) -> bytes:
    return b"".join(_chunks(fd, size))


def read_bytes(target: Resolved) -> bytes:
    """Every byte of the regular file ``target`` (see :func:`open_regular`).

    Raises:
        ToolFailed: ``not_found``, ``not_a_file``.
        RefusedCall: ``hard_link``, ``path_changed``, ``io_error``.
    """
    fd, info = _open_regular(target)
    try:
        return _read_all(fd, info.st_size)
    except OSError as exc:
        raise io_refusal(exc, target.rel) from exc
    finally:
        os.close(fd)


def current_state(ws: Workspace, target: Resolved) -> FileState:
    """Read what is at ``target`` now (whole file); refuse a private key in it.

    Raises:
        ToolFailed: ``not_a_file`` (a folder or special file is there).
        RefusedCall: ``sensitive_path`` (private key content), ``hard_link``, ``path_changed``,
            ``io_error``.
    """
    try:
        fd, info = _open_regular(target)
    except ToolFailed as exc:
        if exc.code == "not_found":
            return FileState(exists=False)
        raise
    try:
        mode = stat.S_IMODE(info.st_mode)
        data = _read_all(fd, info.st_size)
    except OSError as exc:
        raise io_refusal(exc, target.rel) from exc
    finally:
        os.close(fd)
    ws.check_content(target.rel, data)
    return FileState(True, digest_of(data), data, mode)


def require_digest(target: Resolved, state: FileState, expected: str | None) -> None:
    """Refuse changing an existing file without, or with a stale, ``expected_digest``.

    Raises:
        RefusedCall: ``blind_overwrite`` (no digest given), ``stale_digest`` (it differs; the
            details carry the ``actual`` current digest), ``not_found`` (nothing there to
            replace; pass ``create: true``).
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
            f"'{target.rel}' changed since it was read: its current digest is {state.digest}, "
            "not the expected_digest given; read it again before changing it",
            code="stale_digest",
            details={"path": target.rel, "expected": expected, "actual": state.digest},
        )


def read_text_file(ws: Workspace, target: Resolved, max_bytes: int) -> tuple[str, str, int, bool]:
    """``(content, digest of the whole file, size, truncated)`` of a UTF-8 text file.

    The whole file is hashed and scanned for a private key; ``content`` holds at most
    ``max_bytes`` and, when truncated, ends at the last newline inside the cap, so a secret is
    either returned whole (for the scrubber to find) or not at all. A file containment read
    whole during this call (``ws.take_seen``) is not read again: those bytes came through the
    same no-symlink open, after the same link and private-key checks.

    Raises:
        ToolFailed: ``not_found``, ``not_a_file``, ``binary_file`` (not UTF-8 text).
        RefusedCall: ``sensitive_path`` (a private key anywhere in the file), ``hard_link``,
            ``path_changed``, ``io_error``.
    """
    seen = ws.take_seen(target)
    if seen is not None:
        return _text(target.rel, seen, len(seen), digest_of(seen), max_bytes)
    fd, info = _open_regular(target)
    hasher = hashlib.sha256()
    kept = bytearray()
    size = 0
    tail = b""
    try:
        for chunk in _chunks(fd, info.st_size):
            ws.check_content(target.rel, tail + chunk)
            tail = chunk[-_OVERLAP:]
            hasher.update(chunk)
            size += len(chunk)
            if len(kept) <= max_bytes:
                kept += chunk[: max_bytes + 1 - len(kept)]
    except OSError as exc:
        raise io_refusal(exc, target.rel) from exc
    finally:
        os.close(fd)
    return _text(target.rel, bytes(kept), size, DIGEST_PREFIX + hasher.hexdigest(), max_bytes)


def _text(
    rel: str, kept: bytes, size: int, digest: str, max_bytes: int
) -> tuple[str, str, int, bool]:
    """:func:`read_text_file`'s result from the first ``max_bytes + 1`` (or more) bytes."""
    truncated = size > max_bytes
    body = kept
    if truncated:
        body = kept[:max_bytes]
        cut = body.rfind(b"\n")
        body = body[: cut + 1] if cut >= 0 else b""
    if b"\x00" in body:
        raise _binary(rel)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _binary(rel) from exc
    return text, digest, size, truncated


def _binary(rel: str) -> ToolFailed:
    return ToolFailed(
        f"'{rel}' is not UTF-8 text; fs.read returns text only",
        code="binary_file",
        details={"path": rel},
    )


def fsync_dir(folder: Path | int) -> None:
    """Make a rename or create in ``folder`` (a path, or an open folder descriptor) durable
    (best effort where unsupported)."""
    if isinstance(folder, int):
        with contextlib.suppress(OSError):
            os.fsync(folder)
        return
    try:
        fd = os.open(folder, DIR_FLAGS | _NOFOLLOW)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(dir_fd: int, data: bytes, mode: int | None) -> str:
    """A fsynced temp file in the folder ``dir_fd`` holding ``data``; returns its name. With no
    ``mode`` it is created 0666 less the umask (as a new file would be)."""
    name = f".proctor-tmp-{os.urandom(8).hex()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    fd = os.open(name, flags, 0o600 if mode is not None else 0o666, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if mode is not None:
            os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)
    return name


def atomic_replace(target: Resolved, data: bytes, mode: int | None = None) -> None:
    """Replace (or create) ``target`` with ``data``: a temp file in the same folder, fsync, and
    ``renameat`` over the name, all in that folder's descriptor.

    Raises:
        RefusedCall: ``path_changed``, ``io_error``; ToolFailed ``parent_missing``.
    """
    try:
        with parent_of(*target.where) as (dir_fd, name):
            temp = _write_temp(dir_fd, data, mode)
            try:
                os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dir_fd)
                raise
            fsync_dir(dir_fd)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise _parent_missing(target.rel) from exc
    except OSError as exc:
        raise io_refusal(exc, target.rel) from exc


def _parent_missing(rel: str) -> ToolFailed:
    return ToolFailed(
        f"a parent of '{rel}' is missing or not a folder",
        code="parent_missing",
        details={"path": rel},
    )


def atomic_create(target: Resolved, data: bytes, mode: int | None = None) -> None:
    """Create ``target`` only if nothing is there: missing folders made on the way (each in its
    parent's descriptor), a temp file, fsync, ``linkat`` (never clobbers).

    Raises:
        RefusedCall: ``file_exists`` when a file appeared at ``target``; ``path_changed``,
            ``io_error``.
        ToolFailed: ``parent_missing`` when a parent is not a folder.
    """
    try:
        with make_parents(*target.where) as (dir_fd, name):
            temp = _write_temp(dir_fd, data, mode)
            try:
                os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except FileExistsError as exc:
                raise RefusedCall(
                    f"'{target.rel}' already exists; replacing it needs its expected_digest",
                    code="file_exists",
                    details={"path": target.rel},
                ) from exc
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dir_fd)
            fsync_dir(dir_fd)
    except (FileExistsError, NotADirectoryError) as exc:
        raise _parent_missing(target.rel) from exc
    except FileNotFoundError as exc:
        raise _parent_missing(target.rel) from exc
    except OSError as exc:
        raise io_refusal(exc, target.rel) from exc


def remove(target: Resolved) -> None:
    """Unlink ``target`` in its folder's descriptor (a missing file is not an error).

    Raises:
        RefusedCall: ``path_changed``, ``io_error``.
    """
    try:
        with parent_of(*target.where) as (dir_fd, name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
            fsync_dir(dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise io_refusal(exc, target.rel) from exc


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

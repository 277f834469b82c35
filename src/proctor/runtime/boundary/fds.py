"""Descriptor-based path work: resolve, open, create, rename and unlink without following a link.

Containment decides a *canonical* path (every symlink already resolved, no ``..``) inside a
root; everything here then reaches exactly that path and nothing else, however the tree
changes meanwhile:

- :func:`open_below` opens ``base/inner`` with ``openat2(RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` from a descriptor of ``base`` (itself opened
  with ``RESOLVE_NO_SYMLINKS``) where the kernel has ``openat2`` (Linux 5.6+), else by a
  portable walk that opens every component with ``O_NOFOLLOW`` relative to its parent's
  descriptor. An ``inner`` with no ``..`` in it (every canonical path containment decides)
  is opened in one ``openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` of the whole
  path: with no link and no ``..`` a lookup can only descend from ``base``. A symlink
  anywhere on the way, swapped in after the path was decided, fails the open with ``ELOOP``
  instead of being followed.
- :func:`parent_of` and :func:`make_parents` give the descriptor of the folder a name lives in,
  so the caller's ``os.open(..., dir_fd=)``, ``os.replace(..., src_dir_fd=, dst_dir_fd=)``,
  ``os.link``, ``os.rename`` and ``os.unlink(..., dir_fd=)`` act in that folder and no other.
- :func:`lstat_below`, :func:`kinds_below`, :func:`stats_below`, :func:`read_below` and
  :func:`remove_below` are the host-side path work on a tree a sandboxed process may have
  changed (the sweep after a command, the git host-code look, the sandbox view's walks): each
  reaches ``base/inner`` through :func:`parent_of` or :func:`open_below`, so a link planted
  anywhere on the way (or swapped in meanwhile) fails it with ``ELOOP`` and nothing outside
  ``base`` is read or removed; an ``inner`` with a ``..`` or a leading ``/`` is refused
  (``EXDEV``) before anything is opened.
- :func:`walk` is how containment decides the canonical path: it follows the path component by
  component through directory descriptors (``fstatat``/``readlinkat`` with no-follow), reading
  a symlink's text itself and going on from there, as the kernel would. A path with no symlink
  and no ``..`` on it (the common case) is shown to be its own real form by one ``openat2``
  with ``RESOLVE_NO_SYMLINKS`` instead.

Errors are :class:`OSError` with the kernel's errno (``ELOOP`` a link, ``ENOENT``, ``ENOTDIR``
...); callers turn them into refusals (:func:`changed`) and never show the paths.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import struct
import sys
from collections.abc import Iterator
from typing import Any

__all__ = [
    "DIR_FLAGS",
    "MAX_SYMLINK_HOPS",
    "SymlinkLoop",
    "changed",
    "kinds_below",
    "lstat_below",
    "make_parents",
    "open_below",
    "openat2_available",
    "parent_of",
    "read_below",
    "remove_below",
    "set_openat2",
    "stats_below",
    "walk",
]

MAX_SYMLINK_HOPS = 40

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_PATH = getattr(os, "O_PATH", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _CLOEXEC
"""Flags of a folder descriptor that can be read (listed) and fsynced."""
_WALK_FLAGS = (_PATH or os.O_RDONLY) | _DIRECTORY | _CLOEXEC

_AT_FDCWD = -100
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_NO_LINKS = _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
# A whole path shorter than this (in characters, so at most 4 bytes each) stays under PATH_MAX.
_WHOLE_PATH_CHARS = 1000
# openat2 is 437 in the unified syscall table every one of these uses
_OPENAT2_MACHINES = frozenset(
    {"x86_64", "amd64", "aarch64", "arm64", "i386", "i686", "riscv64", "ppc64le", "s390x"}
)
_CHANGED = frozenset({errno.ELOOP, errno.EXDEV, errno.EAGAIN})
_OPEN_HOW_SIZE = 24


class SymlinkLoop(OSError):
    """More than :data:`MAX_SYMLINK_HOPS` symlinks on the way (a loop)."""


class _Openat2:
    """The ``openat2`` system call through libc's ``syscall``, probed once (ctypes is imported
    then: a process that opens no workspace path never loads it)."""

    def __init__(self) -> None:
        self.enabled: bool | None = None
        self._call: Any = None  # libc's syscall, a ctypes function
        self._ctypes: Any = None
        # One open_how per (flags, mode, resolve), kept alive here and passed by address: the
        # kernel only reads it. Building the ctypes arguments anew cost more than the call.
        self._hows: dict[tuple[int, int, int], tuple[Any, int]] = {}
        self._size = _OPEN_HOW_SIZE

    def _probe(self) -> bool:
        if not sys.platform.startswith("linux") or os.uname().machine not in _OPENAT2_MACHINES:
            return False
        import ctypes

        self._ctypes = ctypes
        try:
            call = ctypes.CDLL(None, use_errno=True).syscall
        except (OSError, AttributeError):
            return False
        call.restype = ctypes.c_long
        call.argtypes = [
            ctypes.c_long,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        self._call = call
        try:
            fd = self.open(_AT_FDCWD, "/", _WALK_FLAGS, 0, _RESOLVE_NO_SYMLINKS)
        except OSError:
            return False  # ENOSYS (an older kernel), EPERM (a seccomp filter) ...
        os.close(fd)
        return True

    def ready(self) -> bool:
        if self.enabled is None:
            self.enabled = self._probe()
        return self.enabled

    def open(self, dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int:
        assert self._call is not None
        key = (flags, mode, resolve)
        held = self._hows.get(key)
        if held is None:
            # struct open_how: three native-endian u64s (flags, mode, resolve)
            how = self._ctypes.create_string_buffer(
                struct.pack("=QQQ", flags | _CLOEXEC, mode, resolve), _OPEN_HOW_SIZE
            )
            held = self._hows[key] = (how, self._ctypes.addressof(how))
        name = os.fsencode(path)
        for _attempt in range(8):
            fd = int(self._call(437, dirfd, name, held[1], self._size))
            if fd >= 0:
                return fd
            err = self._ctypes.get_errno()
            if err != errno.EAGAIN:  # EAGAIN: a rename raced the lookup; the kernel asks again
                break
        raise OSError(err, os.strerror(err))


_OPENAT2 = _Openat2()


def openat2_available() -> bool:
    """Whether paths are opened with ``openat2`` (else by the portable no-follow walk)."""
    return _OPENAT2.ready()


def set_openat2(enabled: bool) -> bool:
    """Use ``openat2`` when ``enabled`` and the kernel has it, else the portable walk; returns
    the previous setting (tests run both ways)."""
    previous = _OPENAT2.ready()
    _OPENAT2.enabled = enabled and _OPENAT2._probe()
    return previous


def changed(exc: OSError) -> bool:
    """Whether ``exc`` says the tree changed under a decided path (a symlink appeared, a lookup
    would have left its root, or raced a rename), rather than that a name is missing."""
    return exc.errno in _CHANGED


def _components(text: str) -> list[str]:
    return [p for p in text.split("/") if p not in ("", ".")]


def _enter(dir_fd: int, name: str) -> int:
    """A descriptor of the folder ``name`` in ``dir_fd``, never following a link (``ELOOP``:
    ``O_DIRECTORY | O_NOFOLLOW`` says ``ENOTDIR`` for a link, which is told apart here)."""
    try:
        return os.open(name, DIR_FLAGS | _NOFOLLOW, dir_fd=dir_fd)
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
        raise


def _portable(base: str, inner: str, flags: int, mode: int) -> int:
    parts = _components(base) + _components(inner)
    fd = os.open("/", DIR_FLAGS)
    try:
        for part in parts[:-1]:
            nxt = _enter(fd, part)
            os.close(fd)
            fd = nxt
        if not parts:
            return os.open(".", flags | _CLOEXEC, mode, dir_fd=fd)
        try:
            out = os.open(parts[-1], flags | _NOFOLLOW | _CLOEXEC, mode, dir_fd=fd)
        except NotADirectoryError:
            if flags & _DIRECTORY and stat.S_ISLNK(
                os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode
            ):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
            raise
    finally:
        os.close(fd)
    if flags & _PATH and _PATH and stat.S_ISLNK(os.fstat(out).st_mode):
        os.close(out)  # O_PATH | O_NOFOLLOW opens a link itself: that is a link on the way
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
    return out


def open_below(base: str, inner: str, flags: int, mode: int = 0) -> int:
    """A descriptor of ``base/inner`` opened with ``flags`` (``O_CLOEXEC`` added), following
    no symlink anywhere on the way, the last component included. ``base`` is a real absolute
    folder path; ``inner`` a canonical relative path below it (``"."`` is ``base`` itself).

    Raises:
        OSError: ``ELOOP`` a symlink is on the way; ``ENOENT``, ``ENOTDIR``, ``EISDIR`` ...
            as the open meets them.
    """
    if not _OPENAT2.ready():
        return _portable(base, inner, flags, mode)
    bare = flags & ~_NOFOLLOW  # RESOLVE_NO_SYMLINKS covers the last component too
    if inner in ("", "."):
        return _OPENAT2.open(_AT_FDCWD, base, bare, mode, _RESOLVE_NO_SYMLINKS)
    if ".." not in inner and inner[0] != "/" and len(base) + len(inner) < _WHOLE_PATH_CHARS:
        # With no symlink and no ``..`` anywhere, the path from ``base`` can only descend:
        # one lookup of the whole path refuses exactly what the two below refuse.
        path = base.rstrip("/") + "/" + inner
        return _OPENAT2.open(_AT_FDCWD, path, bare, mode, _NO_LINKS)
    root = _OPENAT2.open(_AT_FDCWD, base, _WALK_FLAGS, 0, _RESOLVE_NO_SYMLINKS)
    try:
        return _OPENAT2.open(root, inner, bare, mode, _RESOLVE_BENEATH | _NO_LINKS)
    finally:
        os.close(root)


def _split(inner: str) -> tuple[str, str]:
    head, _, name = inner.rstrip("/").rpartition("/")
    return head or ".", name


@contextlib.contextmanager
def parent_of(base: str, inner: str) -> Iterator[tuple[int, str]]:
    """``(descriptor of the folder holding base/inner, the last name)``, closed on exit.

    Raises:
        OSError: as :func:`open_below` for the folder; ``EINVAL`` when ``inner`` is the root.
    """
    head, name = _split(inner)
    if not name or name in (".", ".."):
        raise OSError(errno.EINVAL, "the root itself has no parent here")
    fd = open_below(base, head, DIR_FLAGS)
    try:
        yield fd, name
    finally:
        os.close(fd)


@contextlib.contextmanager
def make_parents(base: str, inner: str, mode: int = 0o777) -> Iterator[tuple[int, str]]:
    """As :func:`parent_of`, creating missing folders on the way (each with ``mkdirat`` in its
    parent's descriptor, then opened with no-follow).

    Raises:
        OSError: ``ENOTDIR`` a component is not a folder, ``ELOOP`` a symlink, ...
    """
    head, name = _split(inner)
    if not name or name in (".", ".."):
        raise OSError(errno.EINVAL, "the root itself has no parent here")
    try:
        fd = open_below(base, head, DIR_FLAGS)
    except FileNotFoundError:
        fd = open_below(base, ".", DIR_FLAGS)
        try:
            for part in _components(head):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=fd)
                nxt = _enter(fd, part)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
    try:
        yield fd, name
    finally:
        os.close(fd)


def _dir_fd(path: str) -> int | None:
    """A walk descriptor of the real folder ``path``, or None when nothing is there (or not a
    folder): what follows is a name to be created."""
    try:
        return open_below(path, ".", _WALK_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _symlink_free(start: str, parts: list[str]) -> str | None:
    """The common cases in a system call or two: ``start/parts`` exists with no symlink on the
    way (``openat2`` with ``RESOLVE_NO_SYMLINKS`` opens it), or only its last name is missing
    below such a folder; the path is then its own real form. None when that cannot be shown (a
    link, a ``..``, a deeper missing name, no ``openat2``): the walk decides."""
    if not parts or ".." in parts or not _OPENAT2.ready():
        return None
    path = start.rstrip("/") + "/" + "/".join(parts)
    resolve = _NO_LINKS
    try:
        os.close(_OPENAT2.open(_AT_FDCWD, path, _PATH or os.O_RDONLY, 0, resolve))
        return path
    except FileNotFoundError:
        pass
    except OSError:
        return None
    parent = path.rsplit("/", 1)[0] or "/"
    try:
        fd = _OPENAT2.open(_AT_FDCWD, parent, _WALK_FLAGS, 0, resolve)
    except OSError:
        return None
    try:
        os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return path  # to be created, in a folder with no link on its way
    except OSError:
        return None
    finally:
        os.close(fd)
    return None  # it appeared meanwhile: let the walk look at it


def walk(start: str, parts: list[str]) -> str:
    """Follow ``parts`` from the real folder ``start`` like the kernel does, every component
    examined through its folder's descriptor with no-follow: a symlink's text is read
    (``readlinkat``) and followed by this walk, ``..`` climbs, a missing name ends the
    examination (the rest is taken as named, to be created). Returns the real absolute path.

    Raises:
        SymlinkLoop: more than :data:`MAX_SYMLINK_HOPS` symlinks.
        OSError: ``ELOOP`` a folder became a symlink while it was being entered; ``EACCES``
            ... from examining a component.
    """
    fast = _symlink_free(start, parts)
    if fast is not None:
        return fast
    current = start
    pending = list(reversed(parts))
    hops = 0
    fd: int | None = None  # a descriptor of `current` while it is an examined folder
    missing = False
    try:
        while pending:
            part = pending.pop()
            if part == "..":
                current = os.path.dirname(current) or "/"
                if fd is not None:
                    os.close(fd)
                fd, missing = None, False
                continue
            candidate = current.rstrip("/") + "/" + part
            if fd is None and not missing:
                fd = _dir_fd(current)
                missing = fd is None
            if fd is None:
                current = candidate
                continue
            try:
                info = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                os.close(fd)
                fd, missing, current = None, True, candidate
                continue
            if stat.S_ISLNK(info.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise SymlinkLoop(errno.ELOOP, "too many symlinks")
                text = os.readlink(part, dir_fd=fd).replace("\\", "/")
                if text.startswith("/"):
                    os.close(fd)
                    fd, current = None, "/"
                pending.extend(reversed(_components(text)))
                continue
            if stat.S_ISDIR(info.st_mode) and pending:
                # no-follow: a folder swapped for a link since the stat fails here (ELOOP)
                # (O_DIRECTORY | O_NOFOLLOW on a link is ENOTDIR, O_PATH or not)
                try:
                    nxt = os.open(part, _WALK_FLAGS | _NOFOLLOW, dir_fd=fd)
                except NotADirectoryError as exc:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from exc
                os.close(fd)
                fd = nxt
            else:
                os.close(fd)
                fd = None
                missing = not stat.S_ISDIR(info.st_mode)  # a file: nothing can be below it
            current = candidate
        return current
    finally:
        if fd is not None:
            os.close(fd)


def _beneath(inner: str) -> str:
    """``inner`` when it can only name something below its base (no ``..``, not absolute)."""
    if inner.startswith("/") or ".." in inner.split("/"):
        raise OSError(errno.EXDEV, "a path leaving its root is not followed")
    return inner


def lstat_below(base: str, inner: str) -> os.stat_result:
    """What ``base/inner`` is, not following it if it is a link, nor any link on the way.

    Raises:
        OSError: ``ELOOP`` a link on the way, ``EXDEV`` an ``inner`` leaving ``base``,
            ``ENOENT`` ...
    """
    if _beneath(inner) in ("", "."):
        fd = open_below(base, ".", _WALK_FLAGS)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)
    with parent_of(base, inner) as (fd, name):
        return os.stat(name, dir_fd=fd, follow_symlinks=False)


def kinds_below(base: str, inner: str) -> dict[str, int]:
    """The names in the folder ``base/inner`` with the file type of each, as
    :func:`stat.S_IFMT` gives it (``S_IFLNK`` for a link, never what it points to; ``0`` when
    the type cannot be told).

    Raises:
        OSError: as :func:`lstat_below`; ``ENOTDIR`` when it is not a folder.
    """
    fd = open_below(base, _beneath(inner) or ".", DIR_FLAGS)
    out: dict[str, int] = {}
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        kind = stat.S_IFDIR
                    elif entry.is_file(follow_symlinks=False):
                        kind = stat.S_IFREG
                    elif entry.is_symlink():
                        kind = stat.S_IFLNK
                    else:
                        kind = stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
                except OSError:
                    kind = 0
                out[entry.name] = kind
    finally:
        os.close(fd)
    return out


def stats_below(base: str, inner: str) -> dict[str, os.stat_result]:
    """The names in the folder ``base/inner`` with what each is (``lstat``: a link is a link).

    Raises:
        OSError: as :func:`kinds_below`.
    """
    fd = open_below(base, _beneath(inner) or ".", DIR_FLAGS)
    out: dict[str, os.stat_result] = {}
    try:
        for name in os.listdir(fd):
            with contextlib.suppress(OSError):
                out[name] = os.stat(name, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)
    return out


def read_below(base: str, inner: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``base/inner`` (one more than allowed
    tells the caller it is larger), opened with no link followed and without blocking on a
    FIFO.

    Raises:
        OSError: as :func:`lstat_below`; ``EINVAL`` when it is not a regular file.
    """
    fd = open_below(base, _beneath(inner), os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def remove_below(base: str, inner: str) -> None:
    """Remove ``base/inner``: a folder with everything in it, anything else (a link too) by
    its name alone. The folder holding it is reached with no link on the way, and a folder is
    emptied through descriptors (:func:`shutil.rmtree` with ``dir_fd``, which refuses a folder
    swapped for a link meanwhile), so nothing outside ``base`` is removed.

    Raises:
        OSError: as :func:`parent_of` (``ELOOP`` a link on the way); what is already gone is
            no error.
    """
    with parent_of(base, _beneath(inner)) as (fd, name):
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(name, ignore_errors=True, dir_fd=fd)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)

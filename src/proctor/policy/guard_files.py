"""The guard files of a workspace, read once: its guard config and the modules it names.

A workspace names Python guard modules in ``proctor.toml`` or ``.proctor/config`` (same TOML)::

    [policy]
    guards = "guards.py"          # a path in the workspace, or a dotted module name
                                  # (a list of either is accepted too)

:func:`read_guard_files` reads those files once, into memory, and hashes the bytes it read:
what a person trusts (``proctor trust``), what the policy cache is keyed on and what is
executed are the same bytes, never a file opened again by name. Every file is opened through
directory descriptors from the workspace root, one component at a time, with no link followed:
a guard file (or a folder on its way) that is a link, a special file, or a name with ``..`` in it
is refused, so nothing is read from outside the workspace however the tree changes meanwhile.
A dotted name ``a.b`` is found as ``a/b.py`` or ``a/b/__init__.py``.

This is the seam between reading (here) and executing (:mod:`proctor.policy.user_guards`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError

__all__ = [
    "CONFIG_FILES",
    "MAX_GUARD_FILE_BYTES",
    "GuardFile",
    "GuardFiles",
    "guard_modules",
    "read_guard_files",
]

CONFIG_FILES: tuple[str, ...] = ("proctor.toml", ".proctor/config")
"""Where a workspace may name its guard module, relative to the workspace."""

MAX_GUARD_FILE_BYTES = 1024 * 1024
"""The largest config or guard module read; a bigger one is refused."""

_POLICY_KEYS = frozenset({"guards"})


@dataclass(frozen=True, slots=True)
class GuardFile:
    """One file as read: its workspace-relative path, its bytes and their ``sha256:`` digest.

    Attributes:
        ref: for a guard module, the reference the config gave (``guards.py``, ``a.b``);
            for a config file, its name.
    """

    path: str
    ref: str
    data: bytes
    sha256: str


@dataclass(frozen=True, slots=True)
class GuardFiles:
    """A workspace's guard config files (those present) and the guard modules they name.

    ``digest`` is what a person trusts: ``sha256:`` over the canonical JSON list of every
    file's path and digest, config files first, then the modules in config order.
    """

    root: Path
    config: tuple[GuardFile, ...]
    modules: tuple[GuardFile, ...]
    digest: str

    @property
    def files(self) -> tuple[GuardFile, ...]:
        """Every file the digest covers, in its order."""
        return (*self.config, *self.modules)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_guard_files(workspace: Path) -> GuardFiles:
    """Read the workspace's guard config and every guard module it names, once.

    Raises:
        ConfigError: ``bad_config``: a config file is a link or not a regular file, too large,
            not valid TOML, ``[policy]`` holds an unknown key or a ``guards`` value that is
            not a string or list of strings, or the two config files name different modules;
            ``bad_guard_module``: a module is not a module name or a ``.py`` path, lies
            outside the workspace, is reached through a link, is not a regular file, is too
            large or is missing.
    """
    root = workspace.resolve()
    config: list[GuardFile] = []
    named: dict[str, tuple[str, ...]] = {}
    for name in CONFIG_FILES:
        data = _read_config(root, name)
        if data is None:
            continue
        config.append(GuardFile(name, name, data, _digest(data)))
        refs = _parse_refs(name, data)
        if refs is not None:
            named[name] = refs
    if len(set(named.values())) > 1:
        raise ConfigError(
            f"{' and '.join(named)} name different guard modules; name them in one place",
            code="bad_config",
        )
    refs = next(iter(named.values()), ())
    modules = tuple(_read_module(root, ref) for ref in refs)
    listing = [[f.path, f.sha256] for f in (*config, *modules)]
    canonical = json.dumps(listing, separators=(",", ":"), ensure_ascii=False).encode()
    return GuardFiles(root, tuple(config), modules, _digest(canonical))


def guard_modules(workspace: Path) -> tuple[str, ...]:
    """The guard module references the workspace's config names (empty when none); nothing
    is imported and the modules are not read.

    Raises:
        ConfigError: as :func:`read_guard_files` for the config files.
    """
    root = workspace.resolve()
    named: dict[str, tuple[str, ...]] = {}
    for name in CONFIG_FILES:
        data = _read_config(root, name)
        refs = None if data is None else _parse_refs(name, data)
        if refs is not None:
            named[name] = refs
    if len(set(named.values())) > 1:
        raise ConfigError(
            f"{' and '.join(named)} name different guard modules; name them in one place",
            code="bad_config",
        )
    return next(iter(named.values()), ())


def _parse_refs(name: str, data: bytes) -> tuple[str, ...] | None:
    """The ``[policy] guards`` of one config file's bytes, or None when it names none."""
    import tomllib  # read only when a workspace has a config file

    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{name}: not readable as TOML ({exc})", code="bad_config") from None
    section = doc.get("policy")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ConfigError(f"{name}: [policy] must be a table", code="bad_config")
    unknown = sorted(set(section) - _POLICY_KEYS)
    if unknown:
        raise ConfigError(
            f"{name}: [policy] has unknown key(s) {unknown}; it accepts only 'guards'",
            code="bad_config",
        )
    value = section.get("guards")
    if value is None:
        return None
    refs = (value,) if isinstance(value, str) else value
    if not isinstance(refs, list | tuple) or not all(isinstance(r, str) and r for r in refs):
        raise ConfigError(
            f"{name}: [policy] guards must be a module path or a list of them",
            code="bad_config",
        )
    return tuple(refs)


def _read_config(root: Path, name: str) -> bytes | None:
    try:
        return _read_inside(root, tuple(name.split("/")))
    except FileNotFoundError:
        return None
    except _Refused as exc:
        raise ConfigError(f"{name}: {exc.why}", code="bad_config") from None
    except OSError as exc:
        raise ConfigError(f"{name}: not readable ({exc.strerror})", code="bad_config") from None


def _candidates(ref: str) -> list[tuple[str, ...]]:
    if ref.endswith(".py") or "/" in ref or "\\" in ref:
        parts = tuple(p for p in ref.split("/") if p not in ("", "."))
        if ref.startswith("/") or "\\" in ref or ".." in parts or not parts:
            raise ConfigError(
                f"guard module '{ref}' lies outside the workspace", code="bad_guard_module"
            )
        return [parts]
    parts = tuple(ref.split("."))
    if not all(p.isidentifier() for p in parts):
        raise ConfigError(
            f"guard module '{ref}' is not a module name or a .py path", code="bad_guard_module"
        )
    return [(*parts[:-1], parts[-1] + ".py"), (*parts, "__init__.py")]


def _read_module(root: Path, ref: str) -> GuardFile:
    for parts in _candidates(ref):
        try:
            data = _read_inside(root, parts)
        except FileNotFoundError:
            continue
        except _Refused as exc:
            raise ConfigError(f"guard module '{ref}' {exc.why}", code="bad_guard_module") from None
        except OSError as exc:
            raise ConfigError(
                f"guard module '{ref}' is not readable ({exc.strerror})", code="bad_guard_module"
            ) from None
        return GuardFile("/".join(parts), ref, data, _digest(data))
    raise ConfigError(
        f"guard module '{ref}' is not found in the workspace", code="bad_guard_module"
    )


class _Refused(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


_LINK = "is reached through a link; name the file itself, inside the workspace"


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _read_inside(root: Path, parts: tuple[str, ...]) -> bytes:
    """The bytes of ``root/parts...``, opened one component at a time with no link followed.

    Raises:
        FileNotFoundError: a component is missing.
        _Refused: a component is a link, a folder on the way is not a folder, or the file is
            not a regular file or too large.
        OSError: anything else the system refused.
    """
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(part, fd)):
                    raise _Refused(_LINK) from None
                if exc.errno == errno.ENOTDIR:
                    raise _Refused("has a file where its path needs a folder") from None
                raise
            os.close(fd)
            fd = nxt
        try:
            # O_NONBLOCK: a FIFO put in the file's place must not hang the open
            leaf = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Refused(_LINK) from None
            raise
    finally:
        os.close(fd)
    try:
        info = os.fstat(leaf)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("is not a regular file")
        if info.st_size > MAX_GUARD_FILE_BYTES:
            raise _Refused(f"is larger than {MAX_GUARD_FILE_BYTES} bytes")
        chunks = []
        size = 0
        while chunk := os.read(leaf, 65536):
            size += len(chunk)
            if size > MAX_GUARD_FILE_BYTES:
                raise _Refused(f"is larger than {MAX_GUARD_FILE_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(leaf)

"""Which host folders a sandbox sees at all: the allowlist (``docs/sandbox.md``).

The seam with :mod:`proctor.runtime.boundary.sandbox_paths`: that module decides what a run may
write and what it must not see *inside* the folders a sandbox shows; this one decides which
host folders are shown in the first place. Nothing of the host is visible unless it is named
here:

- **system**: ``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/etc``, ``/opt``, ``/nix/store``,
  bound read-only (a top-level link such as ``/bin -> usr/bin`` is made again as a link);
  inside ``/etc``, its secrets (:func:`etc_secrets`) are hidden;
- **toolchains** (:func:`toolchains`): the interpreter proctor runs on (its prefix, base
  prefix and executable's folder), proctor's own package folder, the base installation of the
  workspace's virtualenv, the installation of the program a call starts, the folders of the
  command's ``PATH`` (and the installation prefix above a ``bin`` folder that looks like one),
  and the folders a workspace declares in ``proctor.toml`` ``[sandbox] read = [...]``
  (:func:`declared_reads`); never a folder that is, or holds, the home of any account;
- everything else (``/home``, ``/root``, ``/var``, ``/srv``, ``/run``, ``/mnt``, ``/media``,
  ``/sys`` ...) is absent: the sandbox's own root is an empty read-only tmpfs.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from proctor.core.paths import sensitive_reason
from proctor.errors import ConfigError

__all__ = [
    "SYSTEM",
    "account_homes",
    "declared_reads",
    "etc_secrets",
    "system_view",
    "toolchains",
]

SYSTEM = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/run/current-system",
)
"""The system folders every sandbox sees, read-only."""

# Named secrets of /etc, hidden even when the walk below says they are world-readable.
_ETC_NAMED = (
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/sudoers",
    "/etc/sudoers.d",
)
_ETC_WALK_MAX = 20_000
# A bin folder's parent is bound as a whole installation only when it holds one of these (a
# Python, node or conda prefix, pyenv's or nvm's root); a data folder such as ~/.local is not.
_PREFIX_MARKS = ("pyvenv.cfg", "conda-meta", "lib", "libexec", "versions")
_ROOT_MARKS = ("pyvenv.cfg", "conda-meta", "versions")
# A login account's uid starts here (Debian's UID_MIN); below it (but root) are service accounts,
# whose "homes" are system folders such as /bin or /usr/sbin.
_UID_MIN = 1000
_UID_NOBODY = 65534

_ETC_CACHE: dict[str, tuple[int, tuple[Path, ...]]] = {}
_ETC_LOCK = threading.Lock()


def _real(path: str | Path) -> Path | None:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return None


def _inside(path: Path, folder: Path) -> bool:
    inner, outer = str(path), str(folder)
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def system_view() -> tuple[list[Path], list[tuple[str, str]]]:
    """The system folders that exist here (real paths) and the links to make again
    (``(link, target)``, a top-level ``/bin -> usr/bin`` on a merged-/usr system)."""
    folders: list[Path] = []
    links: list[tuple[str, str]] = []
    for name in SYSTEM:
        try:
            info = os.lstat(name)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            with contextlib.suppress(OSError):
                links.append((name, os.readlink(name)))
            target = _real(name)
            if target is not None and target.is_dir() and target not in folders:
                folders.append(target)
        elif stat.S_ISDIR(info.st_mode):
            folders.append(Path(name))
    # a target already inside another folder is not bound again
    kept = [f for f in folders if not any(f != o and _inside(f, o) for o in folders)]
    return kept, links


def etc_secrets() -> list[Path]:
    """What of ``/etc`` a sandbox never sees: the named secrets (shadow passwords, the TLS
    private keys, sudo's rules) and every entry others may not read (a folder hidden whole):
    proctor may run as root, whose uid owns them. The walk is cached per process until
    ``/etc`` itself changes; the named ones are looked at on every call."""
    try:
        mark = os.stat("/etc").st_mtime_ns
    except OSError:
        return []
    with _ETC_LOCK:
        known = _ETC_CACHE.get("/etc")
        if known is None or known[0] != mark:
            known = _ETC_CACHE["/etc"] = (mark, tuple(_walk_etc()))
    found = [Path(p) for p in _ETC_NAMED if os.path.lexists(p)]
    found += [p for p in known[1] if p not in found]
    found += [
        Path("/etc/ssh", n)
        for n in _listdir("/etc/ssh")
        if n.startswith("ssh_host_") and not n.endswith(".pub")
    ]
    return list(dict.fromkeys(found))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _walk_etc() -> list[Path]:
    found: list[Path] = []
    for visited, (folder, dirs, files) in enumerate(os.walk("/etc", followlinks=False)):
        kept = []
        for name in dirs:
            path = os.path.join(folder, name)
            if _private(path):
                found.append(Path(path))
            else:
                kept.append(name)
        dirs[:] = kept if visited < _ETC_WALK_MAX else []
        found += [Path(folder, n) for n in files if _private(os.path.join(folder, n))]
    return found


def _private(path: str) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(info.st_mode):
        return False
    return not info.st_mode & stat.S_IROTH


def account_homes(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The home folders of every login account in the password database (root's and every
    uid from 1000 but ``nobody``), and ``HOME`` of ``environ`` and of this process: none is
    ever shown, whatever ``HOME`` says."""
    homes: list[str] = list(_login_homes(_mark("/etc/passwd")))
    with contextlib.suppress(KeyError):
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    homes += [h for h in ((environ or {}).get("HOME"), os.environ.get("HOME")) if h]
    out: list[Path] = []
    for raw in homes:
        if not os.path.isabs(raw):
            continue
        real = _real(raw)
        if real is not None and real != Path("/") and real not in out:
            out.append(real)
    return out


def _mark(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


@lru_cache(maxsize=2)
def _login_homes(mark: int) -> tuple[str, ...]:
    """The homes of login accounts, read again when the password file changes (``mark``)."""
    del mark
    with contextlib.suppress(OSError):
        return tuple(
            e.pw_dir for e in pwd.getpwall() if e.pw_uid == 0 or _UID_MIN <= e.pw_uid < _UID_NOBODY
        )
    return ()


def declared_reads(workspace_root: Path) -> list[Path]:
    """The folders ``proctor.toml`` ``[sandbox] read = [...]`` declares (real paths that
    exist; a declared path that is missing is left out).

    Raises:
        ConfigError: ``sandbox_read_invalid``: the table or the list is malformed, an entry is
            not an absolute path, or it is ``/``, a home of an account or a folder that holds
            one.
    """
    path = workspace_root / "proctor.toml"
    if not path.is_file():
        return []
    import tomllib  # read only when the workspace has a proctor.toml

    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"proctor.toml is not valid TOML: {exc}") from exc
    section = document.get("sandbox", {})
    if not isinstance(section, dict):
        raise ConfigError("proctor.toml: [sandbox] must be a table", code="sandbox_read_invalid")
    unknown = sorted(set(section) - {"read"})
    if unknown:
        raise ConfigError(
            f"proctor.toml: unknown key in [sandbox]: {unknown[0]}", code="sandbox_read_invalid"
        )
    entries = section.get("read", [])
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConfigError(
            "proctor.toml: sandbox.read must be a list of absolute folder paths",
            code="sandbox_read_invalid",
        )
    homes = account_homes()
    out: list[Path] = []
    for entry in entries:
        if not os.path.isabs(entry):
            raise ConfigError(
                f"proctor.toml: sandbox.read entry '{entry}' is not an absolute path",
                code="sandbox_read_invalid",
            )
        real = _real(entry)
        if real is None or not real.exists():
            continue
        if real == Path("/") or any(_inside(h, real) for h in homes):
            raise ConfigError(
                f"proctor.toml: sandbox.read entry '{entry}' is, or holds, a home folder; "
                "declare the toolchain folder inside it instead",
                code="sandbox_read_invalid",
            )
        out.append(real)
    return out


def _installation(folder: Path, homes: Sequence[Path]) -> Path:
    """The installation a ``bin`` folder belongs to when its parent looks like one, else the
    folder itself. Right inside a home only a virtualenv, a conda prefix or a version
    manager's root counts (``~/miniconda3``, ``~/.pyenv``), never a data folder that happens to
    hold a ``lib`` (``~/.local``)."""
    if folder.name != "bin":
        return folder
    parent = folder.parent
    marks = _ROOT_MARKS if parent.parent in homes else _PREFIX_MARKS
    if parent != Path("/") and any(os.path.lexists(parent / m) for m in marks):
        return parent
    return folder


def _venv_base(prefix: Path, homes: Sequence[Path]) -> list[Path]:
    """The base installation a virtualenv at ``prefix`` runs on (``home`` in its
    ``pyvenv.cfg``: a ``bin`` folder that holds a ``python3`` or ``python`` and belongs to an
    installation; a run may have written that file, and must not name any other folder)."""
    try:
        text = (prefix / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() != "home" or not os.path.isabs(value.strip()):
            continue
        home = _real(value.strip())
        if home is None or not any((home / n).is_file() for n in ("python3", "python")):
            return []
        prefix = _installation(home, homes)
        return [prefix] if prefix != home else []  # an installation, never a bare folder
    return []


def _of_program(path: Path, homes: Sequence[Path]) -> list[Path]:
    """The installation of a program in a ``bin`` folder, by its path as named and as
    resolved (a virtualenv's ``python`` is a link into its base installation), with a
    virtualenv's base. A program elsewhere, or in a ``bin`` folder that belongs to no
    installation (``~/bin``), brings nothing: the program a call names may be chosen by an
    agent, and a bare folder is shown only when the session's ``PATH`` names it."""
    resolved = _real(path)
    out: list[Path] = []
    for folder in (_real(path.parent), None if resolved is None else resolved.parent):
        if folder is None or folder.name != "bin":
            continue
        prefix = _installation(folder, homes)
        if prefix != folder:
            out += [prefix, *_venv_base(prefix, homes)]
    return out


def _program(argv0: str, cwd: Path, search: str) -> Path | None:
    if "/" in argv0:
        return Path(argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0))
    for folder in search.split(os.pathsep):
        if os.path.isabs(folder):
            candidate = os.path.join(folder, argv0)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return Path(candidate)
    return None


def toolchains(
    *,
    env: Mapping[str, str],
    argv0: str | None,
    cwd: Path,
    workspace_root: Path | None,
    declared: Sequence[Path],
    shown: Iterable[Path],
    homes: Sequence[Path],
    hidden: Sequence[Path],
) -> list[Path]:
    """The toolchain folders (real paths) a call's sandbox binds read-only, besides
    ``shown`` (the system folders and writable roots, which already show them).

    A candidate that is ``/``, a home in ``homes`` or a folder holding one, a path with a
    sensitive folder in it (``.ssh``, ``.aws`` ...), or one that lies in a ``hidden`` path, is
    left out; where a ``bin`` folder's installation is refused so, the ``bin`` folder alone is
    taken.
    """
    wanted: list[Path] = list(_interpreter(tuple(homes)))
    if workspace_root is not None:
        for name in (".venv", "venv"):
            wanted += _venv_base(workspace_root / name, homes)
    venv = env.get("VIRTUAL_ENV", "")
    if os.path.isabs(venv):
        real = _real(venv)
        if real is not None and (real / "pyvenv.cfg").is_file():
            wanted += [real, *_venv_base(real, homes)]
    search = env.get("PATH", "")
    if argv0:
        program = _program(argv0, cwd, search)
        if program is not None:
            wanted += _of_program(program, homes)
    wanted += _search_path(search, tuple(homes))
    wanted += declared
    visible = list(shown)
    out: list[Path] = []
    for path in wanted:
        if path == Path("/") or not path.is_dir():
            continue
        if any(_inside(path, v) for v in [*visible, *out]):
            continue
        if any(_inside(h, path) for h in homes) or any(_inside(path, h) for h in hidden):
            continue
        if sensitive_reason(str(path).lstrip("/")) is not None:
            continue
        out = [o for o in out if not _inside(o, path)]
        out.append(path)
    return out


@lru_cache(maxsize=4)
def _interpreter(homes: tuple[Path, ...]) -> tuple[Path, ...]:
    """The interpreter proctor runs on (its prefixes, its executable's installation) and
    proctor's own package (the worker's runner lives there): fixed for the process."""
    wanted: list[Path] = []
    for raw in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        real = _real(raw)
        if real is not None:
            wanted.append(real)
    wanted += _of_program(Path(sys.executable), homes)
    package = _real(Path(__file__).parents[2])
    if package is not None:
        wanted.append(package)
    return tuple(wanted)


@lru_cache(maxsize=64)
def _search_path(search: str, homes: tuple[Path, ...]) -> tuple[Path, ...]:
    """The folders of a ``PATH`` value and their installations, resolved once per process
    and value (a folder that appears later on an unchanged ``PATH`` is not seen)."""
    wanted: list[Path] = []
    for folder in search.split(os.pathsep):
        if not os.path.isabs(folder):
            continue
        real = _real(folder)
        if real is not None and real.is_dir():
            wanted.append(_installation(real, homes))
            wanted.append(real)  # taken when its installation is refused
    return tuple(wanted)


def toolchain_secrets(folders: Iterable[Path]) -> list[Path]:
    """The sensitive entries at the top of each toolchain folder (a ``credentials.toml``,
    an ``.npmrc``): hidden like those of a writable root."""
    found: list[Path] = []
    for folder in folders:
        found += [folder / n for n in _listdir(str(folder)) if sensitive_reason(n) is not None]
    return found

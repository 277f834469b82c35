"""Which files of a workspace are what: authority a run never writes, state it never touches.

The name rules are pure and live in :mod:`proctor.core.paths`; here is what needs the disk or
the environment to know (``docs/admission.md``, "What a run never writes"):

- **authority found on disk** (a bounded walk of the workspace, :func:`discovered`): every skill
  package's ``SKILL.md`` and ``run.yaml``; every path of another tool's code-running
  configuration (:data:`proctor.core.paths.TOOL_CONFIG`); ``policies/``, ``directives/``,
  ``proctor.toml`` and ``.proctor/`` when they exist; ``.git/config`` and ``.git/hooks``;
- **what a config names that proctor loads** (:func:`guard_paths`): the guard modules
  ``proctor.toml`` (or ``.proctor/config``) names under ``[policy] guards``: the file for a
  path, the whole package folder for a dotted name;
- **the workspace's own word** (:func:`containment_config`): ``[containment] authority`` in
  ``proctor.toml`` adds files or folders; ``allow_write`` lifts the tool-config rule for the
  paths it names, and nothing else (the run start audits it);
- **proctor's state wherever it is configured** (:func:`state_paths`): the receipt folder, the
  audit log, the run database (with its ``-wal``, ``-shm``, ``-journal``, ``-checked``,
  ``-damaged`` and ``-checking`` files), the home folder and the signing key, as
  ``PROCTOR_RECEIPT_DIR``, ``PROCTOR_AUDIT_LOG``, ``PROCTOR_DATABASE_PATH``, ``PROCTOR_HOME``
  and ``PROCTOR_SIGNING_KEY`` name them. A run never reads, lists or writes one, in the
  workspace or in any root it reaches.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from proctor.contracts.values import dataclass
from proctor.core.paths import (
    TOOL_CONFIG,
    authority_reason,
    normalize_relpath,
    path_under,
    sensitive_reason,
    tool_config_entry,
)
from proctor.errors import ConfigError
from proctor.runtime.boundary.fds import kinds_below
from proctor.runtime.boundary.real import real_path

__all__ = [
    "STATE_VARIABLES",
    "WALK_MAX_DEPTH",
    "WALK_MAX_DIRS",
    "WALK_SKIP",
    "Containment",
    "Rules",
    "containment_config",
    "discovered",
    "guard_paths",
    "lift",
    "state_paths",
]

STATE_VARIABLES = (
    "PROCTOR_RECEIPT_DIR",
    "PROCTOR_AUDIT_LOG",
    "PROCTOR_DATABASE_PATH",
    "PROCTOR_HOME",
    "PROCTOR_SIGNING_KEY",
)
"""The settings that place proctor's state; wherever they point, a run never touches it."""

WALK_MAX_DIRS = 20_000
WALK_MAX_DEPTH = 12
WALK_SKIP = frozenset({".git", ".proctor", "node_modules", ".venv", "venv", "__pycache__"})
"""The bounds of every walk of a root (this module's authority walk, the sandbox's walk for
nested sensitive files) and the folders both skip."""
_ROOT_NAMES = ("policies", "directives", "proctor.toml", ".proctor")
_GIT_CODE = ("config", "hooks")  # what git runs: hooks, and the commands its config names
_DB_COMPANIONS = ("", "-wal", "-shm", "-journal", "-checked", "-damaged", "-checking")
_LOG_COMPANIONS = ("", ".torn", "-verified")  # the log, its torn lines, its verified mark
# the last name of every TOOL_CONFIG entry, to skip the full match for most names on the walk
_TOOL_LAST = frozenset(e.rstrip("/").rsplit("/", 1)[-1] for e in TOOL_CONFIG)
_CONTAINMENT_KEYS = frozenset({"authority", "allow_write"})


@dataclass(frozen=True)
class Containment:
    """``[containment]`` of ``proctor.toml``: paths added as authority, and paths lifted from
    the tool-config rule (workspace-relative, normalised)."""

    authority: frozenset[str] = frozenset()
    allow_write: frozenset[str] = frozenset()


def _maybe_tool_config(name: str) -> bool:
    return not name.isascii() or name.casefold().rstrip(" .") in _TOOL_LAST


def discovered(root: Path) -> frozenset[str]:
    """The authority paths that exist in the workspace (see the module docstring), by a walk
    bounded to 20,000 folders and 12 levels that skips ``.git``, ``.proctor``,
    ``node_modules``, virtualenvs and ``__pycache__`` and never follows a symlink: every folder
    is listed through descriptors (:func:`~.fds.kinds_below`), so one swapped for a link
    meanwhile is not listed and nothing outside ``root`` is."""
    base = str(root)
    try:
        top = kinds_below(base, ".")
    except OSError:
        return frozenset()
    found: set[str] = {name for name in _ROOT_NAMES if name in top}
    if top.get(".git") == stat.S_IFDIR:
        with contextlib.suppress(OSError):
            git = kinds_below(base, ".git")
            found.update(f".git/{n}" for n in _GIT_CODE if n in git)
    pending: list[tuple[str, int]] = [("", 0)]
    visited = 0
    while pending and visited < WALK_MAX_DIRS:
        rel, depth = pending.pop()
        visited += 1
        if rel:
            try:
                kinds = kinds_below(base, rel)
            except OSError:
                continue
        else:
            kinds = top
        prefix = rel + "/" if rel else ""
        files = []
        for name, kind in kinds.items():
            if kind != stat.S_IFDIR:
                files.append(name)
            elif _maybe_tool_config(name) and tool_config_entry(prefix + name) is not None:
                found.add(prefix + name)  # the whole folder; nothing below it to add
            elif name not in WALK_SKIP and depth < WALK_MAX_DEPTH:
                pending.append((prefix + name, depth + 1))
        for name in files:
            if _maybe_tool_config(name) and tool_config_entry(prefix + name) is not None:
                found.add(prefix + name)
        names = {f.casefold(): f for f in files}
        if "skill.md" in names:
            found.add(prefix + names["skill.md"])
            if "run.yaml" in names:
                found.add(prefix + names["run.yaml"])
    return frozenset(found)


def lift(root: Path, found: frozenset[str], allowed: frozenset[str]) -> frozenset[str]:
    """``found`` without the paths ``allowed`` lifts: an allowed path is dropped, and a found
    folder holding one is replaced by what is in it (down to the allowed path), so the rest of
    the folder stays listed. Folders are listed through descriptors (no link followed)."""
    out: set[str] = set()
    for entry in found:
        if path_under(entry, allowed):
            continue
        holds = [a for a in allowed if path_under(a, frozenset({entry}))]
        if not holds:
            out.add(entry)
            continue
        try:
            names = sorted(kinds_below(str(root), entry))
        except OSError:
            out.add(entry)  # not a folder, a link, or gone
            continue
        out |= lift(root, frozenset(f"{entry}/{n}" for n in names), allowed)
    return frozenset(out)


def _inside(root: Path, path: Path) -> str | None:
    real = os.path.realpath(path)
    base = str(root)
    if real == base:
        return None  # the workspace itself is never one file
    if real.startswith(base.rstrip("/") + "/"):
        return real[len(base.rstrip("/")) + 1 :]
    return None


def guard_paths(root: Path) -> frozenset[str]:
    """Workspace-relative guard modules the workspace's config names: a path names that file; a
    dotted name ``a.b.c`` names its package folder ``a/b`` (``c.py`` and ``c/`` are in it and
    may import their siblings); a plain name ``g`` names ``g.py`` and ``g/``. Each is given as
    named and, when it resolves elsewhere inside the workspace, as the file it opens.

    Raises:
        ConfigError: the config is invalid (:func:`proctor.policy.user_guards.guard_modules`).
    """
    # imported here: reading a config is only needed for a write, not by every CLI command
    from proctor.policy.user_guards import guard_modules

    found: set[str] = set()
    for ref in guard_modules(root):
        if ref.endswith(".py") or "/" in ref or "\\" in ref:
            named = [normalize_relpath(ref)]
        else:
            parts = ref.split(".")
            if not all(p.isidentifier() for p in parts):
                continue  # loading refuses it (bad_guard_module): nothing is executed
            named = ["/".join(parts[:-1])] if len(parts) > 1 else [parts[0], parts[0] + ".py"]
        for rel in named:
            if not rel or rel == ".." or rel.startswith("../") or rel.startswith("/"):
                continue  # outside the workspace: loading refuses it
            found.add(rel)
            real = _inside(root, root / rel)
            if real is not None:
                found.add(real)
    return frozenset(found)


def _entries(doc: Mapping[str, object], key: str) -> frozenset[str]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(
            f"proctor.toml: [containment] {key} must be a list of workspace paths",
            code="bad_config",
        )
    out: set[str] = set()
    for entry in value:
        rel = normalize_relpath(entry)
        text = entry.replace("\\", "/")
        if not rel or text.startswith("/") or rel == ".." or rel.startswith("../"):
            raise ConfigError(
                f"proctor.toml: [containment] {key} names {entry[:80]!r}; an entry is a path "
                "inside the workspace, relative to it",
                code="bad_config",
            )
        out.add(rel)
    return frozenset(out)


def containment_config(root: Path) -> Containment:
    """``[containment]`` of ``<root>/proctor.toml`` (empty when either is absent).

    Raises:
        ConfigError: ``bad_config``: not valid TOML, an unknown key, an entry that is not a
            relative path inside the workspace, or an ``allow_write`` entry that is not a
            tool-config path (it lifts that rule only: never ``policies/``, ``proctor.toml``, a
            skill package, ``.proctor/``, a sensitive file or a guard module).
    """
    path = root / "proctor.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Containment()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("proctor.toml cannot be read as UTF-8 text", code="bad_config") from exc
    import tomllib  # here: only a workspace with a proctor.toml needs it

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"proctor.toml is not valid TOML: {exc}", code="bad_config") from None
    section = doc.get("containment")
    if section is None:
        return Containment()
    if not isinstance(section, dict):
        raise ConfigError("proctor.toml: [containment] must be a table", code="bad_config")
    unknown = sorted(set(section) - _CONTAINMENT_KEYS)
    if unknown:
        raise ConfigError(
            f"proctor.toml: [containment] has unknown key(s) {unknown}; it accepts "
            "'authority' and 'allow_write'",
            code="bad_config",
        )
    authority = _entries(section, "authority")
    allow = _entries(section, "allow_write")
    guards = guard_paths(root)
    for entry in sorted(allow):
        if (
            tool_config_entry(entry) is None
            or authority_reason(entry) != "tool_config"
            or sensitive_reason(entry) is not None
            or path_under(entry, guards | authority)
        ):
            raise ConfigError(
                f"proctor.toml: [containment] allow_write names {entry!r}, which is not only "
                "another tool's configuration; allow_write lifts that rule and no other",
                code="bad_config",
            )
    return Containment(authority=authority, allow_write=allow)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def state_paths(root: Path, environ: Mapping[str, str], cwd: Path | None = None) -> frozenset[str]:
    """The real absolute paths of proctor's state the settings in ``environ`` place (see the
    module docstring). A relative setting is taken both from ``cwd`` (the process's folder, as
    the stores open it) and from the workspace root, so either reading is covered. The
    workspace's own ``.proctor/`` is not listed: the name rules cover it.

    Every path is resolved again at each call (a link swapped in between two calls is seen by
    the second); only the paths as named, a function of the texts of the root, the current
    folder and the settings alone, are kept between calls (:data:`_NAMED`)."""
    here = None if cwd is None else str(cwd)
    if here is None:
        try:  # noqa: SIM105 - no suppress context made and entered: asked per run
            here = os.getcwd()
        except OSError:  # a removed current folder reads nothing from it
            pass
    settings = tuple(map(environ.get, STATE_VARIABLES))  # no generator frame: asked per run
    # the home's default (no PROCTOR_HOME) is HOME's, or the account entry's
    key = (str(root), here, settings, os.environ.get("HOME"))
    named = _NAMED.get(key)
    if named is None:
        named = _named_state(root, None if here is None else Path(here), environ)
        if len(_NAMED) >= 64:
            _NAMED.clear()
        _NAMED[key] = named
    found = {real_path(path) for path in named}
    found.discard("/")
    return frozenset(found)


_NAMED: dict[tuple[object, ...], tuple[str, ...]] = {}


def _named_state(root: Path, here: Path | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The paths of proctor's state as the settings name them, before links are resolved."""
    named: list[str] = []

    def add(setting: str, suffixes: tuple[str, ...] = ("",)) -> None:
        path = Path(setting)
        if path.is_absolute():
            bases = [path]
        else:
            bases = [root / path] if here is None else [here / path, root / path]
        for base in bases:
            for suffix in suffixes:
                named.append(str(base.with_name(base.name + suffix)))

    for var in ("PROCTOR_RECEIPT_DIR", "PROCTOR_SIGNING_KEY"):
        value = environ.get(var)
        if value:
            add(value)
    log = environ.get("PROCTOR_AUDIT_LOG")
    if log:
        add(log, _LOG_COMPANIONS)
    database = environ.get("PROCTOR_DATABASE_PATH")
    if database:
        add(database, _DB_COMPANIONS)
    home = environ.get("PROCTOR_HOME")
    if home:
        add(home)
    else:
        # no home folder at all: nothing of proctor's is kept there
        with contextlib.suppress(OSError, RuntimeError):
            named.append(str(Path.home() / ".proctor"))
    return tuple(named)


class _Found:
    """What the disk says about a workspace's authority, found once and shared by every
    :class:`Rules` of the same root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._walked: frozenset[str] | None = None
        self._config: Containment | None = None
        self._guards: frozenset[str] | None = None

    @property
    def walked(self) -> frozenset[str]:
        if self._walked is None:
            self._walked = discovered(self.root)
        return self._walked

    @property
    def config(self) -> Containment:
        if self._config is None:
            self._config = containment_config(self.root)
        return self._config

    @property
    def guards(self) -> frozenset[str]:
        if self._guards is None:
            self._guards = guard_paths(self.root)
        return self._guards


class Rules:
    """Which files of one workspace are what: authority a run never writes, and proctor's state
    it never reads, lists or writes.

    Args:
        root: the workspace's real folder.
        extra_authority: workspace-relative paths that also grant authority (the run's own
            package files).
        environ: the settings that place proctor's state (:func:`state_paths`).

    The walk, the config and the guard modules are read on first use (a write), once.
    """

    def __init__(
        self,
        root: Path,
        *,
        extra_authority: frozenset[str] = frozenset(),
        environ: Mapping[str, str],
    ) -> None:
        self.root = root
        self.extra_authority = extra_authority
        self._found = _Found(root)
        self._state = state_paths(root, environ)
        # a state folder holding the whole workspace (a home above it, say) is state only
        # outside the workspace: its own files are judged by the other rules
        self._holding = frozenset(s for s in self._state if _under(str(root), s))
        self._authority_files: frozenset[str] | None = None

    def same_state(self, environ: Mapping[str, str]) -> bool:
        """Whether proctor's state, as ``environ`` places it, resolves now to the very paths
        these rules keep a run out of (each resolved again: a link swapped is seen)."""
        return state_paths(self.root, environ) == self._state

    def sharing(self, *, extra_authority: frozenset[str], environ: Mapping[str, str]) -> Rules:
        """Rules of the same workspace with other extras and settings; what was read from
        disk is shared."""
        other = Rules(self.root, extra_authority=extra_authority, environ=environ)
        other._found = self._found
        return other

    @property
    def authority_files(self) -> frozenset[str]:
        """Every workspace-relative path a run never writes, as it stands now (files and
        folders; a folder covers everything in it): ``policies/``, ``directives/``,
        ``proctor.toml`` and ``.proctor/`` when they exist, ``.git/config`` and ``.git/hooks``,
        every skill package's ``SKILL.md`` / ``run.yaml`` and every tool-config path the walk
        finds (:func:`discovered`, cached), the guard modules the config names
        (:func:`guard_paths`), ``[containment] authority``, the extra authority given, and
        proctor's state where its settings put it inside the workspace (:attr:`state_files`).
        Config-named and state paths are listed even before they exist. Tool-config paths
        ``[containment] allow_write`` lifts are left out (:func:`lift`).

        Raises:
            ConfigError: ``bad_config``: ``proctor.toml`` or ``.proctor/config`` is invalid.
        """
        if self._authority_files is None:
            found = self._found
            lifted = found.config.allow_write
            walked = lift(self.root, found.walked, lifted) if lifted else found.walked
            self._authority_files = (
                walked
                | found.guards
                | found.config.authority
                | self.extra_authority
                | self.state_files
            )
        return self._authority_files

    @property
    def state_files(self) -> frozenset[str]:
        """Workspace-relative paths of proctor's state its settings put inside the workspace
        outside ``.proctor/`` (a receipt folder, an audit log, a run database and its
        companions, the home, the signing key)."""
        base = str(self.root).rstrip("/") + "/"
        return frozenset(p[len(base) :] for p in self._state if p.startswith(base))

    @property
    def allow_write(self) -> frozenset[str]:
        """The tool-config paths ``[containment] allow_write`` lifts.

        Raises:
            ConfigError: ``bad_config`` (:func:`containment_config`).
        """
        return self._found.config.allow_write

    def is_state(self, real: str) -> bool:
        """Whether the real absolute path ``real`` is, or lies in, proctor's state."""
        for folder in self._state:
            if _under(real, folder):
                if folder in self._holding and _under(real, str(self.root)):
                    continue
                return True
        return False

    def write_rule(self, rel: str) -> str | None:
        """The authority rule (:data:`proctor.core.paths.AUTHORITY_RULES`) a write of the
        workspace path ``rel`` breaks, or None.

        Raises:
            ConfigError: ``bad_config``: the config that would say is invalid (a path a name
                rule refuses is refused without reading it).
        """
        named = authority_reason(rel)
        if named is not None and named != "tool_config":
            return named  # no workspace setting lifts these: the config need not be read
        rule = authority_reason(rel, self.authority_files, self.allow_write)
        if rule == "authority_file" and path_under(rel, self._found.guards):
            return "guard_module"
        return rule

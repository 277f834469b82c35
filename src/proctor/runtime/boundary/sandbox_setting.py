"""A run's sandbox setting (``PROCTOR_SANDBOX``, ``PROCTOR_BWRAP``): read at every run's start.

Kept apart from :mod:`proctor.runtime.boundary.sandbox` (the bubblewrap command line, the probe)
so that a run records its setting without importing what only a process call needs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Literal

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError

__all__ = [
    "BWRAP_ENV",
    "MODES",
    "SANDBOX_ENV",
    "SANDBOX_EXTRA",
    "SANDBOX_RECORD_EXTRA",
    "FoundExecutables",
    "SandboxMode",
    "SandboxSetting",
    "note_toolchains",
    "sandbox_setting",
    "stricter",
]

SandboxMode = Literal["required", "auto", "off"]
MODES: tuple[SandboxMode, ...] = ("required", "auto", "off")
"""The modes from the strictest to the loosest."""

SANDBOX_ENV = "PROCTOR_SANDBOX"
BWRAP_ENV = "PROCTOR_BWRAP"
SANDBOX_EXTRA = "sandbox"
"""The ``ToolContext.extras`` key under which admission hands a process tool its
:class:`SandboxUse`."""
SANDBOX_RECORD_EXTRA = "sandbox_record"
"""The ``ToolContext.extras`` key of the call's ``sandbox`` record (a dict the call's settled
record takes once the tool returns): a process tool adds the toolchains its sandbox bound
(:func:`note_toolchains`)."""


def note_toolchains(extras: Mapping[str, object], toolchains: Iterable[object]) -> None:
    """Record the toolchain folders a call's sandbox bound, in the call's ``sandbox`` record
    (and so in its receipt). Without admission's record (a handler called directly) nothing
    is recorded."""
    record = extras.get(SANDBOX_RECORD_EXTRA)
    if isinstance(record, dict):
        record["toolchains"] = sorted({str(t) for t in toolchains})


def stricter(a: SandboxMode, b: object) -> SandboxMode:
    """The stricter of a mode and a recorded value (``b`` is ignored unless it is a mode)."""
    if b not in MODES:
        return a
    return a if MODES.index(a) <= MODES.index(b) else b


@dataclass(frozen=True)
class SandboxSetting:
    """How a run's processes are confined, read once from its session's environment.

    Attributes:
        mode: the mode in force.
        explicit: ``PROCTOR_SANDBOX`` set it (an ``off`` is only ever explicit).
        bwrap: the bubblewrap executable to use, or ``None`` when none was found.
    """

    mode: SandboxMode
    explicit: bool = False
    bwrap: str | None = None


FoundExecutables = MutableMapping[str, tuple[str, tuple[int, ...]]]
"""Executables a session found along a ``PATH`` (by name and ``PATH``), each with the stat
identity it had: :func:`sandbox_setting`'s ``found``."""


def sandbox_setting(
    environ: Mapping[str, str],
    *,
    default: SandboxMode = "required",
    found: FoundExecutables | None = None,
) -> SandboxSetting:
    """The setting of ``environ``: ``PROCTOR_SANDBOX`` when set, else ``default``.

    ``found`` (a session's) keeps the bubblewrap found along ``PATH``, so a session looks it
    up once per ``PATH`` and then looks only at it: one ``stat`` per run, and when that file is
    gone or another (its device, inode, mode, size or times differ) it is looked up again. A
    bubblewrap put earlier on ``PATH`` later is seen by the next session. None found is never
    kept (each run looks again).

    Raises:
        ConfigError: ``sandbox_setting_invalid``: ``PROCTOR_SANDBOX`` is not a mode, or
            ``PROCTOR_BWRAP`` is not an absolute path.
    """
    raw = environ.get(SANDBOX_ENV, "").strip().lower()
    if raw and raw not in MODES:
        raise ConfigError(
            f"{SANDBOX_ENV} must be one of {', '.join(MODES)}", code="sandbox_setting_invalid"
        )
    mode: SandboxMode = raw if raw in MODES else default
    named = environ.get(BWRAP_ENV, "")
    if named:
        if not os.path.isabs(named):
            raise ConfigError(
                f"{BWRAP_ENV} must be an absolute path to the bubblewrap executable",
                code="sandbox_setting_invalid",
            )
        bwrap: str | None = named
    else:
        search = environ.get("PATH") or os.environ.get("PATH") or ""
        bwrap = (
            find_executable("bwrap", search) if found is None else _found("bwrap", search, found)
        )
    return SandboxSetting(mode=mode, explicit=bool(raw), bwrap=bwrap)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _found(name: str, search: str, found: FoundExecutables) -> str | None:
    """:func:`find_executable`, the answer kept in ``found`` while its file stays the same."""
    key = name + "\0" + search
    held = found.get(key)
    if held is not None:
        try:
            if _identity(os.stat(held[0])) == held[1]:
                return held[0]
        except OSError:
            pass
        del found[key]
    path = find_executable(name, search)
    if path is not None:
        with contextlib.suppress(OSError):
            found[key] = (path, _identity(os.stat(path)))
    return path


def find_executable(name: str, search: str) -> str | None:
    """The first ``folder/name`` along ``search`` (a ``PATH`` value) that is an executable
    regular file, else ``None``: what :func:`shutil.which` answers for a bare name, without
    importing shutil (and bz2 and lzma with it) on every run's start. An empty or relative
    entry of ``search`` is skipped: a program proctor starts is never looked up in whatever
    folder the process happens to be in."""
    for folder in search.split(os.pathsep):
        if not os.path.isabs(folder):
            continue
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None

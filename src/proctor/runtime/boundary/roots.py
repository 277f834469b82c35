"""Roots: the folders besides the workspace a run may reach, named and checked.

A root is a folder one of a run's inputs names (see :mod:`proctor.runtime.boundary.reach`); here
is only what a root may be called and which folders may be one, so the workspace and reach both
build on it; and which folders may not be a workspace (:func:`refuse_broad_root`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from proctor.core.paths import sensitive_reason
from proctor.errors import ConfigError, UsageError

__all__ = ["ROOT_NAME", "checked_root", "home_state_dir", "refuse_broad_root"]

ROOT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
"""The names a root may take (an input's name): ``$NAME`` must read as one plain word."""


def checked_root(name: str, folder: str | Path) -> str:
    """The real path of a root the input ``name`` names.

    Raises:
        ConfigError: ``root_invalid``: the name is not a plain word, the folder does not exist,
            is the file system's root, or lies in a sensitive folder (``.git``, ``.ssh`` ...).
    """
    if not ROOT_NAME.match(name):
        raise ConfigError(
            f"input {name[:64]!r} cannot name a root: a root's name is a plain word (letters, "
            "digits, '_' and '-', starting with a letter or '_')",
            code="root_invalid",
        )
    real = os.path.realpath(folder)
    if not os.path.isdir(real):
        raise ConfigError(f"input {name!r} names no existing folder", code="root_invalid")
    if real == os.path.dirname(real):
        raise ConfigError(
            f"input {name!r} names the file system's root; a run reaches folders, not the host",
            code="root_invalid",
        )
    reason = sensitive_reason(real.replace("\\", "/").lstrip("/"))
    if reason is not None:
        raise ConfigError(
            f"input {name!r} names a folder inside a sensitive one ({reason}); runs never reach it",
            code="root_invalid",
        )
    return real


def home_state_dir() -> Path | None:
    """The real home state folder (``PROCTOR_HOME`` or ``~/.proctor``), or None."""
    named = os.environ.get("PROCTOR_HOME")
    try:
        home = Path(named) if named else Path.home() / ".proctor"
        return home.resolve()
    except (OSError, RuntimeError):
        return None


def refuse_broad_root(folder: Path) -> None:
    """Refuse the user's home folder and ``/`` as a workspace, saying how to start one.

    Raises:
        UsageError: ``workspace_refused``.
    """
    try:
        home = Path(os.path.realpath(Path.home()))
    except (OSError, RuntimeError):
        home = None
    real = Path(os.path.realpath(folder))
    if real == Path(real.anchor) or real == home:
        what = "your home folder" if real == home else "the file system's root"
        raise UsageError(
            f"proctor does not use {what} as a workspace: a run there could reach every file"
            " below it. Start a workspace in a project folder: mkdir my-project && cd"
            " my-project && proctor init",
            code="workspace_refused",
        )

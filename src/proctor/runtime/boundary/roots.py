"""Roots: the folders besides the workspace a run may reach, named and checked.

A root is a folder one of a run's inputs names (see :mod:`proctor.runtime.boundary.reach`); here
is only what a root may be called and which folders may be one, so the workspace and reach both
build on it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from proctor.core.paths import sensitive_reason
from proctor.errors import ConfigError

__all__ = ["ROOT_NAME", "checked_root"]

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

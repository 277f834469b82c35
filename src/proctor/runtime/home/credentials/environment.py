"""The workspace environment snapshot: process values, with the workspace ``.env`` as data.

The ``.env`` file is parsed with python-dotenv's ``dotenv_values`` and never sourced: no shell
runs, no variable is exported, and nothing in it is interpolated from the process. Exported
process values win; ``.env`` fills only names the process does not have. One snapshot is
taken per command and used for all of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from proctor.contracts.values import dataclass, field

__all__ = ["EnvSnapshot", "snapshot_environment"]


@dataclass(frozen=True)
class EnvSnapshot:
    """An immutable view of the environment a command runs with.

    Attributes:
        values: name -> value.
        origins: name -> ``"env"`` (the process) or ``"dotenv"`` (the workspace ``.env``).
    """

    values: Mapping[str, str] = field(default_factory=dict)
    origins: Mapping[str, Literal["env", "dotenv"]] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        """The value of ``name``, or ``None`` (an empty value counts as absent)."""
        value = self.values.get(name)
        return value if value else None


def snapshot_environment(
    workspace_root: Path | None, environ: Mapping[str, str] | None = None
) -> EnvSnapshot:
    """Take the snapshot: ``environ`` (default ``os.environ``) plus the workspace ``.env``."""
    process = dict(os.environ if environ is None else environ)
    values: dict[str, str] = dict(process)
    origins: dict[str, Literal["env", "dotenv"]] = dict.fromkeys(process, "env")
    dotenv_path = None if workspace_root is None else workspace_root / ".env"
    if dotenv_path is not None and dotenv_path.is_file():
        from dotenv import dotenv_values

        for name, value in dotenv_values(dotenv_path, interpolate=False).items():
            if value is None or name in values:
                continue
            values[name] = value
            origins[name] = "dotenv"
    return EnvSnapshot(values, origins)

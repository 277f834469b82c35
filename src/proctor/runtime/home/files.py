"""Where the home is, and its private files (``config.json``, credential material), written
whole or not at all.

A file is written to a fresh temporary name (mode 0600, created exclusively), synced, then
renamed over the target, so a reader sees the old or the new bytes and never a torn file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from proctor.errors import ConfigError

__all__ = ["home_dir", "write_private"]


def write_private(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``, readable by its owner only.

    Raises:
        OSError: the folder is missing or the disk refused the write (nothing is replaced).
    """
    tmp = path.with_name(path.name + f".{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def home_dir(environ: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """The proctor home and how to show it (``$PROCTOR_HOME`` or ``~/.proctor``).

    Raises:
        ConfigError: ``home_missing``: no ``PROCTOR_HOME``, and ``HOME`` is empty, relative,
            or unset for a user with no account entry (so no key, settings or credentials
            could be found or kept).
    """
    env = os.environ if environ is None else environ
    named = env.get("PROCTOR_HOME")
    if named:
        return _path(named, ""), "$PROCTOR_HOME"
    raw = env.get("HOME", os.environ.get("HOME"))
    if raw is None:
        try:
            return Path.home() / ".proctor", "~/.proctor"  # the account entry's home
        except RuntimeError as exc:
            raise ConfigError(
                "there is no home folder: HOME is not set and this user has no account entry;"
                " set HOME or PROCTOR_HOME",
                code="home_missing",
            ) from exc
    if not os.path.isabs(raw):
        raise ConfigError(
            "there is no home folder: HOME is empty or not an absolute path; set HOME or"
            " PROCTOR_HOME",
            code="home_missing",
        )
    return Path(raw) / ".proctor", "~/.proctor"


_PATHS: dict[tuple[str, str], Path] = {}


def _path(text: str, below: str) -> Path:
    """``Path(text) / below`` (``Path(text)`` for none), made once per text: a home is asked
    for several times a run, and a path is a value (nothing on disk is kept)."""
    path = _PATHS.get((text, below))
    if path is None:
        path = Path(text) / below if below else Path(text)
        if len(_PATHS) >= 64:
            _PATHS.clear()
        _PATHS[(text, below)] = path
    return path

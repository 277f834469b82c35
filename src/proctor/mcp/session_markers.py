"""The markers of open MCP session runs: one file per run in ``.proctor/mcp-sessions/``, named
by the run's id and holding the lease-holder id of the process serving it
(:mod:`proctor.mcp.session_runs`: the next ``proctor mcp`` seals the runs of a process that is
gone). Every step is taken relative to the folder's descriptor, never through a link, and only
run-id names are read.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

__all__ = ["OPEN_RUNS", "RUN_ID", "forget_open", "holder_of", "mark_open", "open_folder"]

OPEN_RUNS = "mcp-sessions"
"""The folder under ``.proctor/`` naming each open session run and the process serving it."""

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
RUN_ID = re.compile(r"[0-9a-f]{32}")


def open_folder(root: Path, *, make: bool) -> int | None:
    """A descriptor of ``.proctor/mcp-sessions`` (made when ``make``), opened without
    following a link at either step; ``None`` when it is absent, or is not a plain folder."""
    try:
        state = os.open(root / ".proctor", _FOLDER_FLAGS)
    except OSError:
        return None
    try:
        if make:
            with contextlib.suppress(FileExistsError):
                os.mkdir(OPEN_RUNS, 0o700, dir_fd=state)
        return os.open(OPEN_RUNS, _FOLDER_FLAGS, dir_fd=state)
    except OSError:
        return None
    finally:
        os.close(state)


def forget_open(root: Path, run_id: str) -> None:
    """Take ``run_id``'s name out of the open runs (nothing when it is not there)."""
    folder = open_folder(root, make=False)
    if folder is None:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(run_id, dir_fd=folder)
    finally:
        os.close(folder)


def mark_open(root: Path, run_id: str, holder: str) -> None:
    """Name ``run_id`` as open, served by ``holder`` (written whole, then renamed in; every
    step relative to the folder's descriptor, never through a link)."""
    folder = open_folder(root, make=True)
    if folder is None:
        return  # a .proctor/mcp-sessions that is a link is not written through
    part = f".{run_id}.part"
    try:
        fd = os.open(
            part,
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=folder,
        )
        try:
            os.write(fd, holder.encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(part, run_id, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def holder_of(folder: int, name: str) -> str | None:
    """The holder a marker names, read without following a link; ``None`` when unreadable."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)

"""The real path of a path, asked of the kernel in one lookup where it can be.

``os.path.realpath`` walks a path a component at a time in Python (an ``lstat`` each, a
``readlink`` for each link), about 14 microseconds for a workspace file; a run's call asks
for several. On Linux, :func:`real_path` opens the path itself (``O_PATH``: no read, no
permission on the file) and reads the name the kernel resolved it to from
``/proc/self/fd``: three system calls, whatever the depth. It answers exactly what
``os.path.realpath`` answers: whenever the kernel cannot say (a path that does not exist, or
whose tail does not; a link loop; a name too long; no ``/proc``; another system), or says
something that is not a plain absolute path (a file deleted under it), it is
``os.path.realpath`` that answers. Nothing is kept between calls: a link swapped in
between two calls is seen by the second.
"""

from __future__ import annotations

import os

__all__ = ["real_folder", "real_path"]

_O_PATH = getattr(os, "O_PATH", 0)
_FDS = "/proc/self/fd/"
_KERNEL = bool(_O_PATH) and os.path.isdir(_FDS)


def real_path(path: str | os.PathLike[str]) -> str:
    """``os.path.realpath(path)`` (symbolic links resolved, ``.`` and ``..`` folded, relative
    to the current folder), from the kernel when it can say."""
    if _KERNEL:
        try:
            fd = os.open(path, _O_PATH | os.O_CLOEXEC)
        except (OSError, ValueError):  # absent, a loop, too long, a NUL: the slow walk says
            return os.path.realpath(path)
        found = _opened(fd)
        if found:
            return found
    return os.path.realpath(path)


def _opened(fd: int) -> str:
    """The path the kernel names for ``fd`` (closed here), or ``""`` when it names none that
    can be trusted (unreadable, not absolute, or a file deleted since)."""
    try:
        found = os.readlink(f"{_FDS}{fd}")
    except OSError:
        return ""
    finally:
        os.close(fd)
    return found if found.startswith("/") and not found.endswith(" (deleted)") else ""


def real_folder(path: str) -> str | None:
    """``real_path(path)`` when ``path`` names a folder (links followed, as
    ``os.path.isdir`` says), else ``None``: one lookup for both (``O_DIRECTORY``)."""
    if _KERNEL:
        try:
            fd = os.open(path, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # not a folder, a loop, too long: the slow answer says
            return real_path(path) if os.path.isdir(path) else None
        found = _opened(fd)
        if found:
            return found
    return real_path(path) if os.path.isdir(path) else None

"""Whether a path names a regular file, asked by the path's text.

The seam: settings files a run start or seal looks for every run (``proctor.toml``'s
sections, the home's ``config.json``) are usually absent, and building a :class:`pathlib.Path`
to ask ``is_file()`` of it costs more than the one ``stat`` that answers. :func:`regular_file`
answers exactly what ``Path.is_file()`` answers (links followed; an absent name, a name below
a file, a link loop or a NUL is ``False``; any other error is raised) for ``str`` paths.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

__all__ = ["folder", "regular_file"]

# the errors Path.is_file() reads as "not a file" (pathlib._IGNORED_ERRNOS)
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def regular_file(path: str) -> bool:
    """``Path(path).is_file()``, without the ``Path``.

    Raises:
        OSError: the file system refused the ``stat`` for another reason (no search
            permission on a folder on the way, say), as ``Path.is_file`` raises it.
    """
    return _is(path, stat.S_ISREG)


def folder(path: str) -> bool:
    """``Path(path).is_dir()``, without the ``Path`` (errors as :func:`regular_file`)."""
    return _is(path, stat.S_ISDIR)


def _is(path: str, kind: Callable[[int], bool]) -> bool:
    try:
        return kind(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno not in _ABSENT:
            raise
        return False
    except ValueError:  # a NUL in the name, or a name too long for the platform
        return False

"""What containment learns by opening a file: judged by what it is, and what it read of it.

Containment opens every existing file a ``read`` or ``write`` names (through
:func:`proctor.runtime.boundary.fds.open_below`: no symlink anywhere on the way) and judges it
there: a regular file must have one hard link and no private key block in its first
:data:`HEAD_BYTES`. A file no larger than that has then been read whole, through that same open
and after those same checks; :func:`judge_open` hands those bytes back so the call's handler can
use them instead of opening and reading the file a second time (see
:mod:`proctor.runtime.boundary.views`).
"""

from __future__ import annotations

import os
import stat

from proctor.core.paths import content_reason
from proctor.runtime.boundary.resolved import check_links, refusal, shown

__all__ = ["HEAD_BYTES", "check_content", "judge_open"]

HEAD_BYTES = 64 * 1024
"""How much of an existing file containment reads to look for a private key block."""


def judge_open(rel: str, fd: int) -> bytes | None:
    """Judge the file open at ``fd`` (closed here) as containment does, and return its every
    byte when the head read held all of them (``None`` for a folder, a special file, a file
    larger than :data:`HEAD_BYTES` or one that cannot be read).

    The head is read with the size ``fstat`` gave plus one byte: a read that comes back short
    with exactly that size has met the end, so the bytes are the whole file; asking a 4 KiB file
    for 64 KiB allocates the whole buffer first. A file that grew meanwhile is read on to the
    full head all the same, so the private-key check always covers :data:`HEAD_BYTES`.

    Raises:
        RefusedCall: ``hard_link`` (more than one link), ``sensitive_path`` (a private key block
            in the head).
    """
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        check_links(rel, info.st_nlink)
        size = info.st_size
        want = size + 1 if 0 < size < HEAD_BYTES else HEAD_BYTES
        head = os.read(fd, want)
        whole = len(head) < want and len(head) == size
        if not whole and len(head) == want < HEAD_BYTES:
            head += os.read(fd, HEAD_BYTES - want)  # it grew: the check still sees a full head
    except OSError:
        return None
    finally:
        os.close(fd)
    check_content(rel, head)
    return head if whole else None


def check_content(rel: str, data: bytes) -> None:
    """Refuse bytes (read from or about to be written to ``rel``) holding a private key.

    Raises:
        RefusedCall: ``sensitive_path`` with rule ``private_key_content``.
    """
    reason = content_reason(data)
    if reason is not None:
        raise refusal(
            "sensitive_path",
            f"'{shown(rel)}' holds a private key block ({reason}); runs never read, list "
            "or write it",
            rel,
            reason,
        )

"""The helper process of :mod:`.signature_processes`: checks Ed25519 signatures fed on stdin.

Either forked from a single-threaded proctor (:func:`serve` on two pipes), or run as a script
(``python -I <this file>``) where forking is not safe: as a script it loads only the standard
library and ``cryptography``, so it starts in a few milliseconds. Either way it shares no GIL
with the walk that feeds it and touches nothing of its parent but the two pipes.

Protocol, little-endian, over two pipes. On stdin, batches: a header ``<II`` (how many
checks, how many payload bytes), then the payload, per check ``<32sHI`` (the raw public key,
the signature's length, the message's length), the signature, the message. On stdout, one
``<i`` per batch, in order: the index of the first check that fails, or -1 when all pass. A
check fails exactly as :meth:`proctor.receipts.signing.PublicKey.verify` fails: a signature
that is not 64 bytes, or one ``cryptography`` refuses. EOF on stdin ends the process; so does
anything unexpected (a torn batch, a key that does not load), and the parent then checks what
it had sent here itself, so a helper that dies can slow a verification down, never pass it.
"""

from __future__ import annotations

import os
import struct
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

_HEAD = struct.Struct("<II")
_CHECK = struct.Struct("<32sHI")
_RESULT = struct.Struct("<i")


def _read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``, or None when it ends first."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        chunk = os.read(fd, size - got)
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _first_failure(payload: bytes, count: int, keys: dict[bytes, Ed25519PublicKey]) -> int:
    at = 0
    unpack = _CHECK.unpack_from
    for i in range(count):
        raw, sig_len, msg_len = unpack(payload, at)
        at += _CHECK.size
        signature = payload[at : at + sig_len]
        at += sig_len
        message = payload[at : at + msg_len]
        at += msg_len
        key = keys.get(raw)
        if key is None:
            key = keys[raw] = Ed25519PublicKey.from_public_bytes(raw)
        if sig_len != 64:
            return i
        try:
            key.verify(signature, message)
        except InvalidSignature:
            return i
    if at != len(payload):
        raise ValueError("a batch holds more bytes than its checks")
    return -1


def serve(read_fd: int, write_fd: int) -> int:
    """Check batches from ``read_fd``, answering on ``write_fd``, until EOF; 0 on a clean EOF,
    1 on anything else (a torn batch, a key that does not load, a refused write)."""
    keys: dict[bytes, Ed25519PublicKey] = {}
    try:
        while True:
            head = _read_exactly(read_fd, _HEAD.size)
            if head is None:
                return 0
            count, size = _HEAD.unpack(head)
            payload = _read_exactly(read_fd, size)
            if payload is None:
                return 1
            result = _RESULT.pack(_first_failure(payload, count, keys))
            if os.write(write_fd, result) != len(result):
                return 1
    except (OSError, ValueError, struct.error):
        return 1


if __name__ == "__main__":
    sys.exit(serve(sys.stdin.fileno(), sys.stdout.fileno()))

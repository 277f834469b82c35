"""The state store interface, its bounds, and the choice of backend.

A namespace is a skill package's: the tools derive it from the run, never from arguments, so
one package never reads or writes another's. In a namespace:

- ``append(stream, event, key)`` adds an event at the stream's next sequence number (from 1);
  ``read(stream, cursor, limit)`` returns the events after ``cursor`` in order;
- ``put(key, value, idem)`` sets a key (its version counts up from 1); ``get`` reads one;
  ``list_keys(prefix, cursor, limit)`` pages through keys in order.

Every write carries an idempotency key: a second write under the same key (in the same
namespace) changes nothing and returns what the first returned, so a write a crashed driver
may or may not have made is safely made again. The key names one write: a write of another
kind (an append where a put used the key) or to another stream or key is refused
``idempotency_key_reused`` and changes nothing (:func:`same_write`), never answered with the
other write's result. Values are JSON, at most 64 KiB canonical.

``migrate(source, target)`` moves a whole namespace (its events, keys and idempotency records)
to another, in one step: a package whose identity changed (a local folder moved) keeps its
state. It is refused (:func:`check_migration`) when the target already holds anything, so two
packages' state is never merged, and when the source holds nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Protocol

from proctor.errors import RefusedCall, UsageError

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_LIMIT",
    "MAX_VALUE_BYTES",
    "STREAM_PATTERN",
    "StateStore",
    "check_key",
    "check_migration",
    "check_stream",
    "encode_value",
    "namespace_token",
    "same_write",
]

MAX_VALUE_BYTES = 64 * 1024
MAX_KEY_CHARS = 256
MAX_LIMIT = 1000
STREAM_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
_STREAM = re.compile(STREAM_PATTERN)


class StateStore(Protocol):
    """What every backend does (see the module docstring). Errors are ``StoreError``."""

    def append(self, ns: str, stream: str, event: Any, idem: str) -> dict[str, Any]:
        """Append ``event``; ``{"seq": n, "already_done": bool}``."""
        ...

    def read(self, ns: str, stream: str, cursor: int, limit: int) -> dict[str, Any]:
        """``{"events": [{"seq", "event"}], "next_cursor": n}`` after ``cursor``."""
        ...

    def put(self, ns: str, key: str, value: Any, idem: str) -> dict[str, Any]:
        """Set ``key``; ``{"version": n, "already_done": bool}``."""
        ...

    def get(self, ns: str, key: str) -> dict[str, Any]:
        """``{"found": bool, "value": ..., "version": n | None}``."""
        ...

    def list_keys(self, ns: str, prefix: str, cursor: str, limit: int) -> dict[str, Any]:
        """``{"keys": [...], "next_cursor": key | None}``: keys after ``cursor``, in order."""
        ...

    def applied(self, ns: str, idem: str) -> dict[str, Any] | None:
        """What the write made under ``idem`` returned, or ``None`` when none was made."""
        ...

    def migrate(self, source: str, target: str) -> dict[str, int]:
        """Move namespace ``source`` whole to ``target``; ``{"events", "keys", "writes"}``
        moved. Refused by :func:`check_migration` (nothing moved)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def encode_value(value: Any) -> str:
    """Canonical JSON of a value (sorted keys, no spaces).

    Raises:
        RefusedCall: ``store_value_too_large`` over 64 KiB.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        raise RefusedCall(
            f"a stored value is at most {MAX_VALUE_BYTES} bytes of JSON",
            code="store_value_too_large",
        )
    return text


def check_stream(stream: str) -> None:
    """Raises: RefusedCall ``store_stream_invalid`` for a name outside ``STREAM_PATTERN``."""
    if not _STREAM.match(stream):
        raise RefusedCall(
            "a stream name is 1-64 of a-z, 0-9, '_', '.', '-', starting with a letter or digit",
            code="store_stream_invalid",
        )


def check_key(key: str) -> None:
    """Raises: RefusedCall ``store_key_invalid`` for an empty, over-long or control key."""
    if not key or len(key) > MAX_KEY_CHARS or any(ord(c) < 32 for c in key):
        raise RefusedCall(
            f"a key is 1-{MAX_KEY_CHARS} printable characters", code="store_key_invalid"
        )


def namespace_token(ns: str) -> str:
    """A fixed-shape token for a namespace (safe in table rows and Redis key names)."""
    return hashlib.sha256(ns.encode("utf-8")).hexdigest()[:32]


def same_write(
    done: dict[str, Any], *, stream: str | None = None, key: str | None = None
) -> dict[str, Any]:
    """``done`` (what a write already made under this idempotency key returned) when it was
    the same write: an append to ``stream``, or a put of ``key``.

    Raises:
        RefusedCall: ``idempotency_key_reused``: the key was used by another kind of write or
            for another stream or key; nothing is written.
    """
    if stream is not None:
        same = "seq" in done and done.get("stream") == stream
        asked = f"an append to stream {stream!r}"
    else:
        same = "version" in done and done.get("key") == key
        asked = f"a put of key {key!r}"
    if not same:
        earlier = (
            f"an append to stream {done.get('stream')!r}"
            if "seq" in done
            else f"a put of key {done.get('key')!r}"
        )
        raise RefusedCall(
            f"this idempotency_key was used by {earlier}, not {asked}; a key names one write."
            " Nothing was written: use a key of its own for this write",
            code="idempotency_key_reused",
        )
    return done


def check_migration(
    source: str, target: str, held: dict[str, int], taken: dict[str, int]
) -> dict[str, int]:
    """``held`` (what ``source`` holds) when it may move to ``target``, which holds ``taken``.

    Raises:
        UsageError: ``store_migrate_same`` (one namespace twice); ``store_target_not_empty``
            (``target`` holds state: moving would merge two packages' state);
            ``store_source_empty`` (``source`` holds nothing: a misspelt identity, say).
            Nothing is moved.
    """
    if source == target:
        raise UsageError("--from and --to name the same identity", code="store_migrate_same")
    if any(taken.values()):
        raise UsageError(
            f"{target} already holds state ({_counted(taken)}); nothing was moved. A moved"
            " package's state joins no other's: run the new package before it writes, or move"
            " its state away first",
            code="store_target_not_empty",
        )
    if not any(held.values()):
        raise UsageError(
            f"{source} holds no state in this store; nothing was moved (proctor history shows"
            " each run's package identity)",
            code="store_source_empty",
        )
    return held


def _counted(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items())

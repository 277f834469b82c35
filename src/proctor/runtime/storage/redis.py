"""The Redis state store: a stream per event stream, a hash per namespace's keys.

Chosen by ``PROCTOR_STORE_URL=redis://...``. Each write is one Lua script (atomic on the
server): the idempotency hash is checked, the sequence counter taken with ``INCR``, the event
added with ``XADD`` at id ``<seq>-1``; a put sets the key's field in the namespace's hash and its
name in a sorted set that pages keys in order. Names carry a hash of the namespace, never its
text, so no namespace can spell another's key names.
"""

from __future__ import annotations

import json
from itertools import takewhile
from typing import Any

from proctor.errors import ConfigError, StoreError
from proctor.runtime.storage.base import (
    check_migration,
    encode_value,
    namespace_token,
    same_write,
)

__all__ = ["RedisStateStore"]

_APPEND = """
local done = redis.call('HGET', KEYS[1], ARGV[1])
if done then return {1, done} end
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[3], seq .. '-1', 'e', ARGV[2])
local result = cjson.encode({seq = seq, stream = ARGV[3]})
redis.call('HSET', KEYS[1], ARGV[1], result)
return {0, result}
"""
_PUT = """
local done = redis.call('HGET', KEYS[1], ARGV[1])
if done then return {1, done} end
local old = redis.call('HGET', KEYS[2], ARGV[2])
local version = 1
if old then version = cjson.decode(old)['version'] + 1 end
redis.call('HSET', KEYS[2], ARGV[2], cjson.encode({v = ARGV[3], version = version}))
redis.call('ZADD', KEYS[3], 0, ARGV[2])
local result = cjson.encode({key = ARGV[2], version = version})
redis.call('HSET', KEYS[1], ARGV[1], result)
return {0, result}
"""


class RedisStateStore:
    """A backend on Redis (see :mod:`proctor.runtime.storage.base` for the contract)."""

    def __init__(self, url: str, *, prefix: str = "proctor:store") -> None:
        try:
            import redis
        except ImportError as exc:
            raise ConfigError(
                "PROCTOR_STORE_URL names Redis; install proctor[store] (redis)",
                code="store_backend_missing",
            ) from exc
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError,)
        self.prefix = prefix
        try:
            self._client = redis.Redis.from_url(url, socket_timeout=30)
            self._client.ping()
        except self._errors as exc:
            self._raise(exc)
        self._append = self._client.register_script(_APPEND)
        self._put = self._client.register_script(_PUT)

    def _raise(self, exc: BaseException) -> None:
        raise StoreError(
            f"the Redis state store failed ({type(exc).__name__})", code="state_store_error"
        ) from exc

    def _key(self, ns: str, *parts: str) -> str:
        return ":".join([self.prefix, namespace_token(ns), *parts])

    @staticmethod
    def _result(reply: Any) -> dict[str, Any]:
        already, raw = reply
        result = json.loads(raw)
        result["seq" if "seq" in result else "version"] = int(
            result["seq" if "seq" in result else "version"]
        )
        return {**result, "already_done": bool(already)}

    def append(self, ns: str, stream: str, event: Any, idem: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        body = encode_value(event)
        keys = [self._key(ns, "writes"), self._key(ns, "seq", stream), self._key(ns, "ev", stream)]
        try:
            answer = self._result(self._append(keys=keys, args=[idem, body, stream]))
            # the script wrote nothing when the key was used: refuse if by another write
            return same_write(answer, stream=stream) if answer["already_done"] else answer
        except self._errors as exc:
            self._raise(exc)
        raise AssertionError("unreachable")

    def read(self, ns: str, stream: str, cursor: int, limit: int) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        try:
            rows: Any = self._client.xrange(
                self._key(ns, "ev", stream), min=f"{cursor + 1}-0", max="+", count=limit
            )
        except self._errors as exc:
            self._raise(exc)
        events = [
            {"seq": int(entry_id.split(b"-")[0]), "event": json.loads(fields[b"e"])}
            for entry_id, fields in rows
        ]
        return {"events": events, "next_cursor": events[-1]["seq"] if events else cursor}

    def put(self, ns: str, key: str, value: Any, idem: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        body = encode_value(value)
        keys = [self._key(ns, "writes"), self._key(ns, "keys"), self._key(ns, "keyset")]
        try:
            answer = self._result(self._put(keys=keys, args=[idem, key, body]))
            return same_write(answer, key=key) if answer["already_done"] else answer
        except self._errors as exc:
            self._raise(exc)
        raise AssertionError("unreachable")

    def get(self, ns: str, key: str) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        try:
            raw: Any = self._client.hget(self._key(ns, "keys"), key)
        except self._errors as exc:
            self._raise(exc)
        if raw is None:
            return {"found": False, "value": None, "version": None}
        doc = json.loads(raw)
        return {"found": True, "value": json.loads(doc["v"]), "version": int(doc["version"])}

    def list_keys(self, ns: str, prefix: str, cursor: str, limit: int) -> dict[str, Any]:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        # keys are ordered bytewise; those with the prefix are contiguous from the prefix on
        low = "[" + prefix if prefix else "-"
        if cursor and cursor >= prefix:
            low = "(" + cursor
        try:
            found: Any = self._client.zrangebylex(
                self._key(ns, "keyset"), low, "+", start=0, num=limit + 1
            )
        except self._errors as exc:
            self._raise(exc)
        keys = list(takewhile(lambda k: k.startswith(prefix), (r.decode() for r in found)))
        more = len(keys) > limit
        keys = keys[:limit]
        return {"keys": keys, "next_cursor": keys[-1] if more and keys else None}

    def applied(self, ns: str, idem: str) -> dict[str, Any] | None:
        """See :class:`~proctor.runtime.storage.base.StateStore`."""
        try:
            raw: Any = self._client.hget(self._key(ns, "writes"), idem)
        except self._errors as exc:
            self._raise(exc)
        return None if raw is None else self._result((1, raw))

    def _names(self, ns: str) -> list[bytes]:
        return list(self._client.scan_iter(match=self._key(ns, "*"), count=500))

    def _counts(self, ns: str, names: list[bytes]) -> dict[str, int]:
        client: Any = self._client
        events = sum(int(client.xlen(n)) for n in names if b":ev:" in n)
        return {
            "events": events,
            "keys": int(client.hlen(self._key(ns, "keys"))),
            "writes": int(client.hlen(self._key(ns, "writes"))),
        }

    def migrate(self, source: str, target: str) -> dict[str, int]:
        """See :class:`~proctor.runtime.storage.base.StateStore`: every key of ``source`` is
        renamed to its name under ``target`` in one MULTI/EXEC, each with RENAMENX, watched so
        a write to either namespace meanwhile fails the move (retry it)."""
        old, new = self._key(source, "").encode(), self._key(target, "").encode()
        try:
            names = self._names(source)
            taken = self._names(target)
            moved = check_migration(
                source, target, self._counts(source, names), self._counts(target, taken)
            )
            client: Any = self._client
            with client.pipeline(transaction=True) as pipe:
                pipe.watch(*names)
                pipe.multi()
                for name in names:
                    pipe.renamenx(name, new + name[len(old) :])
                done = pipe.execute()
        except self._errors as exc:
            self._raise(exc)
        if not all(done):
            raise StoreError(
                "the Redis state store changed while its state moved; run the move again",
                code="state_store_error",
            )
        return moved

    def drop(self) -> None:
        """Delete every key under this store's prefix (tests)."""
        for name in self._client.scan_iter(match=self.prefix + ":*", count=500):
            self._client.delete(name)

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()

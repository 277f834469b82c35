"""The native ``store.*`` tools: a skill package's own durable state
(:mod:`proctor.runtime.storage`).

- ``store.events.append`` (write): add an event to a stream; returns its sequence number;
- ``store.events.read`` (read): events after a ``cursor`` (a sequence number), at most ``limit``;
- ``store.key.put`` (write) / ``store.key.get`` (read): one JSON value per key, versioned;
- ``store.keys.list`` (read): keys with a ``prefix``, after a ``cursor`` key, in order.

The namespace is the run's skill package, handed over by the delivery seam
(:func:`store_deliver`); no argument names one, so a package never reaches another's state.
A write needs an ``idempotency_key`` (a fixed step's own, or the call's argument): a second
write under it changes nothing and returns what the first did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import RefusedCall
from proctor.runtime.storage.base import (
    MAX_KEY_CHARS,
    MAX_LIMIT,
    STREAM_PATTERN,
    StateStore,
    check_key,
    check_stream,
)
from proctor.runtime.tools.base import Tool, ToolContext

__all__ = ["STORE_EXTRA", "STORE_WRITES", "StoreContext", "store_deliver", "store_tools"]

STORE_EXTRA = "state_store"
"""The ``ToolContext.extras`` key holding the :class:`StoreContext`."""

STORE_WRITES = frozenset({"store.events.append", "store.key.put"})


@dataclass(frozen=True)
class StoreContext:
    """The backend and the run's namespace (its skill package's name)."""

    backend: StateStore
    namespace: str


_KEY = {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS}
_IDEM = {"type": "string", "minLength": 1, "maxLength": 256}
_STREAM = {"type": "string", "pattern": STREAM_PATTERN}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 100}


_APPENDED = {
    "type": "object",
    "required": ["seq", "stream", "already_done"],
    "properties": {
        "seq": {"type": "integer"},
        "stream": {"type": "string"},
        "already_done": {"type": "boolean"},
    },
}
_EVENTS = {
    "type": "object",
    "required": ["events", "next_cursor"],
    "properties": {
        "events": {
            "type": "array",
            "items": {"type": "object", "properties": {"seq": {"type": "integer"}, "event": {}}},
        },
        "next_cursor": {"type": "integer"},
    },
}
_PUT = {
    "type": "object",
    "required": ["key", "version", "already_done"],
    "properties": {
        "key": {"type": "string"},
        "version": {"type": "integer"},
        "already_done": {"type": "boolean"},
    },
}
_GOT = {
    "type": "object",
    "required": ["found", "value", "version"],
    "properties": {
        "found": {"type": "boolean"},
        "value": {},
        "version": {"type": ["integer", "null"]},
    },
}
_KEYS = {
    "type": "object",
    "required": ["keys", "next_cursor"],
    "properties": {
        "keys": {"type": "array", "items": {"type": "string"}},
        "next_cursor": {"type": ["string", "null"]},
    },
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "required": required,
    }


def _store(ctx: ToolContext) -> StoreContext:
    found = ctx.extras.get(STORE_EXTRA)
    if not isinstance(found, StoreContext):
        raise RefusedCall(
            "the state store is available to skill runs only", code="store_unavailable"
        )
    return found


def _append(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    s = _store(ctx)
    check_stream(args["stream"])
    return s.backend.append(s.namespace, args["stream"], args["event"], args["idempotency_key"])


def _read(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    s = _store(ctx)
    check_stream(args["stream"])
    return s.backend.read(s.namespace, args["stream"], int(args["cursor"]), int(args["limit"]))


def _put(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    s = _store(ctx)
    check_key(args["key"])
    return s.backend.put(s.namespace, args["key"], args["value"], args["idempotency_key"])


def _get(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    s = _store(ctx)
    check_key(args["key"])
    return s.backend.get(s.namespace, args["key"])


def _list(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    s = _store(ctx)
    return s.backend.list_keys(s.namespace, args["prefix"], args["cursor"], int(args["limit"]))


def store_tools() -> dict[str, Tool]:
    """The ``store.*`` tools, by name, for the registry."""
    tools = [
        Tool(
            "store.events.append",
            "Append one JSON event to a stream of this skill's state; returns its sequence"
            " number (a repeat under the same idempotency_key appends nothing).",
            _schema(
                {"stream": _STREAM, "event": {}, "idempotency_key": _IDEM},
                ["stream", "event", "idempotency_key"],
            ),
            "write",
            _append,
            output_schema=_APPENDED,
        ),
        Tool(
            "store.events.read",
            "Read the events of a stream after a cursor (a sequence number), in order.",
            _schema(
                {
                    "stream": _STREAM,
                    "cursor": {"type": "integer", "minimum": 0, "default": 0},
                    "limit": _LIMIT,
                },
                ["stream"],
            ),
            "read",
            _read,
            output_schema=_EVENTS,
        ),
        Tool(
            "store.key.put",
            "Set one key of this skill's state to a JSON value (versioned; a repeat under the"
            " same idempotency_key changes nothing).",
            _schema(
                {"key": _KEY, "value": {}, "idempotency_key": _IDEM},
                ["key", "value", "idempotency_key"],
            ),
            "write",
            _put,
            output_schema=_PUT,
        ),
        Tool(
            "store.key.get",
            "Read one key of this skill's state: its value and version, or found: false.",
            _schema({"key": _KEY}, ["key"]),
            "read",
            _get,
            output_schema=_GOT,
        ),
        Tool(
            "store.keys.list",
            "List this skill's keys that start with a prefix, after a cursor key, in order.",
            _schema(
                {
                    "prefix": {"type": "string", "maxLength": MAX_KEY_CHARS, "default": ""},
                    "cursor": {"type": "string", "maxLength": MAX_KEY_CHARS, "default": ""},
                    "limit": _LIMIT,
                },
                [],
            ),
            "read",
            _list,
            output_schema=_KEYS,
        ),
    ]
    return {tool.name: tool for tool in tools}


def store_deliver(
    namespace: str, opener: Callable[[], StateStore]
) -> Callable[[Any, Tool], dict[str, Any]]:
    """The admission ``deliver`` seam for the ``store.*`` tools: the backend (opened on first
    use) and the run's namespace, which no call can choose."""

    def deliver(spec: Any, tool: Tool) -> dict[str, Any]:
        if not tool.name.startswith("store."):
            return {}
        return {STORE_EXTRA: StoreContext(opener(), namespace)}

    return deliver

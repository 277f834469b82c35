"""``echo`` and ``data.digest``: tools with no effect, for wiring and for tests."""

from __future__ import annotations

from typing import Any

from proctor.runtime.tools.base import Tool, ToolContext

__all__ = ["DATA_DIGEST", "ECHO"]

_TEXT_MAX = 1024 * 1024


def _echo(_ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"text": args["text"]}


ECHO = Tool(
    name="echo",
    description="Return the given text unchanged.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["text"],
        "properties": {"text": {"type": "string", "maxLength": _TEXT_MAX}},
    },
    effect="none",
    handler=_echo,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["text"],
        "properties": {"text": {"type": "string"}},
    },
)


def _digest(_ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    if args.get("encoding") == "utf8_text":
        from hashlib import sha256

        return {"digest": "sha256:" + sha256(args["value"].encode("utf-8")).hexdigest()}
    from proctor.receipts.canonical import digest

    return {"digest": digest(args["value"])}


DATA_DIGEST = Tool(
    name="data.digest",
    description=(
        "Return sha256:<hex> over the canonical JSON (RFC 8785) of any JSON value, or over a "
        "text's UTF-8 bytes (encoding: utf8_text)."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["value"],
        "properties": {
            "value": {},
            "encoding": {"enum": ["canonical_json", "utf8_text"]},
        },
        "if": {"required": ["encoding"], "properties": {"encoding": {"const": "utf8_text"}}},
        "then": {"properties": {"value": {"type": "string", "maxLength": _TEXT_MAX}}},
    },
    effect="none",
    handler=_digest,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["digest"],
        "properties": {"digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}},
    },
)

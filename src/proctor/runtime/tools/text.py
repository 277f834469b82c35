"""``text.format``: build text from a template and named values (no effect).

A step's inputs never interpolate (a reference is a whole string: ``parser/refs.py``), so
text made of values is built by this tool::

    - id: summary
      tool: text.format
      inputs:
        template: "Summary: {count} notes, newest {newest}"
        values: {count: $steps.count.total, newest: $steps.list.entries.0.name}

``{name}`` is replaced by ``values[name]``: a string as it is, anything else as compact JSON.
``{{`` and ``}}`` are literal braces. Nothing else in the template is special (no attribute
access, no format specs), so a template can never reach past its values.
"""

from __future__ import annotations

import json
import re
from typing import Any

from proctor.errors import ToolFailed
from proctor.runtime.tools.base import Tool, ToolContext

__all__ = ["TEXT_FORMAT", "format_text"]

_TEXT_MAX = 1024 * 1024
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]{0,63})\}|[{}]")


def format_text(template: str, values: dict[str, Any]) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]``.

    Raises:
        ToolFailed: ``format_value_missing`` naming a field ``values`` lacks;
            ``format_template_invalid`` for a lone brace or a field that is not a name;
            ``format_too_large`` when the text passes 1 MiB.
    """
    out: list[str] = []
    size = 0
    at = 0
    for match in _FIELD.finditer(template):
        out.append(template[at : match.start()])
        token = match.group(0)
        if token in ("{{", "}}"):
            piece = token[0]
        elif match.group(1) is not None:
            name = match.group(1)
            if name not in values:
                known = ", ".join(sorted(values)) or "none"
                raise ToolFailed(
                    f"the template names {{{name}}}, which values does not give (values: {known})",
                    code="format_value_missing",
                )
            value = values[name]
            piece = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        else:
            raise ToolFailed(
                f"the template has a lone {token!r} at character {match.start()}: write {{name}}"
                f" for a value and {token}{token} for a literal brace",
                code="format_template_invalid",
            )
        size += len(template[at : match.start()]) + len(piece)
        if size > _TEXT_MAX:
            raise ToolFailed("the formatted text is larger than 1 MiB", code="format_too_large")
        out.append(piece)
        at = match.end()
    out.append(template[at:])
    text = "".join(out)
    if len(text) > _TEXT_MAX:
        raise ToolFailed("the formatted text is larger than 1 MiB", code="format_too_large")
    return text


def _format(_ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"text": format_text(args["template"], dict(args.get("values") or {}))}


TEXT_FORMAT = Tool(
    name="text.format",
    description="Build text from a template: {name} is replaced by values[name] ({{ and }} are"
    " literal braces).",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["template"],
        "properties": {
            "template": {"type": "string", "maxLength": _TEXT_MAX},
            "values": {"type": "object", "maxProperties": 256, "additionalProperties": {}},
        },
    },
    effect="none",
    handler=_format,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["text"],
        "properties": {"text": {"type": "string"}},
    },
)

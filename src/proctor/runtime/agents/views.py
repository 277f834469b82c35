"""How a turn's allowance is shown to a model: wire-safe names, schemas, argument mapping.

Providers accept tool names of letters, digits, ``_`` and ``-`` only, so ``fs.read`` is shown as
``fs_read``; its schema is the tool's own. A directive turn uses the reference kernel's names
instead (``read_file``, ``list_dir`` ...), because directive bodies are written for them: the
model sees ``read_file {path}`` and proctor calls ``fs.read {path}``. Every argument the model
gives is handed on (unknown ones too), so a bad argument is refused by admission's schema check
and recorded like any other refusal, never silently dropped.

A model is shown each schema without its length bounds (:func:`unbounded`): some
OpenAI-compatible servers (llama.cpp's) build a sampling grammar from the schema and fail on
``maxLength``. The bounds still hold: admission checks every call against the tool's own schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError
from proctor.runtime.agents.wire import ToolSpec

__all__ = ["REFERENCE_VIEW", "ToolBinding", "View", "bindings_for", "unbounded", "wire_name"]

View = Literal["proctor", "reference"]
Translate = Callable[[dict[str, Any]], dict[str, Any]]
_WIRE_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class ToolBinding:
    """One tool offered to the model: what it sees, and the proctor tool it calls."""

    wire: str
    tool: str
    description: str
    parameters: dict[str, Any]
    translate: Translate

    def spec(self) -> ToolSpec:
        """The tool as the dialects send it: its schema without length bounds."""
        return ToolSpec(self.wire, self.description, unbounded(self.parameters))


_LENGTH_BOUNDS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})


def unbounded(schema: Any) -> Any:
    """``schema`` without ``minLength``/``maxLength``/``minItems``/``maxItems`` at any depth.

    Only keys of schema objects are dropped: a property that happens to be named
    ``maxLength`` stays, since the walk treats ``properties`` values as schemas, not keys.
    """
    if isinstance(schema, list):
        return [unbounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _LENGTH_BOUNDS and isinstance(value, int):
            continue
        if key in ("properties", "patternProperties", "$defs", "definitions"):
            out[key] = (
                {k: unbounded(v) for k, v in value.items()} if isinstance(value, dict) else value
            )
        elif key in ("const", "enum", "default", "examples"):
            out[key] = value
        else:
            out[key] = unbounded(value)
    return out


def wire_name(tool: str) -> str:
    """A proctor tool name in the characters every provider accepts (``fs.read`` -> ``fs_read``)."""
    return _WIRE_SAFE.sub("_", tool)[:64]


def _same(args: dict[str, Any]) -> dict[str, Any]:
    return dict(args)


def _renamed(mapping: dict[str, str], **fixed: Any) -> Translate:
    def translate(args: dict[str, Any]) -> dict[str, Any]:
        out = dict(fixed)
        for key, value in args.items():
            out[mapping.get(key, key)] = value
        return out

    return translate


def _read_file(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    # fs.read reads UTF-8 only; the reference's default encoding needs no argument, any other
    # encoding stays in the arguments and is refused by the schema check.
    if str(out.get("encoding", "")).lower().replace("-", "") in ("utf8", ""):
        out.pop("encoding", None)
    return out


def _write_file(args: dict[str, Any]) -> dict[str, Any]:
    out = _read_file(args)
    if "expected_digest" not in out:
        out.setdefault("create", True)
    return out


def _http_request(args: dict[str, Any]) -> dict[str, Any]:
    out = _renamed({"timeout": "timeout_s"})(args)
    out.setdefault("method", "GET")
    alias = out.pop("auth_alias", None)
    scheme = out.pop("auth_scheme", None)
    if alias is not None:
        out["auth"] = {"credential": alias}
        if scheme is not None:
            # the reference reads the scheme case-blind; an unknown one stays and is refused
            known = {"bearer": "Bearer", "basic": "Basic", "token": "Token"}
            out["auth"]["scheme"] = known.get(str(scheme).strip().lower(), scheme)
    elif scheme is not None:
        out["auth_scheme"] = scheme  # without an alias: refused by the schema check
    return out


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STR = {"type": "string"}
_PATH = {"type": "string", "description": "a path relative to the workspace root"}

REFERENCE_VIEW: dict[str, tuple[str, str, dict[str, Any], Translate]] = {
    "read_file": (
        "fs.read",
        "Read a UTF-8 text file of the workspace.",
        _obj({"path": _PATH, "encoding": _STR}, ["path"]),
        _read_file,
    ),
    "write_file": (
        "fs.write",
        "Write a new text file under output/ or drafts/. To replace an existing file, pass the"
        " content_digest read_file returned for it as expected_digest.",
        _obj(
            {"path": _PATH, "content": _STR, "encoding": _STR, "expected_digest": _STR},
            ["path", "content"],
        ),
        _write_file,
    ),
    "list_dir": (
        "fs.list",
        "List a workspace folder.",
        _obj({"path": _PATH, "recursive": {"type": "boolean"}}, ["path"]),
        _same,
    ),
    "delete_file": (
        "fs.delete",
        "Move a file under output/ or drafts/ to the trash (restorable); expected_digest is the"
        " content_digest read_file returned for it.",
        _obj({"path": _PATH, "expected_digest": _STR}, ["path", "expected_digest"]),
        _same,
    ),
    "restore_file": (
        "fs.restore",
        "Restore a file from the trash by the trash_id delete_file returned.",
        _obj({"trash_id": _STR}, ["trash_id"]),
        _renamed({"archive_name": "trash_id"}),
    ),
    "http_request": (
        "http.request",
        "Send an HTTP request through the egress guard. auth_alias names a credential that is"
        " delivered as a header; you never see it.",
        _obj(
            {
                "url": _STR,
                "method": {
                    "type": "string",
                    "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                },
                "headers": {"type": "object", "additionalProperties": _STR},
                "body": _STR,
                "timeout": {"type": "number"},
                "auth_alias": _STR,
                "auth_scheme": {"type": "string", "enum": ["Bearer", "Basic", "Token"]},
            },
            ["url"],
        ),
        _http_request,
    ),
    "echo": (
        "echo",
        "Return the given message unchanged (to show the user a message).",
        _obj({"message": _STR}, ["message"]),
        _renamed({"message": "text"}),
    ),
    "list_tools": (
        "tool.list",
        "List the registered tools with their descriptions and argument summaries.",
        _obj({"include_args": {"type": "boolean"}}, []),
        _same,
    ),
    "list_directives": (
        "directive.list",
        "List the directives (id, description, tools, category); optionally one category.",
        _obj({"category": _STR}, []),
        _same,
    ),
    "validate_directive": (
        "directive.validate",
        "Check a directive file (frontmatter, id, tools, body) without running it.",
        _obj({"path": _PATH}, ["path"]),
        _same,
    ),
    "resolve_secret": (
        "credential.resolve",
        "Tell whether a credential alias is configured; never returns its value.",
        _obj({"alias": _STR}, ["alias"]),
        _same,
    ),
}
"""Reference tool name -> (proctor tool, description, schema shown, argument mapping)."""


def _proctor_binding(name: str, tools: Mapping[str, Any]) -> ToolBinding:
    tool = tools.get(name)
    if tool is None:
        # Offered anyway: admission refuses the call by name ("not registered") and records it.
        return ToolBinding(wire_name(name), name, f"{name} (not registered)", _obj({}, []), _same)
    return ToolBinding(wire_name(name), name, tool.description, tool.schema, _same)


_OPTION = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "minLength": 1, "maxLength": 200},
        "detail": {"type": "string", "maxLength": 1000},
        "recommended": {"type": "boolean"},
    },
    "required": ["label"],
    "additionalProperties": False,
}
ASK_HUMAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1},
        "questions": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "prompt": {"type": "string", "minLength": 1},
                    "options": {"type": "array", "minItems": 1, "maxItems": 4, "items": _OPTION},
                    "free_text": {"type": "boolean"},
                    "required": {"type": "boolean"},
                },
                "required": ["id", "prompt"],
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}
"""``ask_human``'s arguments: ``question`` or ``questions`` (the turn refuses both, or neither)."""


def bindings_for(
    allowance: list[str] | tuple[str, ...] | frozenset[str],
    tools: Mapping[str, Any],
    *,
    view: View = "proctor",
    ask: bool = False,
) -> list[ToolBinding]:
    """The tools a turn offers, in a stable order.

    In the ``reference`` view a proctor tool with a reference counterpart is shown under the
    reference name; the rest keep their wire-safe proctor names.

    Raises:
        ConfigError: (``agent_tool_names_clash``) two offered tools share a wire name.
    """
    by_tool = {entry[0]: ref for ref, entry in REFERENCE_VIEW.items()}
    out: list[ToolBinding] = []
    for name in sorted(set(allowance) - {"ask_human"}):
        ref = by_tool.get(name) if view == "reference" else None
        if ref is not None:
            tool, description, schema, translate = REFERENCE_VIEW[ref]
            out.append(ToolBinding(ref, tool, description, schema, translate))
        else:
            out.append(_proctor_binding(name, tools))
    if ask or "ask_human" in allowance:
        out.append(
            ToolBinding(
                "ask_human",
                "ask_human",
                "Ask the person running this turn a question ({question}), or one to three"
                " questions with choices ({questions: [{id, prompt, options: [{label, detail,"
                " recommended}], free_text}]}); the run waits for the answers.",
                ASK_HUMAN_SCHEMA,
                _same,
            )
        )
    wires = [b.wire for b in out]
    if len(set(wires)) != len(wires):
        raise ConfigError("two offered tools share a wire name", code="agent_tool_names_clash")
    return out

"""Tools for agents working with proctor itself: the tool catalogue, directives, credentials.

``tool.list``, ``directive.list`` and ``directive.validate`` are what the reference kernel's
``list_tools``, ``list_directives`` and ``validate_directive`` map to; ``credential.resolve`` is
its ``resolve_secret``: it says whether a credential profile resolves and never returns, logs or
hints at its value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from proctor.contracts.values import replace
from proctor.errors import ParseError, ToolFailed
from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.fsutil import read_bytes

__all__ = ["CREDENTIAL_RESOLVE", "Catalogue", "agent_tools", "tool_catalogue"]

Catalogue = Callable[[], Mapping[str, Tool]]
"""Every native tool by name, asked when a catalogue tool runs."""


def _unbound(_ctx: ToolContext, _args: dict[str, Any]) -> dict[str, Any]:
    raise ToolFailed("this tool is used only as built by agent_tools()", code="tool_unbound")


_SECTIONS = ("## purpose", "## steps")


def _args_summary(schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name, spec in properties.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        parts.append(f"{name} ({kind}{'' if name in required else ', optional'})")
    return ", ".join(parts) if parts else "-"


def _tool_list(catalogue: Catalogue, _ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return tool_catalogue(catalogue(), include_args=args.get("include_args", True))


def tool_catalogue(tools: Mapping[str, Tool], *, include_args: bool = True) -> dict[str, Any]:
    """``{"tools": [{name, effect, description, args_summary?}], "count"}``: what ``tool.list``
    answers (and ``proctor mcp --directives`` serves as ``list_tools``)."""
    include = include_args
    tools_out = []
    for name, tool in sorted(tools.items()):
        entry: dict[str, Any] = {
            "name": name,
            "effect": tool.effect,
            "description": tool.description,
        }
        if include:
            entry["args_summary"] = _args_summary(tool.schema)
        tools_out.append(entry)
    return {"tools": tools_out, "count": len(tools_out)}


_TOOL_LIST = Tool(
    name="tool.list",
    description="List the registered tools with their effect class, description and arguments.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"include_args": {"type": "boolean"}},
    },
    effect="none",
    handler=_unbound,
    output_schema={
        "type": "object",
        "required": ["tools", "count"],
        "properties": {"tools": {"type": "array"}, "count": {"type": "integer"}},
    },
)


def _directive_list(catalogue: Catalogue, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.runtime.directives import load_directives

    found = load_directives(ctx.workspace.root, tools=set(catalogue()))
    items = [d.to_dict() for d in found.listed(args.get("category"))]
    refused = [{"file": label, "code": e.code} for label, e in sorted(found.refused.items())]
    return {"directives": items, "count": len(items), "refused": refused}


_DIRECTIVE_LIST = Tool(
    name="directive.list",
    description="List the directives (id, description, tools, category, source); optionally"
    " one category. Refused directive files are listed by name with why.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"category": {"enum": ["system", "task", "security", "debug"]}},
    },
    effect="read",
    handler=_unbound,
    output_schema={
        "type": "object",
        "required": ["directives", "count", "refused"],
        "properties": {
            "directives": {"type": "array"},
            "count": {"type": "integer"},
            "refused": {"type": "array"},
        },
    },
)


def _path_arg(args: Mapping[str, Any]) -> list[tuple[str, Access]]:
    path = args.get("path")
    return [(path, "read")] if isinstance(path, str) else []


def _directive_validate(
    catalogue: Catalogue, ctx: ToolContext, args: dict[str, Any]
) -> dict[str, Any]:
    from proctor.parser.directive import parse_directive
    from proctor.runtime.directives import allowance_for

    resolved = ctx.workspace.resolve(args["path"], "read")
    if not resolved.rel.endswith(".md"):
        raise ToolFailed("a directive is a .md file", code="not_a_directive")
    try:
        data = read_bytes(resolved)
    except ToolFailed as exc:
        if exc.code == "not_found":
            raise ToolFailed(f"no file at {resolved.rel}", code="not_found") from exc
        raise ToolFailed(f"{resolved.rel} is a folder", code="not_a_directive") from exc
    stem = resolved.rel.rsplit("/", 1)[-1][:-3]
    warnings: list[str] = []
    try:
        directive = parse_directive(
            data.decode("utf-8", "replace"), file_stem=stem, source=resolved.rel
        )
        allowance_for(directive, set(catalogue()))
    except ParseError as exc:
        return {
            "valid": False,
            "errors": [{"code": exc.code, "message": exc.message}],
            "warnings": warnings,
        }
    lowered = directive.body.lower()
    warnings += [f"no '{s}' section" for s in _SECTIONS if s not in lowered]
    if not directive.tools:
        warnings.append("tools is empty: the directive can call nothing")
    return {
        "valid": True,
        "directive": directive.to_dict(),
        "errors": [],
        "warnings": warnings,
    }


_DIRECTIVE_VALIDATE = Tool(
    name="directive.validate",
    description="Check a directive file (frontmatter, id against file name, description,"
    " category, tools, body) without running it.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path"],
        "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 4096}},
    },
    effect="read",
    handler=_unbound,
    paths=_path_arg,
    output_schema={
        "type": "object",
        "required": ["valid", "errors", "warnings"],
        "properties": {
            "valid": {"type": "boolean"},
            "directive": {"type": "object"},
            "errors": {"type": "array"},
            "warnings": {"type": "array"},
        },
    },
)


def _credential_resolve(_ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.errors import CredentialError
    from proctor.runtime.home.credentials.store import CredentialStore

    alias = args["alias"]
    store = CredentialStore()
    info = store.get(alias)
    if info is None:
        return {"alias": alias, "resolved": False, "code": "credential_profile_unknown"}
    try:
        store.material(alias)  # proves it decrypts; the value is dropped here, unread
    except CredentialError as exc:
        return {"alias": alias, "resolved": False, "code": exc.code}
    return {"alias": alias, "resolved": True, "provider": info.provider}


CREDENTIAL_RESOLVE = Tool(
    name="credential.resolve",
    description="Tell whether a stored credential profile resolves (and for which provider);"
    " never returns its value.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["alias"],
        "properties": {"alias": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"}},
    },
    effect="read",
    handler=_credential_resolve,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["alias", "resolved"],
        "properties": {
            "alias": {"type": "string"},
            "resolved": {"type": "boolean"},
            "provider": {"type": "string"},
            "code": {"type": "string"},
        },
    },
)


def agent_tools(catalogue: Catalogue) -> tuple[Tool, ...]:
    """The tools of this module, for the registry; ``catalogue`` answers every native tool by
    name (the registry's own), which ``tool.list`` shows and the directive tools map onto."""
    return (
        replace(_TOOL_LIST, handler=partial(_tool_list, catalogue)),
        replace(_DIRECTIVE_LIST, handler=partial(_directive_list, catalogue)),
        replace(_DIRECTIVE_VALIDATE, handler=partial(_directive_validate, catalogue)),
        CREDENTIAL_RESOLVE,
    )

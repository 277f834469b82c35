"""``fs.read_bundle``: several text files in one call, under one byte budget.

Each file is read as ``fs.read`` reads it (UTF-8 text only, every path through admission's
containment and the shipped sensitive-paths rule, hard links refused), and the bundle carries a
digest over every ``(path, content_digest)``. Once the budget is spent the remaining files are
named with no content and no digest (``truncated``); one refused path refuses the whole call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.fs import PATH_SCHEMA, READ_DEFAULT_BYTES, READ_MAX_BYTES
from proctor.runtime.tools.fsutil import DIGEST_PATTERN, os_errors_refused, read_text_file

__all__ = ["FS_READ_BUNDLE"]

BUNDLE_MAX_FILES = 64


def _bundle_paths(args: Mapping[str, Any]) -> list[tuple[str, Access]]:
    paths = args.get("paths")
    if not isinstance(paths, list) or not paths:
        return [("", "read")]
    return [(p if isinstance(p, str) else "", "read") for p in paths]


def _read_bundle(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.receipts.canonical import digest as canonical_digest
    from proctor.runtime.tools.base import check_cancel

    left = int(args.get("max_bytes", READ_DEFAULT_BYTES))
    files: list[dict[str, Any]] = []
    for path in args["paths"]:
        check_cancel(ctx)
        target = ctx.workspace.resolve(path, "read")
        if left <= 0:
            # the budget is spent: the file is named, digested by fs.read later, not read now
            files.append(
                {
                    "path": target.rel,
                    "content": "",
                    "content_digest": None,
                    "size": None,
                    "truncated": True,
                }
            )
            continue
        content, digest, size, truncated = read_text_file(ctx.workspace, target, left)
        left -= len(content.encode("utf-8"))
        files.append(
            {
                "path": target.rel,
                "content": content,
                "content_digest": digest,
                "size": size,
                "truncated": truncated,
            }
        )
    bundle = [{"path": f["path"], "content_digest": f["content_digest"]} for f in files]
    return {"files": files, "bundle_digest": canonical_digest(bundle)}


FS_READ_BUNDLE = Tool(
    name="fs.read_bundle",
    description=(
        "Read several UTF-8 text files of the workspace at once under one byte budget; returns"
        " each file's content and content_digest, and a digest of the bundle."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["paths"],
        "properties": {
            "paths": {
                "type": "array",
                "items": PATH_SCHEMA,
                "minItems": 1,
                "maxItems": BUNDLE_MAX_FILES,
                "uniqueItems": True,
            },
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": READ_MAX_BYTES},
        },
    },
    effect="read",
    handler=os_errors_refused(_read_bundle),
    paths=_bundle_paths,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["files", "bundle_digest"],
        "properties": {
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["path", "content", "content_digest", "size", "truncated"],
                },
            },
            "bundle_digest": {"type": "string", "pattern": DIGEST_PATTERN},
        },
    },
)

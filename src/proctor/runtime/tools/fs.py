"""``fs.read``, ``fs.write`` and ``fs.edit``: one file at a time, digest-bound changes.

Every change names what it replaces: ``expected_digest`` (the ``content_digest`` a read returned)
or ``create: true`` for a file that must not exist yet. Writes are atomic (temp file in the same
folder, fsync, rename), so a reader sees the old bytes or the new, never a mix, and hold the
file's write lock (:mod:`proctor.runtime.tools.fs_lock`) from the digest check to the rename, so
of several proctor processes changing one version only one succeeds.

``fs.read`` returns UTF-8 text only and takes no offset or encoding argument: its result is
scrubbed whole by admission, and an argument that re-encoded or sliced the content could carry a
secret past the scrubber. A truncated read ends at a line boundary for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.errors import RefusedCall, ToolFailed
from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.fs_lock import locked
from proctor.runtime.tools.fsutil import (
    DIGEST_PATTERN,
    MAX_WRITE_BYTES,
    FileState,
    atomic_create,
    atomic_replace,
    current_state,
    digest_of,
    encode_text,
    os_errors_refused,
    read_text_file,
    require_digest,
)

if TYPE_CHECKING:
    from proctor.runtime.boundary.resolved import Resolved

__all__ = [
    "DIGEST_SCHEMA",
    "FS_EDIT",
    "FS_READ",
    "FS_WRITE",
    "PATH_SCHEMA",
    "check_write",
    "path_arg",
]

READ_DEFAULT_BYTES = 1024 * 1024  # also fs.read_bundle's default budget
READ_MAX_BYTES = 16 * 1024 * 1024

PATH_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 4096,
    "description": "a path relative to the workspace root, or $NAME/relative/path inside a "
    "folder the run's input NAME names (reach: inputs)",
}
DIGEST_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": DIGEST_PATTERN,
    "description": "sha256:<hex> of the file's current bytes, as fs.read returns it",
}
_CONTENT_SCHEMA: dict[str, Any] = {"type": "string", "maxLength": MAX_WRITE_BYTES}


def path_arg(args: Mapping[str, Any], access: Access) -> list[tuple[str, Access]]:
    """The ``path`` argument with its access, for admission's containment check."""
    path = args.get("path")
    return [(path, access)] if isinstance(path, str) else [("", access)]


# -- fs.read -------------------------------------------------------------------------------------


def _read(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target = ctx.workspace.resolve(args["path"], "read")
    max_bytes = int(args.get("max_bytes", READ_DEFAULT_BYTES))
    content, digest, size, truncated = read_text_file(ctx.workspace, target, max_bytes)
    return {
        "path": target.rel,
        "content": content,
        "content_digest": digest,
        "size": size,
        "truncated": truncated,
    }


FS_READ = Tool(
    name="fs.read",
    description="Read a UTF-8 text file of the workspace; returns its content and content_digest.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path"],
        "properties": {
            "path": PATH_SCHEMA,
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": READ_MAX_BYTES},
        },
    },
    effect="read",
    handler=os_errors_refused(_read),
    paths=lambda args: path_arg(args, "read"),
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "content", "content_digest", "size", "truncated"],
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "content_digest": {"type": "string", "pattern": DIGEST_PATTERN},
            "size": {"type": "integer", "minimum": 0},
            "truncated": {"type": "boolean"},
        },
    },
)

# -- fs.write ------------------------------------------------------------------------------------


def check_write(target: Resolved, state: FileState, args: dict[str, Any]) -> None:
    """Refuse an ``fs.write`` that cannot apply to the file as it is now.

    The floor's preview calls this before anyone is asked (a write that would be refused once
    approved is refused at once); the tool calls it again under the file's lock.

    Raises:
        RefusedCall: ``write_mode_conflict`` (both ``create`` and ``expected_digest``),
            ``file_exists`` (a create over an existing file), or :func:`require_digest`'s codes.
    """
    expected = args.get("expected_digest")
    if args.get("create", False):
        if expected is not None:
            raise RefusedCall(
                "pass either create: true (a new file) or expected_digest (a replacement), "
                "not both",
                code="write_mode_conflict",
                details={"path": target.rel},
            )
        if state.exists:
            raise RefusedCall(
                f"'{target.rel}' already exists; replacing it needs its expected_digest",
                code="file_exists",
                details={"path": target.rel},
            )
    else:
        require_digest(target, state, expected)


def _write(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target = ctx.workspace.resolve(args["path"], "write")
    data = encode_text(ctx.workspace, target.rel, args["content"])
    with locked(ctx.workspace, [target]):
        state = current_state(ctx.workspace, target)
        check_write(target, state, args)
        if args.get("create", False):
            atomic_create(target, data)
            previous = None
        else:
            atomic_replace(target, data, state.mode)
            previous = state.digest
    return {"path": target.rel, "content_digest": digest_of(data), "previous_digest": previous}


_CHANGE_OUTPUT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["path", "content_digest", "previous_digest"],
    "properties": {
        "path": {"type": "string"},
        "content_digest": {"type": "string", "pattern": DIGEST_PATTERN},
        "previous_digest": {"type": ["string", "null"]},
    },
}

FS_WRITE = Tool(
    name="fs.write",
    description="Write a text file: create a new one (create: true) or replace one whose "
    "current expected_digest you give; never a blind overwrite.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "content"],
        "properties": {
            "path": PATH_SCHEMA,
            "content": _CONTENT_SCHEMA,
            "expected_digest": DIGEST_SCHEMA,
            "create": {"type": "boolean"},
        },
    },
    effect="write",
    handler=os_errors_refused(_write),
    paths=lambda args: path_arg(args, "write"),
    output_schema=_CHANGE_OUTPUT,
)

# -- fs.edit -------------------------------------------------------------------------------------


def apply_edits(rel: str, text: str, edits: list[dict[str, Any]]) -> str:
    """Apply exact-string edits in order; each ``old`` must occur once unless ``replace_all``.

    Raises:
        RefusedCall: ``edit_no_match`` or ``edit_ambiguous`` naming the edit's index.
    """
    for index, edit in enumerate(edits):
        old, new = edit["old"], edit["new"]
        count = text.count(old)
        if count == 0:
            raise RefusedCall(
                f"edit {index} of '{rel}': its old text does not occur in the file",
                code="edit_no_match",
                details={"path": rel, "edit": index},
            )
        if count > 1 and not edit.get("replace_all", False):
            raise RefusedCall(
                f"edit {index} of '{rel}': its old text occurs {count} times; make it unique "
                "or set replace_all",
                code="edit_ambiguous",
                details={"path": rel, "edit": index, "matches": count},
            )
        text = text.replace(old, new)
    return text


def _edit(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    target = ctx.workspace.resolve(args["path"], "write")
    expected = args.get("expected_digest")
    with locked(ctx.workspace, [target]):
        # read, check and replace under the lock: a change since our read cannot be lost
        state = current_state(ctx.workspace, target)
        if expected is not None or not state.exists:
            require_digest(target, state, expected)
        assert state.data is not None
        try:
            text = state.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolFailed(
                f"'{target.rel}' is not UTF-8 text; fs.edit edits text only",
                code="binary_file",
                details={"path": target.rel},
            ) from exc
        edited = apply_edits(target.rel, text, args["edits"])
        data = encode_text(ctx.workspace, target.rel, edited)
        atomic_replace(target, data, state.mode)
    return {"path": target.rel, "content_digest": digest_of(data), "previous_digest": state.digest}


FS_EDIT = Tool(
    name="fs.edit",
    description="Edit a text file with exact replacements, all applied or none; each old text "
    "must occur exactly once unless replace_all.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "edits"],
        "properties": {
            "path": PATH_SCHEMA,
            "expected_digest": DIGEST_SCHEMA,
            "edits": {
                "type": "array",
                "minItems": 1,
                "maxItems": 200,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["old", "new"],
                    "properties": {
                        "old": {"type": "string", "minLength": 1, "maxLength": MAX_WRITE_BYTES},
                        "new": {"type": "string", "maxLength": MAX_WRITE_BYTES},
                        "replace_all": {"type": "boolean"},
                    },
                },
            },
        },
    },
    effect="write",
    handler=os_errors_refused(_edit),
    paths=lambda args: path_arg(args, "write"),
    output_schema=_CHANGE_OUTPUT,
)

"""``fs.delete`` and ``fs.restore``: a digest-bound delete that can be undone.

A deleted file is moved (not unlinked) to ``.proctor/trash/<trash_id>/content`` beside a
``manifest.json`` naming its workspace-relative path and digest. ``fs.restore`` puts it back,
refusing to overwrite a file that is there now unless given that file's ``expected_digest``.
The destination of a restore comes from the manifest, not the arguments, so it is checked here
(``Workspace.resolve`` for ``write``) rather than by admission's path extraction.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from proctor.errors import RefusedCall, ToolFailed
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.tools.base import Tool, ToolContext, no_paths
from proctor.runtime.tools.fs import DIGEST_SCHEMA, PATH_SCHEMA, path_arg
from proctor.runtime.tools.fsutil import (
    DIGEST_PATTERN,
    atomic_create,
    atomic_replace,
    current_state,
    digest_of,
    fsync_dir,
    require_digest,
)

__all__ = ["FS_DELETE", "FS_RESTORE", "TRASH_ID_PATTERN"]

TRASH_ID_PATTERN = "^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}$"
_TRASH_ID = re.compile(TRASH_ID_PATTERN)


def _trash_dir(ws: Workspace, *, create: bool = True) -> str:
    return str(ws.private_dir("trash", create=create))


def _delete(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    ws = ctx.workspace
    target = ws.resolve(args["path"], "write")
    state = current_state(ws, target)
    require_digest(target, state, args["expected_digest"])
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    trash_id = f"{stamp}-{secrets.token_hex(6)}"
    folder = os.path.join(_trash_dir(ws), trash_id)
    os.makedirs(folder, mode=0o700)
    manifest = {
        "trash_id": trash_id,
        "path": target.rel,
        "digest": state.digest,
        "mode": state.mode,
        "deleted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_id": ctx.run_id,
        "call_id": ctx.call_id,
    }
    with open(os.path.join(folder, "manifest.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    # Re-check just before the move: a change since the read would otherwise be trashed unseen.
    require_digest(target, current_state(ws, target), state.digest)
    content = os.path.join(folder, "content")
    try:
        os.rename(target.abs, content)
    except OSError:
        shutil.copy2(target.abs, content)
        os.unlink(target.abs)
    fsync_dir(target.abs.parent)
    fsync_dir(Path(folder))
    return {"path": target.rel, "trash_id": trash_id, "digest": state.digest}


FS_DELETE = Tool(
    name="fs.delete",
    description="Delete a file whose current expected_digest you give; it is moved to the "
    "workspace trash and fs.restore can bring it back.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "expected_digest"],
        "properties": {"path": PATH_SCHEMA, "expected_digest": DIGEST_SCHEMA},
    },
    effect="write",
    handler=_delete,
    paths=lambda args: path_arg(args, "write"),
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "trash_id", "digest"],
        "properties": {
            "path": {"type": "string"},
            "trash_id": {"type": "string", "pattern": TRASH_ID_PATTERN},
            "digest": {"type": "string", "pattern": DIGEST_PATTERN},
        },
    },
)


def _restore(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    ws = ctx.workspace
    trash_id = args["trash_id"]
    if not _TRASH_ID.match(trash_id):
        raise RefusedCall("not a trash id", code="invalid_trash_id")
    folder = os.path.join(_trash_dir(ws, create=False), trash_id)
    try:
        with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as handle:
            manifest = json.load(handle)
        with open(os.path.join(folder, "content"), "rb") as handle:
            data = handle.read()
    except (OSError, ValueError) as exc:
        raise ToolFailed(
            f"trash entry {trash_id} does not exist or is damaged", code="trash_not_found"
        ) from exc
    if not isinstance(manifest, dict) or digest_of(data) != manifest.get("digest"):
        raise ToolFailed(
            f"trash entry {trash_id} does not match its manifest; it was not restored",
            code="trash_damaged",
        )
    target = ws.resolve(str(manifest.get("path", "")), "write")
    ws.check_content(target.rel, data)
    state = current_state(ws, target)
    expected = args.get("expected_digest")
    if state.exists:
        if expected is None:
            raise RefusedCall(
                f"'{target.rel}' exists now; restoring over it needs its expected_digest",
                code="file_exists",
                details={"path": target.rel},
            )
        require_digest(target, state, expected)
        mode = manifest.get("mode")
        atomic_replace(target.abs, data, mode if isinstance(mode, int) else state.mode)
    else:
        atomic_create(target.abs, target.rel, data)
    shutil.rmtree(folder, ignore_errors=True)
    fsync_dir(Path(_trash_dir(ws)))
    return {"path": target.rel, "content_digest": digest_of(data), "previous_digest": state.digest}


FS_RESTORE = Tool(
    name="fs.restore",
    description="Restore a file fs.delete moved to the trash, to its former path; an existing "
    "file there is replaced only if its expected_digest is given.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["trash_id"],
        "properties": {
            "trash_id": {"type": "string", "pattern": TRASH_ID_PATTERN},
            "expected_digest": DIGEST_SCHEMA,
        },
    },
    effect="write",
    handler=_restore,
    paths=no_paths,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "content_digest", "previous_digest"],
        "properties": {
            "path": {"type": "string"},
            "content_digest": {"type": "string", "pattern": DIGEST_PATTERN},
            "previous_digest": {"type": ["string", "null"]},
        },
    },
)

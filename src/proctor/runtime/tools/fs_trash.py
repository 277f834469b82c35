"""``fs.delete`` and ``fs.restore``: a digest-bound delete that can be undone.

A deleted file is moved (not unlinked) to ``.proctor/trash/<trash_id>/content`` beside a
``manifest.json`` naming its workspace-relative path and digest. ``fs.restore`` puts it back,
refusing to overwrite a file that is there now unless given that file's ``expected_digest``.
The destination of a restore comes from the manifest, not the arguments, so it is checked here
(``Workspace.resolve`` for ``write``) rather than by admission's path extraction. Both hold the
file's write lock from the digest check to the move (:mod:`proctor.runtime.tools.fs_lock`), and
move, read and write through folder descriptors (:mod:`proctor.runtime.tools.fsutil`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
from datetime import UTC, datetime
from typing import Any

from proctor.errors import RefusedCall, ToolFailed
from proctor.runtime.boundary.fds import DIR_FLAGS, open_below, parent_of
from proctor.runtime.boundary.workspace import Resolved, Workspace
from proctor.runtime.tools.base import Tool, ToolContext, no_paths
from proctor.runtime.tools.fs import DIGEST_SCHEMA, PATH_SCHEMA, path_arg
from proctor.runtime.tools.fs_lock import locked
from proctor.runtime.tools.fsutil import (
    DIGEST_PATTERN,
    atomic_create,
    atomic_replace,
    current_state,
    digest_of,
    fsync_dir,
    os_errors_refused,
    read_bytes,
    require_digest,
)

__all__ = ["FS_DELETE", "FS_RESTORE", "TRASH_ID_PATTERN"]

TRASH_ID_PATTERN = "^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}$"
_TRASH_ID = re.compile(TRASH_ID_PATTERN)


def _trash_dir(ws: Workspace, *, create: bool = True) -> str:
    return str(ws.private_dir("trash", create=create))


def _move_to_trash(target: Resolved, entry: Resolved) -> None:
    """Rename ``target`` to ``entry`` (both through their folders' descriptors); across file
    systems (a root elsewhere), copy it and unlink the original."""
    content = Resolved(abs=entry.abs / "content", rel=entry.rel + "/content", base=entry.base)
    folder = open_below(*entry.where, DIR_FLAGS)
    try:
        with parent_of(*target.where) as (dir_fd, name):
            try:
                os.rename(name, "content", src_dir_fd=dir_fd, dst_dir_fd=folder)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                atomic_create(content, read_bytes(target), 0o600)
                os.unlink(name, dir_fd=dir_fd)
            fsync_dir(dir_fd)
        fsync_dir(folder)
    finally:
        os.close(folder)


def _delete(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    ws = ctx.workspace
    target = ws.resolve(args["path"], "write")
    with locked(ws, [target]):
        state = current_state(ws, target)
        require_digest(target, state, args["expected_digest"])
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        trash_id = f"{stamp}-{secrets.token_hex(6)}"
        _trash_dir(ws)
        entry = ws.private_file("trash", trash_id)
        with parent_of(*entry.where) as (trash_fd, name):
            os.mkdir(name, 0o700, dir_fd=trash_fd)
        manifest = {
            "trash_id": trash_id,
            "path": target.rel,
            "digest": state.digest,
            "mode": state.mode,
            "deleted_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "run_id": ctx.run_id,
            "call_id": ctx.call_id,
        }
        manifest_file = ws.private_file("trash", f"{trash_id}/manifest.json")
        atomic_create(manifest_file, json.dumps(manifest, sort_keys=True).encode(), 0o600)
        _move_to_trash(target, entry)
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
    handler=os_errors_refused(_delete),
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


def _read_entry(ws: Workspace, trash_id: str) -> tuple[dict[str, Any], bytes]:
    try:
        manifest = json.loads(read_bytes(ws.private_file("trash", f"{trash_id}/manifest.json")))
        data = read_bytes(ws.private_file("trash", f"{trash_id}/content"))
    except (ValueError, ToolFailed) as exc:
        raise ToolFailed(
            f"trash entry {trash_id} does not exist or is damaged", code="trash_not_found"
        ) from exc
    if not isinstance(manifest, dict) or digest_of(data) != manifest.get("digest"):
        raise ToolFailed(
            f"trash entry {trash_id} does not match its manifest; it was not restored",
            code="trash_damaged",
        )
    return manifest, data


def _mode(manifest: dict[str, Any], default: int | None) -> int | None:
    mode = manifest.get("mode")
    return mode & 0o777 if isinstance(mode, int) and not isinstance(mode, bool) else default


def _restore(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    ws = ctx.workspace
    trash_id = args["trash_id"]
    if not _TRASH_ID.match(trash_id):
        raise RefusedCall("not a trash id", code="invalid_trash_id")
    folder = os.path.join(_trash_dir(ws, create=False), trash_id)
    if not os.path.isdir(folder):
        raise ToolFailed(
            f"trash entry {trash_id} does not exist or is damaged", code="trash_not_found"
        )
    manifest, data = _read_entry(ws, trash_id)
    target = ws.resolve(str(manifest.get("path", "")), "write")
    ws.check_content(target.rel, data)
    expected = args.get("expected_digest")
    with locked(ws, [target]):
        state = current_state(ws, target)
        if state.exists:
            if expected is None:
                raise RefusedCall(
                    f"'{target.rel}' exists now; restoring over it needs its expected_digest",
                    code="file_exists",
                    details={"path": target.rel},
                )
            require_digest(target, state, expected)
            atomic_replace(target, data, _mode(manifest, state.mode))
        else:
            atomic_create(target, data, _mode(manifest, None))
    shutil.rmtree(folder, ignore_errors=True)
    fsync_dir(ws.private_dir("trash"))
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
    handler=os_errors_refused(_restore),
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

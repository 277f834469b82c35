"""``fs.apply_bundle``: several creates, replaces and deletes applied all or nothing.

The order of work is what makes it safe:

1. every member is resolved (containment), the write lock of every path is taken in a fixed
   order (:mod:`proctor.runtime.tools.fs_lock`) and held to the end, and every member is
   validated under the locks (digests, content); one bad member refuses the bundle and nothing
   is touched;
2. the before-image of every replaced or deleted file is copied to
   ``.proctor/journal/<bundle_id>/<index>.before`` (fsynced) and the bundle is journaled in the
   run store (``journal_open``: durable before the first change). Before-images are copies on
   disk rather than base64 in the store because a bundle may carry up to 64 MiB and the store's
   rows should stay small; the journal records each copy's digest, checked before it is used;
3. members are applied in order with atomic renames, then the bundle is closed ``applied``.

A crash between 2 and 3 leaves an ``open`` bundle; :func:`recover_bundles`, called by the next
driver, restores every member to its before-image and closes it ``rolled_back``. A failure
inside 3 rolls back at once in the same way.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import ProctorError, RefusedCall, ToolFailed
from proctor.runtime.boundary.workspace import Resolved, Workspace
from proctor.runtime.records.runs import JournalRecord, RunStore
from proctor.runtime.tools.base import Access, Tool, ToolContext
from proctor.runtime.tools.fs import DIGEST_SCHEMA, PATH_SCHEMA
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
    fsync_dir,
    os_errors_refused,
    read_bytes,
    remove,
    require_digest,
)

__all__ = ["FS_APPLY_BUNDLE", "KILL_AFTER_ENV", "recover_bundles"]

MAX_BUNDLE_BYTES = 64 * 1024 * 1024
KILL_AFTER_ENV = "PROCTOR_TEST_BUNDLE_KILL_AFTER"
"""Test hook: when set to k, the process SIGKILLs itself after applying k members (crash tests)."""


@dataclass
class _Member:
    index: int
    op: str
    target: Resolved
    state: FileState
    data: bytes | None


def _member_error(index: int, exc: ProctorError) -> ProctorError:
    details = {**exc.details, "member": index}
    return type(exc)(f"bundle member {index}: {exc.message}", code=exc.code, details=details)


def _targets(ws: Workspace, changes: list[dict[str, Any]]) -> list[Resolved]:
    targets: list[Resolved] = []
    for index, change in enumerate(changes):
        try:
            targets.append(ws.resolve(change["path"], "write"))
        except ProctorError as exc:
            raise _member_error(index, exc) from exc
    return targets


def _validate(
    ws: Workspace, changes: list[dict[str, Any]], targets: list[Resolved]
) -> list[_Member]:
    members: list[_Member] = []
    seen: set[str] = set()
    total = 0
    for index, (change, target) in enumerate(zip(changes, targets, strict=True)):
        try:
            members.append(_validate_one(ws, change, target, index))
        except ProctorError as exc:
            raise _member_error(index, exc) from exc
        member = members[-1]
        key = member.target.rel.casefold()
        if key in seen:
            raise RefusedCall(
                f"bundle member {index}: '{member.target.rel}' appears twice in the bundle",
                code="bundle_duplicate_path",
                details={"path": member.target.rel, "member": index},
            )
        seen.add(key)
        total += len(member.data or b"") + len(member.state.data or b"")
        if total > MAX_BUNDLE_BYTES:
            raise RefusedCall(
                f"the bundle carries more than {MAX_BUNDLE_BYTES} bytes", code="bundle_too_large"
            )
    return members


def _validate_one(ws: Workspace, change: dict[str, Any], target: Resolved, index: int) -> _Member:
    op = change["op"]
    content = change.get("content")
    expected = change.get("expected_digest")
    state = current_state(ws, target)
    if op == "delete":
        if content is not None:
            raise RefusedCall("a delete carries no content", code="bundle_member_invalid")
        require_digest(target, state, expected)
        return _Member(index, op, target, state, None)
    if content is None:
        raise RefusedCall(f"a {op} needs content", code="bundle_member_invalid")
    data = encode_text(ws, target.rel, content)
    if op == "create":
        if expected is not None:
            raise RefusedCall("a create carries no expected_digest", code="write_mode_conflict")
        if state.exists:
            raise RefusedCall(
                f"'{target.rel}' already exists; replace it with its expected_digest",
                code="file_exists",
                details={"path": target.rel},
            )
    else:
        require_digest(target, state, expected)
    return _Member(index, op, target, state, data)


def _owner() -> dict[str, Any]:
    started: float | None
    try:
        import psutil

        started = float(psutil.Process(os.getpid()).create_time())
    except Exception:  # psutil absent or unsupported: recovery then treats the owner as gone
        started = None
    return {"pid": os.getpid(), "started": started}


def _owner_alive(owner: Any) -> bool:
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
        return False
    started = owner.get("started")
    if started is None:
        return False
    try:
        import psutil

        return abs(float(psutil.Process(owner["pid"]).create_time()) - float(started)) < 0.5
    except Exception:
        return False


def _journal_dir(ws: Workspace, bundle_id: str) -> Path:
    return ws.private_dir("journal") / bundle_id


def _apply(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    ws = ctx.workspace
    targets = _targets(ws, args["changes"])
    with locked(ws, targets):
        return _apply_locked(ctx, ws, _validate(ws, args["changes"], targets))


def _apply_locked(ctx: ToolContext, ws: Workspace, members: list[_Member]) -> dict[str, Any]:
    bundle_id = "bundle-" + secrets.token_hex(8)
    folder = _journal_dir(ws, bundle_id)
    folder.mkdir(parents=True, mode=0o700)
    owner = _owner()
    entries: list[dict[str, Any]] = []
    for member in members:
        copy = None
        if member.state.exists:
            assert member.state.data is not None
            copy = f"{member.index}.before"
            before = ws.private_file("journal", f"{bundle_id}/{copy}")
            atomic_create(before, member.state.data, 0o600)
        entries.append(
            {
                "index": member.index,
                "op": member.op,
                "path": member.target.rel,
                "before_digest": member.state.digest,
                "before_copy": copy,
                "mode": member.state.mode,
                "after_digest": None if member.data is None else digest_of(member.data),
                "owner": owner,
            }
        )
    fsync_dir(folder)
    ctx.store.journal_open(JournalRecord(bundle_id, ctx.run_id, "open", entries))
    kill_after = os.environ.get(KILL_AFTER_ENV)
    try:
        for done, member in enumerate(members):
            if kill_after is not None and done == int(kill_after):
                os.kill(os.getpid(), signal.SIGKILL)
            _apply_member(member)
    except BaseException as exc:
        # the locks are held by this call: the rollback takes none of its own
        _settle(ws, ctx.store, JournalRecord(bundle_id, ctx.run_id, "open", entries), lock=False)
        if isinstance(exc, ProctorError):
            raise
        raise ToolFailed(
            f"the bundle failed while being applied and was rolled back ({type(exc).__name__})",
            code="bundle_failed",
        ) from exc
    ctx.store.journal_close(bundle_id, "applied")
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "bundle_id": bundle_id,
        "changes": [
            {
                "op": e["op"],
                "path": e["path"],
                "content_digest": e["after_digest"],
                "previous_digest": e["before_digest"],
            }
            for e in entries
        ],
    }


def _apply_member(member: _Member) -> None:
    target = member.target
    if member.op == "create":
        assert member.data is not None
        atomic_create(target, member.data)
    elif member.op == "replace":
        assert member.data is not None
        atomic_replace(target, member.data, member.state.mode)
    else:
        remove(target)


# -- recovery ------------------------------------------------------------------------------------


def _digest_now(ws: Workspace, target: Resolved) -> str | bool | None:
    """The digest at ``target`` now, None when nothing is there, False when it cannot be told
    (a folder, a hard-linked file, a race): a state neither before nor after."""
    try:
        return current_state(ws, target).digest
    except ProctorError:
        return False


def _roll_back_entry(ws: Workspace, bundle_id: str, entry: dict[str, Any]) -> bool:
    """Put one member back; False when the file is in a state neither before nor after."""
    try:
        target = ws.resolve(str(entry["path"]), "write")
    except ProctorError:
        return False
    now = _digest_now(ws, target)
    before, after = entry.get("before_digest"), entry.get("after_digest")
    if now is False:
        return False
    if now == before:
        return True
    if now is not None and now != after:
        return False
    if entry["op"] == "create":
        remove(target)
        return True
    copy = entry.get("before_copy")
    if not isinstance(copy, str) or "/" in copy:
        return False
    try:
        data = read_bytes(ws.private_file("journal", f"{bundle_id}/{copy}"))
    except ProctorError:
        return False
    if digest_of(data) != before:
        return False
    mode = entry.get("mode")
    if now is None:
        atomic_create(target, data, mode if isinstance(mode, int) else None)
    else:
        atomic_replace(target, data, mode if isinstance(mode, int) else None)
    return True


def _settle(ws: Workspace, store: RunStore, record: JournalRecord, *, lock: bool = True) -> bool:
    folder = _journal_dir(ws, record.bundle_id)
    ok = True
    targets: list[Resolved] = []
    if lock:
        for entry in record.entries:
            try:
                targets.append(ws.resolve(str(entry["path"]), "write"))
            except ProctorError:
                continue  # refused again below, and the bundle closed rollback_conflict
    with locked(ws, targets) if targets else contextlib.nullcontext():
        for entry in reversed(record.entries):
            try:
                ok = _roll_back_entry(ws, record.bundle_id, entry) and ok
            except ProctorError:
                ok = False
    store.journal_close(record.bundle_id, "rolled_back" if ok else "rollback_conflict")
    if ok:
        shutil.rmtree(folder, ignore_errors=True)
    return ok


def recover_bundles(workspace: Workspace, store: RunStore) -> list[str]:
    """Roll back every bundle a crash left ``open``; returns the ids rolled back.

    Each member is restored to its before-image only when the file now holds either its
    before or its after content (digests checked, and the journal copy's digest too). A bundle
    with a member in any other state (changed by someone since) is closed
    ``rollback_conflict`` and left as it is for a person to look at; it is not in the result.
    A bundle whose owning process is still alive is skipped (it is being applied now).
    """
    rolled_back: list[str] = []
    for record in store.journal_pending():
        owner = record.entries[0].get("owner") if record.entries else None
        if _owner_alive(owner):
            continue
        from proctor.runtime.boundary.reach import recovery_workspace

        # a bundle in another root is put back through the roots its run started with
        run = store.get_run(record.run_id)
        ws = recovery_workspace(workspace, None if run is None else run.data)
        if _settle(ws, store, record):
            rolled_back.append(record.bundle_id)
    return rolled_back


def _bundle_paths(args: Any) -> list[tuple[str, Access]]:
    changes = args.get("changes") if isinstance(args, dict) else None
    out: list[tuple[str, Access]] = []
    for change in changes if isinstance(changes, list) else []:
        path = change.get("path") if isinstance(change, dict) else None
        out.append((path if isinstance(path, str) else "", "write"))
    return out


FS_APPLY_BUNDLE = Tool(
    name="fs.apply_bundle",
    description="Apply several file creates, replaces and deletes all or nothing; replaces and "
    "deletes are bound to each file's expected_digest.",
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["changes"],
        "properties": {
            "changes": {
                "type": "array",
                "minItems": 1,
                "maxItems": 200,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["op", "path"],
                    "properties": {
                        "op": {"enum": ["create", "replace", "delete"]},
                        "path": PATH_SCHEMA,
                        "content": {"type": "string", "maxLength": MAX_WRITE_BYTES},
                        "expected_digest": DIGEST_SCHEMA,
                    },
                },
            }
        },
    },
    effect="write",
    handler=os_errors_refused(_apply),
    paths=_bundle_paths,
    output_schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["bundle_id", "changes"],
        "properties": {
            "bundle_id": {"type": "string"},
            "changes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["op", "path", "content_digest", "previous_digest"],
                    "properties": {
                        "op": {"enum": ["create", "replace", "delete"]},
                        "path": {"type": "string"},
                        "content_digest": {"type": ["string", "null"], "pattern": DIGEST_PATTERN},
                        "previous_digest": {"type": ["string", "null"]},
                    },
                },
            },
        },
    },
)

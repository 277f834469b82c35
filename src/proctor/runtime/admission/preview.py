"""What a change will execute, shown to the person the approval floor asks.

For a file change: each file's unified diff and the digests it replaces and becomes; for a
command: its argv, directory and their digest; for anything else: the tool and its arguments.
The request digest is computed over exactly this payload, so a file that changes after a person
saw the diff gives a different request, which the old decision never answers.

A payload over 64 KiB is stored as an artifact (``.proctor/artifacts/<hex>.json``, canonical
JSON) and the request carries its digest and relative path instead.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from proctor.core.floor import Change
from proctor.errors import ProctorError, RefusedCall
from proctor.receipts.canonical import canonical, digest

if TYPE_CHECKING:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.tools.base import Tool

__all__ = ["PAYLOAD_INLINE_MAX", "approval_request_body", "preview"]

PAYLOAD_INLINE_MAX = 64 * 1024
_DIFF_MAX_LINES = 20_000


def _text(data: bytes | None) -> list[str]:
    if data is None:
        return []
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return ["<binary content>\n"]


def _file_change(ws: Workspace, rel: str, op: str, after: bytes | None) -> dict[str, Any]:
    from proctor.runtime.tools.fsutil import current_state, digest_of

    target = ws.resolve(rel, "write")
    state = current_state(ws, target)
    diff = "".join(
        list(
            difflib.unified_diff(
                _text(state.data),
                _text(after),
                fromfile="a/" + target.rel if state.exists else "/dev/null",
                tofile="b/" + target.rel if after is not None else "/dev/null",
            )
        )[:_DIFF_MAX_LINES]
    )
    return {
        "path": target.rel,
        "op": op,
        "before_digest": state.digest,
        "after_digest": None if after is None else digest_of(after),
        "diff": diff,
    }


def _edit_after(ws: Workspace, args: dict[str, Any]) -> bytes:
    from proctor.runtime.tools.fs import apply_edits
    from proctor.runtime.tools.fsutil import current_state, encode_text

    target = ws.resolve(args["path"], "write")
    state = current_state(ws, target)
    if state.data is None:
        raise RefusedCall(f"'{target.rel}' does not exist", code="not_found")
    text = state.data.decode("utf-8", errors="replace")
    return encode_text(ws, target.rel, apply_edits(target.rel, text, args["edits"]))


def preview(
    ws: Workspace, tool: Tool, args: dict[str, Any], package: str | None = None
) -> tuple[Change, dict[str, Any]]:
    """The floor's view of a changing call and the payload a person approves.

    Raises:
        RefusedCall: the change cannot be shown (its target vanished, an edit does not
            apply); the call would fail the same way, so it is refused before anyone is asked.
    """
    from proctor.runtime.connectors.operations import OperationTool, operation_payload
    from proctor.runtime.tools.fsutil import encode_text

    try:
        if isinstance(tool, OperationTool):
            name = f"{tool.connector}/{tool.operation}"
            change = Change(tool.name, tool.effect, operation=name)
            return change, operation_payload(tool, args, package)
        if tool.name.startswith("mcp:"):
            # an upstream MCP tool: the exact call is what executes; a standing approval names
            # it as an operation, mcp:<server>/<tool> (or mcp:<server>/*)
            change = Change(tool.name, tool.effect, operation=tool.name)
            return change, {"call": {"tool": tool.name, "args": args}}
        if tool.name == "fs.write":
            from proctor.runtime.tools.fs import check_write
            from proctor.runtime.tools.fsutil import current_state

            target = ws.resolve(args["path"], "write")
            check_write(target, current_state(ws, target), args)
            rel = target.rel
            op = "create" if args.get("create") else "replace"
            after = encode_text(ws, rel, args["content"])
            files = [_file_change(ws, rel, op, after)]
        elif tool.name == "fs.edit":
            files = [_file_change(ws, args["path"], "replace", _edit_after(ws, args))]
        elif tool.name == "fs.apply_bundle":
            files = []
            for member in args["changes"]:
                content = member.get("content")
                data = None if content is None else encode_text(ws, member["path"], content)
                files.append(_file_change(ws, member["path"], member["op"], data))
        elif tool.name == "fs.delete":
            from proctor.runtime.tools.fsutil import current_state, require_digest

            target = ws.resolve(args["path"], "write")
            require_digest(target, current_state(ws, target), args["expected_digest"])
            files = [_file_change(ws, args["path"], "delete", None)]
        elif tool.name == "command.execute":
            argv = [str(a) for a in args["argv"]]
            cwd = ws.resolve(args.get("cwd", "."), "list").rel or "."
            shown = {"argv": argv, "cwd": cwd, "timeout_seconds": args.get("timeout_seconds")}
            payload = {"command": {**shown, "digest": digest(shown)}}
            return Change(tool.name, tool.effect, (), tuple(argv)), payload
        else:
            return Change(tool.name, tool.effect), {"call": {"tool": tool.name, "args": args}}
    except RefusedCall:
        raise
    except ProctorError as exc:
        raise RefusedCall(exc.message, code=exc.code, details=exc.details) from exc
    paths = tuple(f["path"] for f in files)
    return Change(tool.name, tool.effect, paths), {"files": files}


def approval_request_body(
    ws: Workspace,
    *,
    address: str,
    tool: str,
    reason: str,
    payload: dict[str, Any],
    args_digest: str,
) -> dict[str, Any]:
    """The approval request's body; a payload over 64 KiB goes to an artifact by digest.

    ``args_digest`` (the call's arguments, as its record names them) binds a decision to the
    exact call it was asked for: a decline is applied to that call alone, whatever became of
    the files it would change.
    """
    payload_digest = digest(payload)
    body: dict[str, Any] = {
        "kind": "approval",
        "gate": "tool",
        "address": address,
        "tool": tool,
        "reason": reason,
        "args_digest": args_digest,
        "payload_digest": payload_digest,
    }
    data = canonical(payload)
    if len(data) <= PAYLOAD_INLINE_MAX:
        body["payload"] = payload
        return body
    folder = ws.state_dir / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    name = payload_digest.removeprefix("sha256:") + ".json"
    path = folder / name
    if not path.exists():
        tmp = folder / (name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    body["payload_artifact"] = {"digest": payload_digest, "path": f".proctor/artifacts/{name}"}
    return body

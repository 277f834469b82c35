"""What a person sees of one request, as lines every medium paints the same way, and the one
line that summarises it (:func:`summary_of`: listings and notifications).

Split from :mod:`proctor.runtime.engine.approvals` along the seam between finding a request
(the store, the sanitized view, the decision) and saying what it holds: one definition of what
each kind of request shows, which the terminal (``proctor approve``/``decline``) and the
console's pages both paint, each through its own rendering boundary (the text here is raw run
data; never print it without ``proctor.cli.paint.inert`` or the console's jinja hook).

Every field the request digest covers is shown: the kind, gate, address, tool, reason, the
argument and payload digests, and the whole payload: each file's operation, path, digests and
diff; a command's argv, directory, timeout and digest; an HTTP request's method, URL, headers
and body; a connector operation's connector, origin, method, URL, query, headers (the
credential named, never shown), body, idempotency key and readback; any other call's tool and
every argument. A field this module does not know is shown too, as JSON, under its name.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from proctor.core.resume import options_of

__all__ = ["LINE_STYLES", "SUMMARY_MAX", "request_lines", "summary_of"]

SUMMARY_MAX = 120

LINE_STYLES = ("head", "key", "file", "add", "del", "hunk", "ctx", "body", "warn")
"""The style of a line: a medium maps each to its colour or CSS class."""

Line = tuple[str, str]

_VIEW_SHOWN = frozenset(
    {
        "kind",
        "gate",
        "address",
        "tool",
        "reason",
        "approval_type",
        "args_digest",
        "payload_digest",
        "payload",
        "payload_artifact",
        "redacted",
        "questions",
        "request_digest",
        "question",
        "call_id",
        "state",
        "approvals",
        "approved_so_far",
        "expires_in",
        "on_expiry",
    }
)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _block(lines: list[Line], label: str, value: Any) -> None:
    """``label:`` then ``value`` (a string as it is, anything else as indented JSON)."""
    text = value if isinstance(value, str) else _json(value)
    lines.append(("key", f"{label}:"))
    lines.extend(("body", "  " + line) for line in text.splitlines() or [""])


def _files(lines: list[Line], files: list[Any]) -> None:
    for change in files:
        if not isinstance(change, Mapping):
            _block(lines, "file", change)
            continue
        lines.append(("file", f"{change.get('op')} {change.get('path')}"))
        lines.append(
            (
                "key",
                f"  digest before {change.get('before_digest')} after {change.get('after_digest')}",
            )
        )
        for line in str(change.get("diff") or "").splitlines():
            if line.startswith(("+++", "---")):
                style = "file"
            else:
                style = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
            lines.append((style, line))
        rest = {k: v for k, v in change.items() if k not in _FILE_KEYS}
        for key, value in sorted(rest.items()):
            _block(lines, f"  {key}", value)


_FILE_KEYS = frozenset({"op", "path", "before_digest", "after_digest", "diff"})


def _command(lines: list[Line], command: Mapping[str, Any]) -> None:
    argv = command.get("argv")
    lines.append(("key", "argv: " + json.dumps(argv, ensure_ascii=False)))
    if isinstance(argv, list):
        lines.append(("body", "  $ " + shlex.join(str(a) for a in argv)))
    lines.append(("key", f"cwd: {command.get('cwd') or '.'}"))
    lines.append(("key", f"timeout: {json.dumps(command.get('timeout_seconds'))} s"))
    if command.get("digest"):
        lines.append(("key", f"command digest: {command['digest']}"))
    rest = {
        k: v for k, v in command.items() if k not in {"argv", "cwd", "timeout_seconds", "digest"}
    }
    for key, value in sorted(rest.items()):
        _block(lines, key, value)


def _http(lines: list[Line], args: Mapping[str, Any]) -> None:
    lines.append(("head", f"{args.get('method', 'GET')} {args.get('url')}"))
    headers = args.get("headers")
    if isinstance(headers, Mapping):
        lines.append(("key", "headers:"))
        lines.extend(("body", f"  {k}: {v}") for k, v in sorted(headers.items()))
    rest = {k: v for k, v in args.items() if k not in {"method", "url", "headers"}}
    for key, value in sorted(rest.items()):
        _block(lines, key, value)


def _operation(lines: list[Line], op: Mapping[str, Any]) -> None:
    what = f"connector: {op.get('connector')}  operation: {op.get('operation')}"
    lines.append(("key", f"{what}  ({op.get('verb')})"))
    lines.append(("key", f"origin: {op.get('origin')}"))
    if "server" in op and "arguments" in op:  # an MCP connector's: one upstream tool call
        _mcp_operation(lines, op)
        return
    lines.append(("head", f"{op.get('method')} {op.get('url')}"))
    if op.get("query"):
        _block(lines, "query", op["query"])
    headers = op.get("headers")
    if isinstance(headers, Mapping):
        lines.append(("key", "headers:"))
        lines.extend(("body", f"  {k}: {v}") for k, v in sorted(headers.items()))
    if op.get("credential_name"):
        name = op["credential_name"]
        lines.append(("body", f"  Authorization: (credential {name}, added when sent; not shown)"))
    _block(lines, "body", op.get("json"))
    if "idempotency_key" in op:
        lines.append(("key", f"idempotency key: {op.get('idempotency_key')}"))
    if op.get("readback") is not None:
        _block(lines, "readback (how the write is checked)", op["readback"])
    known = {"name", "connector", "operation", "verb", "origin", "method", "url", "query"}
    known |= {"headers", "json", "idempotency_key", "readback", "credential_name"}
    if op.get("name") and op.get("name") != f"{op.get('connector')}/{op.get('operation')}":
        lines.append(("key", f"name: {op.get('name')}"))
    for key, value in sorted((k, v) for k, v in op.items() if k not in known):
        _block(lines, key, value)


def _mcp_operation(lines: list[Line], op: Mapping[str, Any]) -> None:
    lines.append(("head", f"call {op.get('tool')} on upstream MCP server {op.get('server')}"))
    lines.append(("body", "  (the server's own credential, if any, is added where it is reached)"))
    _block(lines, "arguments", op.get("arguments"))
    if "idempotency_key" in op:
        lines.append(("key", f"idempotency key: {op.get('idempotency_key')}"))
    if op.get("provider_key"):
        lines.append(("key", f"provider key: {op.get('provider_key')}"))
    if op.get("readback") is not None:
        _block(lines, "readback (how the write is checked)", op["readback"])
    known = {"name", "connector", "operation", "verb", "origin", "server", "tool", "arguments"}
    known |= {"idempotency_key", "provider_key", "readback"}
    for key, value in sorted((k, v) for k, v in op.items() if k not in known):
        _block(lines, key, value)


def _payload(lines: list[Line], payload: Mapping[str, Any]) -> None:
    for key, value in payload.items():
        if key == "files" and isinstance(value, list):
            _files(lines, value)
        elif key == "command" and isinstance(value, Mapping):
            _command(lines, value)
        elif key == "operation" and isinstance(value, Mapping):
            _operation(lines, value)
        elif key == "call" and isinstance(value, Mapping):
            args = value.get("args")
            lines.append(("key", f"call: {value.get('tool')}"))
            if value.get("tool") == "http.request" and isinstance(args, Mapping):
                _http(lines, args)
            else:
                _block(lines, "args", args)
            for other, item in sorted(value.items()):
                if other not in {"tool", "args"}:
                    _block(lines, other, item)
        else:
            _block(lines, key, value)


def request_lines(kind: str, view: Mapping[str, Any]) -> list[Line]:
    """The lines that show a request of ``kind`` (its sanitized ``view``) in full, each with
    its style (:data:`LINE_STYLES`); raw run data, to be painted through a medium's boundary."""
    lines: list[Line] = []
    if view.get("gate"):
        lines.append(("key", f"gate: {view['gate']}"))
    if view.get("tool"):
        lines.append(("key", f"tool: {view['tool']}"))
    if view.get("reason"):
        lines.append(("key", f"reason: {view['reason']}"))
    if view.get("approval_type"):
        lines.append(("key", f"approval type: {view['approval_type']}"))
    if isinstance(view.get("approvals"), int):
        so_far = [str(p) for p in view.get("approved_so_far") or []]
        said = f"needs {view['approvals']} different people to approve"
        lines.append(("warn", said + (f"; approved so far: {', '.join(so_far)}" if so_far else "")))
    if isinstance(view.get("expires_in"), int):
        then = "approved" if view.get("on_expiry") == "approve" else "declined"
        lines.append(("key", f"deadline: {view['expires_in']} s after it opened; then {then}"))
    for key in ("args_digest", "payload_digest"):
        if view.get(key):
            lines.append(("key", f"{key.replace('_', ' ')}: {view[key]}"))
    if view.get("redacted"):
        lines.append(("warn", "hidden secrets at " + ", ".join(map(str, view["redacted"]))))
    payload = view.get("payload")
    artifact = view.get("payload_artifact")
    if isinstance(artifact, Mapping):
        lines.append(
            ("key", f"payload artifact: {artifact.get('path')} ({artifact.get('digest')})")
        )
    if isinstance(payload, Mapping):
        _payload(lines, payload)
    elif artifact:
        lines.append(("warn", "the payload is in an artifact that no longer matches its digest"))
    for q in view.get("questions") or []:
        if not isinstance(q, Mapping):
            continue
        lines.append(("head", f"? {q.get('prompt')}  (id {q.get('id')})"))
        for n, option in enumerate(options_of(q), start=1):
            mark = "  (recommended)" if option["recommended"] else ""
            lines.append(("body", f"   {n}. {option['label']}{mark}"))
            if option["detail"]:
                lines.append(("ctx", f"      {option['detail']}"))
        if q.get("free_text"):
            lines.append(("body", "   (free text allowed)"))
    if kind == "retry" and view.get("question"):
        lines.append(("body", str(view["question"])))
    if kind == "retry" and view.get("call_id"):
        lines.append(("key", f"call: {view['call_id']}"))
    for key, value in sorted(view.items()):
        if key not in _VIEW_SHOWN and value not in (None, "", [], {}):
            _block(lines, key, value)
    return lines


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SUMMARY_MAX else line[: SUMMARY_MAX - 1] + "…"


def summary_of(kind: str, view: Mapping[str, Any]) -> str:
    """A one-line summary of a request: the files, the command, the HTTP request, the first
    question or the reason."""
    payload = view.get("payload") or {}
    if kind == "approval":
        tool = str(view.get("tool") or "ask")
        files = payload.get("files") or []
        if files:
            first = f"{tool} {files[0].get('op')} {files[0].get('path')}"
            more = f" (+{len(files) - 1} more)" if len(files) > 1 else ""
            return _one_line(first + more)
        command = payload.get("command")
        if isinstance(command, dict):
            argv = [str(a) for a in command.get("argv") or []]
            return _one_line(f"$ {shlex.join(argv)}  (in {command.get('cwd') or '.'})")
        op = payload.get("operation")
        if isinstance(op, dict):
            return _one_line(f"{tool} {op.get('method')} {op.get('url')}")
        call = payload.get("call")
        if isinstance(call, dict):
            args = call.get("args") or {}
            if call.get("tool") == "http.request" and isinstance(args, dict):
                return _one_line(f"{tool} {args.get('method', 'GET')} {args.get('url')}")
            return _one_line(f"{tool} {json.dumps(args, ensure_ascii=False, sort_keys=True)}")
        if view.get("payload_artifact"):
            return _one_line(f"{tool}: a large payload (shown in full on approval)")
        return _one_line(f"{tool}: {view.get('reason') or 'approve?'}")
    if kind == "question":
        questions = view.get("questions") or []
        if questions:
            more = f" (+{len(questions) - 1} more)" if len(questions) > 1 else ""
            return _one_line(str(questions[0].get("prompt")) + more)
    if kind == "retry":
        return _one_line(f"send {view.get('tool')} again? (call {view.get('call_id')})")
    if kind == "agent_turn":
        return _one_line(f"agent turn: {view.get('instructions') or view.get('step') or ''}")
    if kind == "wait" and isinstance(view.get("until"), int):
        ms = int(view["until"])
        moment = datetime.fromtimestamp(ms // 1000, UTC) + timedelta(milliseconds=ms % 1000)
        when = moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
        return _one_line(f"waits until {when}; a resume then settles it (no answer)")
    return _one_line(str(view.get("reason") or kind))

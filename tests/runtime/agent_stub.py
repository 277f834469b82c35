"""Stub model servers on loopback speaking the three provider wire formats.

A :class:`StubModel` is a real HTTP server on ``127.0.0.1`` that answers each request with the
next entry of a script. It records every request (path, headers, decoded JSON body) so tests can
prove what was (and was not) sent. The answers are built by :func:`answer` in the exact shapes
the providers document (and the official SDKs parse; see ``test_agent_sdk_shapes.py``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIALECTS = ("chat_completions", "openai_responses", "anthropic_messages")


@dataclass
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    hang: threading.Event | None = None


@dataclass
class Seen:
    """One request the stub received."""

    path: str
    headers: dict[str, str]
    body: Any


Script = list[Reply | Callable[[Seen], Reply]]


class StubModel:
    """A loopback model server answering from ``script`` (the last entry repeats)."""

    def __init__(self, script: Script) -> None:
        self.script = list(script)
        self.seen: list[Seen] = []
        self.received = threading.Event()
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
                seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with stub._lock:
                    stub.seen.append(seen)
                    index = min(len(stub.seen) - 1, len(stub.script) - 1)
                    entry = stub.script[index]
                stub.received.set()
                reply = entry(seen) if callable(entry) else entry
                if reply.hang is not None:
                    reply.hang.wait(10)
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        """The API base a config points at (``.../v1``)."""
        return self.base + "/v1"

    def __enter__(self) -> StubModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


_counter = iter(range(1, 1_000_000))


def _id(prefix: str) -> str:
    return f"{prefix}_{next(_counter):06d}"


def answer(dialect: str, *, text: str = "", calls: list[tuple[str, Any]] = ()) -> Reply:  # type: ignore[assignment]
    """A 200 answer in ``dialect``'s shape with ``text`` and tool ``calls`` (name, arguments).

    Arguments that are a ``str`` are sent as they are (to script malformed JSON arguments).
    """
    if dialect == "chat_completions":
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": _id("call"),
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for name, args in calls
            ]
        body: dict[str, Any] = {
            "id": _id("chatcmpl"),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "stub-model",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return Reply(body=body)
    if dialect == "openai_responses":
        output: list[dict[str, Any]] = []
        if text:
            output.append(
                {
                    "type": "message",
                    "id": _id("msg"),
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            )
        for name, args in calls:
            output.append(
                {
                    "type": "function_call",
                    "id": _id("fc"),
                    "call_id": _id("call"),
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                    "status": "completed",
                }
            )
        body = {
            "id": _id("resp"),
            "object": "response",
            "created_at": 1_700_000_000,
            "status": "completed",
            "model": "stub-model",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        return Reply(body=body)
    if dialect == "anthropic_messages":
        content: list[dict[str, Any]] = []
        if text:
            content.append({"type": "text", "text": text})
        for name, args in calls:
            content.append(
                {
                    "type": "tool_use",
                    "id": _id("toolu"),
                    "name": name,
                    "input": args,
                }
            )
        body = {
            "id": _id("msg"),
            "type": "message",
            "role": "assistant",
            "model": "stub-model",
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return Reply(body=body)
    raise ValueError(dialect)


def error(dialect: str, status: int, message: str, **headers: str) -> Reply:
    """An error answer in ``dialect``'s documented error shape."""
    if dialect == "anthropic_messages":
        kind = "rate_limit_error" if status == 429 else "api_error"
        body: Any = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    return Reply(status=status, body=body, headers=headers)


def tool_results(dialect: str, seen: Seen) -> list[dict[str, Any]]:
    """The tool results proctor sent back in ``seen`` (decoded), in order."""
    body = seen.body
    out: list[str] = []
    if dialect == "chat_completions":
        out = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
    elif dialect == "openai_responses":
        out = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    else:
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                out += [b["content"] for b in message["content"] if b["type"] == "tool_result"]
    return [json.loads(text) for text in out]


def offered_tools(dialect: str, seen: Seen) -> list[str]:
    """The tool names proctor offered in ``seen``."""
    tools = seen.body.get("tools") or []
    if dialect == "chat_completions":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


# -- a governed workspace, built the way the run driver builds one ------------------------------


@dataclass
class Governed:
    """A workspace with a Governor, as ``Session`` prepares one for a run."""

    root: Any
    session: Any
    governor: Any

    def call(self, spec: Any) -> Any:
        """The ``call`` a driver hands the agent loop."""
        return self.governor.call(spec)


def governed(root: Any, *, run_id: str = "run-agent", tools: Any = None) -> Governed:
    """Open ``root`` as a workspace and build the run's Governor (shipped policies)."""
    from proctor.runtime.admission.governor import Governor
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    (root / ".proctor").mkdir(parents=True, exist_ok=True)
    session = Session(Workspace(root), environ={"PROCTOR_HOME": str(root / "home")})
    policies, guards, _unguarded = session.policy()
    governor = Governor(
        run_id=run_id,
        workspace=session.workspace,
        store=session.store,
        tools=tools if tools is not None else session.tools,
        policies=policies,
        guards=guards,
        audit=session.audit,
        sanitizer=Sanitizer(),
        directive_id="agent-test",
    )
    from proctor.runtime.records.runs import RunRecord

    session.store.create_run(RunRecord(run_id=run_id, skill="agent-test", method="turn", data={}))
    return Governed(root, session, governor)


def config(stub: StubModel, dialect: str, **overrides: Any) -> Any:
    """An agent configuration pointing at ``stub``."""
    from proctor.runtime.home.config import agent_config

    section = {
        "provider": "stub",
        "model": "stub-model",
        "dialect": dialect,
        "endpoint_url": stub.url,
        **overrides,
    }
    return agent_config(section=section)

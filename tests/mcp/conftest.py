"""Shared pieces of the MCP tests: a temporary workspace, ``proctor mcp`` as a real process
(stdio or streamable HTTP on a free loopback port), and a recorder that validates every message
the server sends against the negotiated protocol version's JSON Schema from the ``mcp-schema``
corpus.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from tests.corpora import corpus_dir

REPO = Path(__file__).resolve().parents[2]
API_KEY = "test-key-0123456789abcdef"

# The result type of each request the tests send, by method.
RESULT_TYPES = {
    "initialize": "InitializeResult",
    "server/discover": "DiscoverResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "ping": "EmptyResult",
}


@dataclass
class Ws:
    """A temporary workspace with its own home."""

    root: Path
    home: Path
    env: dict[str, str]

    def add_example(self, name: str) -> Path:
        target = self.root / "skills" / name
        shutil.copytree(REPO / "examples" / name, target)
        return target

    def add_skill(self, name: str, run_yaml: str, description: str = "A test skill.") -> Path:
        folder = self.root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n", encoding="utf-8"
        )
        (folder / "run.yaml").write_text(run_yaml, encoding="utf-8")
        return folder

    def audit(self) -> list[dict[str, Any]]:
        path = self.root / ".proctor" / "audit.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def allow(self) -> tuple[str, str]:
        """Save an ``effects: allow`` preset for this workspace; the ``proctor mcp`` arguments
        that apply it (a served run otherwise takes the managed default, ``effects: ask``)."""
        proc = subprocess.run(
            [sys.executable, "-m", "proctor", "authority", "save", "allow", "-"],
            cwd=self.root, env=self.env, input='{"effects": "allow"}',
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return ("--authority", "allow")

    def proctor(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "proctor", *args],
            cwd=self.root,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def ws(tmp_path: Path) -> Ws:
    root = tmp_path / "work"
    (root / ".proctor").mkdir(parents=True)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    for keep in ("PROCTOR_CORPORA", "PROCTOR_REQUIRE_CORPORA"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    env["PROCTOR_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO / "src")
    return Ws(root, home, env)


def stdio_params(ws: Ws, *args: str, env: dict[str, str] | None = None) -> Any:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "proctor", "mcp", *args],
        cwd=str(ws.root),
        env={**ws.env, **(env or {})},
    )


@dataclass
class HttpServer:
    proc: subprocess.Popen[str]
    url: str


@pytest.fixture
def http_server(ws: Ws) -> Iterator[Any]:
    """Start ``proctor mcp --transport http --port 0`` with the given skill refs (one process
    unless ``workers`` says: ``None`` is the command's default, a later ``--workers`` in
    ``refs`` wins)."""
    started: list[subprocess.Popen[str]] = []

    def start(*refs: str, key: str = API_KEY, workers: str | None = "1") -> HttpServer:
        count = () if workers is None else ("--workers", workers)
        proc = ws.proctor(
            "mcp", *count, *refs, "--transport", "http", "--port", "0",
            env={"PROCTOR_MCP_API_KEY": key},
        )  # fmt: skip
        started.append(proc)
        assert proc.stderr is not None
        line = proc.stderr.readline()  # blocks until the server listens (or exits)
        match = re.search(r"serving (http://\S+)", line)
        if match is None:
            proc.kill()
            rest = proc.stderr.read()
            raise AssertionError(f"server did not start: {line}{rest}")
        return HttpServer(proc, match.group(1))

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _RecordingRead:
    def __init__(self, inner: Any, sink: list[dict[str, Any]]) -> None:
        self._inner = inner
        self._sink = sink

    def _record(self, item: Any) -> Any:
        message = getattr(item, "message", None)
        if message is not None:
            self._sink.append(message.model_dump(mode="json", by_alias=True, exclude_unset=True))
        return item

    async def receive(self) -> Any:
        return self._record(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _RecordingRead:
        return self

    async def __anext__(self) -> Any:
        return self._record(await self._inner.__anext__())

    async def __aenter__(self) -> _RecordingRead:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _RecordingWrite:
    def __init__(self, inner: Any, sink: dict[Any, str]) -> None:
        self._inner = inner
        self._sink = sink

    async def send(self, item: Any, /) -> None:
        message = item.message
        if (
            getattr(message, "method", None) is not None
            and getattr(message, "id", None) is not None
        ):
            self._sink[message.id] = message.method
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _RecordingWrite:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass
class Recorder:
    """A client transport that keeps every message the server sent, and the method of every
    request the client sent (to know which result type a response must have)."""

    inner: Any
    received: list[dict[str, Any]] = field(default_factory=list)
    methods: dict[Any, str] = field(default_factory=dict)

    async def __aenter__(self) -> Any:
        read, write = await self.inner.__aenter__()
        return _RecordingRead(read, self.received), _RecordingWrite(write, self.methods)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self.inner.__aexit__(exc_type, exc, tb)
        return result

    def validate(self, version: str) -> int:
        """Validate every received message against ``version``'s schema; return how many."""
        from jsonschema import Draft7Validator, Draft202012Validator

        path = corpus_dir("mcp-schema") / "schema" / version / "schema.json"
        schema = json.loads(path.read_text(encoding="utf-8"))
        defs_key = "$defs" if "$defs" in schema else "definitions"
        cls = Draft202012Validator if defs_key == "$defs" else Draft7Validator

        def check(value: Any, type_name: str) -> None:
            ref = {"$ref": f"#/{defs_key}/{type_name}", defs_key: schema[defs_key]}
            errors = sorted(cls(ref).iter_errors(value), key=lambda e: list(e.path))
            assert not errors, (
                f"{type_name} at {version} is invalid: {errors[0].message} at "
                f"{list(errors[0].absolute_path)}\n{json.dumps(value)[:2000]}"
            )

        assert self.received, "the server sent nothing"
        for message in self.received:
            check(message, "JSONRPCMessage")
            if "result" in message:
                method = self.methods.get(message["id"])
                type_name = RESULT_TYPES.get(method or "")
                assert type_name is not None, f"response to an unknown request: {message}"
                check(message["result"], type_name)
            elif "error" in message:
                check(message, "JSONRPCErrorResponse")
            elif "id" not in message:
                check(message, "ServerNotification")
        return len(self.received)


@asynccontextmanager
async def http_transport(url: str, key: str = API_KEY) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP client transport, sending ``Authorization: Bearer key``."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {key}"}
    async with (
        create_mcp_http_client(headers=headers) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


def recorder_for(server: Any) -> Recorder:
    """A recording transport to a stdio parameters object or an HTTP URL (with the key)."""
    if isinstance(server, str):
        return Recorder(http_transport(server))
    from mcp.client.stdio import stdio_client

    return Recorder(stdio_client(server))

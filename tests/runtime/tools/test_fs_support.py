"""Helpers for the fs tool tests: a workspace with a run store, a call that mimics admission's
containment, and a tree snapshot (bytes, symlink targets and mtimes) to prove "nothing changed"."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest

from proctor.errors import RefusedCall
from proctor.receipts.canonical import digest_bytes
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.registry import native_tools

Snapshot = dict[str, tuple[str, bytes, int]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under ``root`` except the run store's own files and the write locks (an
    empty lock file a refused change took is no change of the workspace): kind, bytes, mtime.
    ``.proctor`` itself is kept without its mtime, which a new lock file moves; every entry in
    it is still compared."""
    out: Snapshot = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if rel.startswith(".proctor/runs.sqlite") or rel.split("/")[:2] == [
                ".proctor",
                "locks",
            ]:
                continue
            info = path.lstat()
            if rel == ".proctor":
                out[rel] = ("dir", b"", 0)
                continue
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path).encode(), info.st_mtime_ns)
            elif path.is_dir():
                out[rel] = ("dir", b"", info.st_mtime_ns)
            else:
                out[rel] = ("file", path.read_bytes(), info.st_mtime_ns)
    return out


def call(ctx: ToolContext, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Run a native tool the way admission does: schema, containment of every path, handler."""
    tool = native_tools()[name]
    try:
        fastjsonschema.compile(tool.schema)(args)
    except fastjsonschema.JsonSchemaValueException as exc:
        raise RefusedCall(f"{name}: {exc.message}", code="schema_invalid") from exc
    for path, access in tool.paths(args):
        ctx.workspace.resolve(path, access)
    result = tool.handler(ctx, args)
    if tool.output_schema is not None:
        fastjsonschema.compile(tool.output_schema)(result)
    return result


@dataclass
class Env:
    root: Path
    ws: Workspace
    ctx: ToolContext
    store: SQLiteRunStore

    def write(self, rel: str, data: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        path.write_bytes(data)
        return path

    def digest(self, rel: str) -> str:
        return digest_bytes((self.root / rel).read_bytes())

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return call(self.ctx, name, args)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".proctor").mkdir()
    ws = Workspace(root)
    store = SQLiteRunStore(root / ".proctor" / "runs.sqlite")
    ctx = ToolContext(workspace=ws, store=store, run_id="run-test", call_id="call-1")
    try:
        yield Env(root, ws, ctx, store)
    finally:
        store.close()


def test_snapshot_sees_a_change_of_bytes_and_of_mtime(env: Env) -> None:
    env.write("a.txt", "one")
    before = snapshot(env.root)
    os.utime(env.root / "a.txt", ns=(1, 1))
    assert snapshot(env.root) != before

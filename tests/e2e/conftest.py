"""Whole-CLI journeys: the real ``proctor`` command in a subprocess, in a temporary workspace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class Ws:
    """A temporary workspace with its own home, and a way to run proctor in it."""

    root: Path
    home: Path
    env: dict[str, str]

    def proctor(
        self,
        *args: str,
        stdin: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "proctor", *args],
            cwd=cwd or self.root,
            env={**self.env, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def add_example(self, name: str) -> Path:
        target = self.root / "skills" / name
        shutil.copytree(REPO / "examples" / name, target)
        return target

    def snapshot(self) -> dict[str, bytes]:
        """Every file of the workspace outside .proctor, with its bytes."""
        out = {}
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root).as_posix()
            if rel.startswith(".proctor") or not path.is_file():
                continue
            out[rel] = path.read_bytes()
        return out

    def state_bytes(self) -> bytes:
        """Everything proctor stored: run store (with WAL), audit log and receipts."""
        blobs = []
        for path in sorted((self.root / ".proctor").rglob("*")):
            if path.is_file():
                blobs.append(path.read_bytes())
        return b"\n".join(blobs)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Ws]:
    root = tmp_path / "work"
    (root / ".proctor").mkdir(parents=True)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    for keep in ("PROCTOR_CORPORA", "PROCTOR_REQUIRE_CORPORA", "PROCTOR_REQUIRE_NETWORK_FETCH"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    env["PROCTOR_HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO / "src")
    yield Ws(root, home, env)

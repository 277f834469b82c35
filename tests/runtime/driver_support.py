"""Shared set-up for the driver, resume and crash tests: a workspace with a test skill."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.core.authority import Authority, parse_authority
from proctor.receipts.signing import signer_from_seed
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session

SKILL_MD = """---
name: {name}
description: A skill for driver tests.
---
Work carefully.
"""

ONE_ECHO = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: s0
        tool: echo
        inputs: {text: hello}
"""
"""A run.yaml of one ``echo`` step (the one-step run of the benches)."""

COUNTER_SCRIPT = """import sys, pathlib
p = pathlib.Path(sys.argv[1])
n = int(p.read_text()) if p.exists() else 0
p.write_text(str(n + 1))
print("ran", n + 1)
"""


BLOCK_ECHO = """id: team
rules:
  - id: team.reasons
    description: Every echo states why it is made.
    guard: check_reason_not_empty
    enforcement: block
    on_error: fail_closed
    tools: [echo]
"""
"""A team policy blocking an ``echo`` that states no reason (a policy a test adds between two
runs or calls, to show the next one governed by it)."""


def make_skill(root: Path, name: str, run_yaml: str) -> Path:
    """Write a skill package under ``root/skills/name``."""
    folder = root / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name))
    (folder / "run.yaml").write_text(run_yaml)
    return folder


def make_workspace(root: Path) -> Path:
    """A workspace folder with ``.proctor/`` and the counter script."""
    (root / ".proctor").mkdir(parents=True, exist_ok=True)
    (root / "tools").mkdir(exist_ok=True)
    (root / "tools" / "count.py").write_text(COUNTER_SCRIPT)
    return root


_OPEN: list[Session] = []


@pytest.fixture(autouse=True)
def close_sessions() -> Iterator[None]:
    """Close every session a test opened (import this fixture into the test module)."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def session(
    root: Path,
    *,
    environ: Mapping[str, str] | None = None,
    trust_guards: bool = False,
    **kwargs: Any,
) -> Session:
    """A session with a fixed key and a ticking clock, closed after the test; its environment
    ``environ``, or a proctor home of its own (``root/.home``) when none is given.
    ``trust_guards``: the workspace's guard modules are trusted (``PROCTOR_TRUST_WORKSPACE=1``,
    as CI sets it): a test that writes guard modules says so."""
    ticks = itertools.count()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    env = {"PROCTOR_HOME": str(root / ".home")} if environ is None else dict(environ)
    if trust_guards:
        env["PROCTOR_TRUST_WORKSPACE"] = "1"
    opened = Session(
        Workspace(root),
        environ=env,
        clock=kwargs.pop("clock", None) or (lambda: start + timedelta(milliseconds=next(ticks))),
        signer=signer_from_seed(bytes(range(32))),
        **kwargs,
    )
    _OPEN.append(opened)
    return opened


class Clock:
    """A clock a test moves by hand (``session(root, clock=Clock(start))``)."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def authority(**doc: Any) -> Authority:
    """An authority as a host states it."""
    return parse_authority(doc)


def approve(envelope: Any, approved: bool = True, **extra: Any) -> dict[str, Any]:
    """The envelope's answers template with every approval decided."""
    doc = json.loads(json.dumps(envelope.answers_template))
    for entry in doc.get("approvals", {}).values():
        if "approved" in entry:
            entry["approved"] = approved
            entry["reason"] = "checked"
        entry.update(extra)
    return doc


def store_bytes(root: Path) -> bytes:
    """Every byte of the run store (WAL folded in), to prove nothing changed."""
    import sqlite3

    path = root / ".proctor" / "runs.sqlite"
    conn = sqlite3.connect(str(path))
    try:
        return "\n".join(conn.iterdump()).encode()
    finally:
        conn.close()


def age_past_racy_window() -> None:
    """Let every file written so far age past the racily-clean window, so a session takes what
    it kept on the files' stamps alone (an entry made within the window is taken only after
    its files' digest is checked again)."""
    import time

    from proctor.runtime.skill_files import RACY_NS

    time.sleep(RACY_NS / 1e9 + 0.2)


def edit_keeping_size_and_mtime(path: Path, text: str) -> None:
    """Write ``text`` (the file's length) to ``path`` and put its modification time back: only
    its change time tells it was edited."""
    import os

    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

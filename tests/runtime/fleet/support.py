"""A workspace many real ``proctor worker`` processes share, on one fresh PostgreSQL schema.

The skill asks one approval, then runs a command that appends its run's line to
``lines.txt`` (so a repeated effect shows as a repeated line), then echoes. Workers and the
test client are real processes of the venv's Python; the client answers approvals by
submitting resume documents (``proctor resume RUN_ID - --submit``) or through the queue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.pg import fresh_schema

SKILL_MD = """---
name: appender
description: An approval, then a command that appends one line per run.
---
Nothing for an agent here.
"""

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties:
        line: {type: string}
      required: [line]
    steps:
      - id: confirm
        ask: {reason: Append the line?}
      - id: append
        tool: command.execute
        inputs: {argv: [PYTHON, tools/append.py, lines.txt, $input.line]}
      - id: finish
        tool: echo
        inputs: {text: $input.line}
    result_from: [finish]
"""

APPEND = """import sys, time
with open(sys.argv[1], "a") as handle:
    handle.write(sys.argv[2] + "\\n")
"""


SLOW_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: slow
        tool: command.execute
        inputs: {argv: [PYTHON, tools/slow.py, lines.txt, slow]}
      - id: finish
        tool: echo
        inputs: {text: done}
"""

SLOW = """import sys, time, pathlib
pathlib.Path(sys.argv[1] + ".started").write_text("started")
time.sleep(3)
with open(sys.argv[1], "a") as handle:
    handle.write(sys.argv[2] + "\\n")
"""


def make_workspace(root: Path) -> None:
    """The shared workspace: the skills, their commands and a state folder."""
    (root / ".proctor").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "tools" / "append.py").write_text(APPEND)
    skill = root / "skills" / "appender"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "run.yaml").write_text(RUN_YAML.replace("PYTHON", json.dumps(sys.executable)))
    (root / "tools" / "slow.py").write_text(SLOW)
    slow = root / "skills" / "slow"
    slow.mkdir(parents=True)
    (slow / "SKILL.md").write_text(SKILL_MD.replace("appender", "slow"))
    (slow / "run.yaml").write_text(SLOW_YAML.replace("PYTHON", json.dumps(sys.executable)))


@contextmanager
def shared_workspace(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], str]]:
    """A fresh schema and the workspace at ``tmp_path/ws`` on it: ``(root, environ, url)``."""
    with fresh_schema() as url:
        root = tmp_path / "ws"
        root.mkdir()
        make_workspace(root)
        yield root, environ(root, url), url


def run_status(store: Any, run_id: str) -> str | None:
    """The status of ``run_id`` (``None`` while it has not started)."""
    run = store.get_run(run_id)
    return None if run is None else str(run.status)


def environ(root: Path, url: str) -> dict[str, str]:
    """What every worker and client process of the workspace gets."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    return base | {
        "PROCTOR_HOME": str(root / ".home"),
        "PROCTOR_DATABASE_URL": url,
        "PROCTOR_LEASE_TTL": "4",
    }


def proctor(
    root: Path, env: dict[str, str], args: list[str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """One CLI command in the workspace."""
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=root,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def start_worker(
    root: Path, env: dict[str, str], concurrency: int = 1, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """A ``proctor worker`` process (its stderr appended to ``log`` when given)."""
    sink = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "proctor", "worker", "--concurrency", str(concurrency)],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    finally:
        if log is not None:
            sink.close()  # type: ignore[union-attr]


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``check`` until it returns something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def approval_document(store: Any, run_id: str) -> dict[str, Any] | None:
    """An approval of every open request of ``run_id`` (``None`` when none is open)."""
    open_requests = [r for r in store.requests(run_id) if r.state == "open"]
    if not open_requests:
        return None
    return {
        "approvals": {
            r.address: {"request_digest": r.request_digest, "approved": True, "reason": "test"}
            for r in open_requests
        }
    }

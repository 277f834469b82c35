"""Shared set-up for the runner's tests: skill packages with tests, in a workspace of their own."""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from proctor.testing.runner import CaseResult, collect, run_case

SKILL_MD = """---
name: {name}
description: A skill for the runner's tests.
---
Do the task.
"""

FETCH = """
minimum_proctor: 0.1.0
credentials:
  svc:
    provider: svc
    audience: {audience}
    auth:
      api_key: {{delivery: {{env: SVC_TOKEN}}}}
methods:
  fetch:
    description: Fetch one URL.
    inputs:
      type: object
      properties: {{url: {{type: string}}}}
      required: [url]
    steps:
      - id: get
        tool: http.request
        credential: svc
        inputs: {{method: GET, url: $input.url}}
"""

PLAIN_FETCH = """
minimum_proctor: 0.1.0
methods:
  fetch:
    description: Fetch one URL, no credential.
    inputs:
      type: object
      properties: {url: {type: string}}
      required: [url]
    steps:
      - id: get
        tool: http.request
        inputs: {method: GET, url: $input.url}
"""

ECHO = """
minimum_proctor: 0.1.0
methods:
  say:
    description: Echo, then write a file.
    inputs:
      type: object
      properties: {text: {type: string}, path: {type: string, default: out.txt}}
      required: [text]
    steps:
      - id: echo
        tool: echo
        inputs: {text: $input.text}
      - id: write
        tool: fs.write
        reason: Keep the text.
        inputs: {path: $input.path, content: $input.text, create: true}
"""

AGENT = """
minimum_proctor: 0.1.0
methods:
  draft:
    description: An agent turn, then a person's approval.
    steps:
      - id: think
        agent:
          instructions: Answer.
          calls: {tools: [echo, fs.write]}
          output:
            type: object
            properties: {answer: {type: string}}
            required: [answer]
      - id: confirm
        ask: {reason: Keep it?}
"""


def workspace(root: Path) -> Path:
    """A workspace folder (``.proctor/`` marks it)."""
    (root / ".proctor").mkdir(parents=True, exist_ok=True)
    return root


def package(
    root: Path,
    name: str,
    run_yaml: str,
    tests: dict[str, str],
    fixtures: dict[str, str] | None = None,
) -> Path:
    """Write ``root/skills/<name>`` with its run.yaml, tests and fixtures."""
    folder = root / "skills" / name
    (folder / "tests").mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name))
    (folder / "run.yaml").write_text(textwrap.dedent(run_yaml).lstrip())
    for test_name, text in tests.items():
        (folder / "tests" / f"{test_name}.yaml").write_text(textwrap.dedent(text).lstrip())
    for rel, text in (fixtures or {}).items():
        path = folder / "fixtures" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def run_one(folder: Path, name: str, *, keep: bool = False) -> CaseResult:
    """Run the test ``name`` of the package at ``folder``."""
    (case,) = collect(folder / "tests" / f"{name}.yaml")
    return run_case(case, keep=keep)


def checks(result: CaseResult) -> list[str]:
    """The names of the checks that failed."""
    return [f.check for f in result.failures]


@contextmanager
def counting_listener() -> Iterator[tuple[int, socket.socket]]:
    """A loopback TCP listener nobody accepts on: every connection made to it waits in its
    backlog, where :func:`connections` counts it, so no thread or sleep is needed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1], sock
    finally:
        sock.close()


def connections(sock: socket.socket) -> int:
    """How many connections reached ``sock`` (each is accepted and closed here)."""
    sock.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1

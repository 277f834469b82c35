"""``providers.mcp``: a test answers upstream MCP calls matched on tool and arguments; an
unmatched call is refused and no upstream server is ever started (its command here would leave
a mark if it ran)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.runtime.gateway.pins import Pins
from tests.testing.support import package, run_one, workspace

RUN_YAML = """
minimum_proctor: 0.1.0
methods:
  look:
    description: Look a key up upstream.
    inputs:
      type: object
      properties: {key: {type: string}}
      required: [key]
    steps:
      - id: get
        tool: mcp:kv/lookup
        inputs: {key: $input.key}
"""

MATCHED = """
method: look
inputs: {key: a}
providers:
  mcp:
    - tool: kv/lookup
      arguments: {key: a}
      result: {content: [{type: text, text: value-of-a}]}
expect:
  status: sealed
  outcome: completed
  output: {subset: {content: [{type: text, text: value-of-a}]}}
"""

UNMATCHED = """
method: look
inputs: {key: b}
providers:
  mcp:
    - tool: kv/lookup
      arguments: {key: a}
      result: {content: [{type: text, text: value-of-a}]}
expect:
  status: sealed
  outcome: blocked
  steps: {get: blocked}
"""

DUPLICATE = """
method: look
inputs: {key: a}
providers:
  mcp:
    - {tool: kv/lookup, arguments: {key: a}}
    - {tool: kv/lookup, arguments: {key: a}}
expect: {status: sealed}
"""


def _workspace(tmp_path: Path) -> Path:
    root = workspace(tmp_path / "ws")
    mark = tmp_path / "started"
    # the server would create the mark file if it were ever started
    server = {"command": "/bin/sh", "args": ["-c", f"touch {mark}"]}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"kv": server}}))
    definition = {
        "name": "lookup",
        "description": "Look up a key.",
        "inputSchema": {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
        "annotations": {"readOnlyHint": True},
    }
    Pins(root).pin("kv", {"lookup": definition})
    return root


@pytest.mark.parametrize(("name", "text"), [("matched", MATCHED), ("unmatched", UNMATCHED)])
def test_upstream_calls_are_answered_by_the_test_alone(
    tmp_path: Path, name: str, text: str
) -> None:
    root = _workspace(tmp_path)
    folder = package(root, "kv", RUN_YAML, {name: text})
    result = run_one(folder, name)
    assert result.status == "passed", (result.failures, result.error)
    assert not (tmp_path / "started").exists()


def test_an_unmatched_call_is_refused_with_its_code(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    folder = package(root, "kv", RUN_YAML, {"unmatched": UNMATCHED})
    result = run_one(folder, "unmatched", keep=True)
    assert result.workspace is not None
    audit = (result.workspace / ".proctor" / "audit.jsonl").read_text()
    assert '"mcp_fixture_unmatched"' in audit
    assert not (tmp_path / "started").exists()


def test_two_entries_for_one_call_are_refused(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    folder = package(root, "kv", RUN_YAML, {"duplicate": DUPLICATE})
    result = run_one(folder, "duplicate")
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "test_exchange_invalid"

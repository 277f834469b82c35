"""``providers.mcp`` stands in for an MCP connector's server too: an operation's upstream call is
answered by the test alone (matched on the server's tool and the exact arguments the template
built), its admission real (the approval it waits on, the idempotency key), and no server is
ever started (its command here would leave a mark if it ran)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.runtime.gateway.pins import Pins
from tests.testing.support import package, run_one, workspace

RUN_YAML = """
minimum_proctor: 0.1.0
methods:
  main:
    description: Look a key up, then record it.
    inputs:
      type: object
      properties: {key: {type: string}}
      required: [key]
    steps:
      - id: get
        operation: kv/key.read
        inputs: {key: $input.key}
      - id: put
        operation: kv/key.record
        idempotency_key: $input.key
        inputs: {key: $input.key}
    result_from: [get, put]
"""

CONNECTOR = """name: kv
mcp: kv
operations:
  key.read:
    verb: read
    mcp: {tool: lookup, arguments: {key: $input.key}}
    inputs: {type: object, properties: {key: {type: string}}, required: [key]}
    result: {value: /content/0/text}
  key.record:
    verb: write
    approval: required
    mcp: {tool: record, arguments: {note: $input.key}}
    inputs: {type: object, properties: {key: {type: string}}, required: [key]}
"""

APPROVED = """
method: main
inputs: {key: a}
host:
  approvals: {put: true}
providers:
  mcp:
    - tool: kv/lookup
      arguments: {key: a}
      result: {content: [{type: text, text: value-of-a}]}
    - tool: kv/record
      arguments: {note: a}
      result: {content: [{type: text, text: recorded}]}
expect:
  status: sealed
  outcome: completed
  output: {subset: {get: {result: {value: value-of-a}}}}
"""

UNMATCHED = """
method: main
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


def _workspace(tmp_path: Path) -> Path:
    root = workspace(tmp_path / "ws")
    mark = tmp_path / "started"
    server = {"command": "/bin/sh", "args": ["-c", f"touch {mark}"]}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"kv": server}}))
    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    note = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
    Pins(root).pin(
        "kv",
        {
            "lookup": {
                "name": "lookup",
                "description": "Look up a key.",
                "inputSchema": schema,
                "annotations": {"readOnlyHint": True},
            },
            "record": {"name": "record", "description": "Record a note.", "inputSchema": note},
        },
    )
    return root


@pytest.mark.parametrize(("name", "text"), [("approved", APPROVED), ("unmatched", UNMATCHED)])
def test_an_operations_upstream_call_is_answered_by_the_test_alone(
    tmp_path: Path, name: str, text: str
) -> None:
    root = _workspace(tmp_path)
    folder = package(root, "kv", RUN_YAML, {name: text})
    (folder / "connectors" / "kv").mkdir(parents=True)
    (folder / "connectors" / "kv" / "connector.yaml").write_text(CONNECTOR)
    result = run_one(folder, name)
    assert result.status == "passed", (result.failures, result.error)
    assert not (tmp_path / "started").exists()

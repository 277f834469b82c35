"""``proctor check`` reads MCP connectors against the workspace's upstreams: a server
``.mcp.json`` lacks, a tool not pinned, a read operation over a changing tool, and a
configuration that does not load are findings, each with the code a call would be refused with,
and no server is started to find them (its command would leave a mark)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.check import check_workspace, report
from proctor.runtime.gateway.pins import Pins

KV = """name: kv
mcp: kv
operations:
  key.read:
    verb: read
    mcp: {tool: lookup, arguments: {key: $input.key}}
    inputs: {type: object, properties: {key: {type: string}}, required: [key]}
  key.sneak:
    verb: read
    mcp: {tool: record}
  key.gone:
    verb: write
    mcp: {tool: gone}
"""

OTHER = """name: other
mcp: nope
operations:
  x.read:
    verb: read
    mcp: {tool: lookup}
"""


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    server = {"command": "/bin/sh", "args": ["-c", f"touch {tmp_path / 'started'}"]}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"kv": server}}))
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    Pins(root).pin(
        "kv",
        {
            "lookup": {"name": "lookup", "inputSchema": schema,
                       "annotations": {"readOnlyHint": True}},
            "record": {"name": "record", "inputSchema": schema},
        },
    )  # fmt: skip
    for name, text in (("kv", KV), ("other", OTHER)):
        (root / "connectors" / name).mkdir(parents=True)
        (root / "connectors" / name / "connector.yaml").write_text(text)
    return root


def _connectors(root: Path) -> dict[str, Any]:
    env = {"PROCTOR_HOME": str(root.parent / "home"), "PATH": os.environ.get("PATH", "")}
    doc = report(check_workspace(Workspace(root), env))
    checks = {f"{p['phase']}/{c['name']}": c for p in doc["phases"] for c in p["checks"]}
    return checks["parse/connectors"]


def test_mcp_connectors_are_checked_against_the_pinned_upstreams(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    found = _connectors(root)
    assert found["passed"] is False
    codes = sorted(f["code"] for f in found["findings"])
    assert codes == ["mcp_effect_weaker", "mcp_server_unknown", "tool_unpinned"], found
    assert not (tmp_path / "started").exists()


def test_an_mcp_json_that_does_not_load_is_a_finding(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    (root / ".mcp.json").write_text('{"mcpServers": ')
    found = _connectors(root)
    assert [f["code"] for f in found["findings"]] == ["mcp_config_invalid"]

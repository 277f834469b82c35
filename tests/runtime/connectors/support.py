"""A workspace with a skill whose connector sends to the loopback tracker."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.driver_support import make_skill, make_workspace

CANARY = "canary-tracker-token-7f3a9c1e5b"

CONNECTOR = """name: tracker
description: A small issue tracker.
base_url: {url}
credential: tracker
operations:
  issue.read:
    verb: read
    request: {{method: GET, path: "/api/issues/{{issue}}"}}
    inputs: {{type: object, properties: {{issue: {{type: string}}}}, required: [issue]}}
  issue.label:
    verb: write
    request: {{method: POST, path: "/api/issues/{{issue}}/labels", json: {{label: $input.label}}}}
    inputs:
      type: object
      properties: {{issue: {{type: string}}, label: {{type: string}}}}
      required: [issue, label]
    readback:
      operation: issue.read
      inputs: {{issue: $input.issue}}
      match: {{/label: $input.label}}
    cost: {{usd_micro: 250, per: call}}
  issue.comment:
    verb: write
    approval: required
    request: {{method: POST, path: "/api/issues/{{issue}}/comments", json: {{body: $input.body}}}}
    inputs:
      type: object
      properties: {{issue: {{type: string}}, body: {{type: string}}}}
      required: [issue, body]
  hop:
    verb: read
    request: {{method: GET, path: /redirect}}
"""

RUN_YAML = """minimum_proctor: 0.1.0
credentials:
  tracker:
    provider: tracker
    auth:
      api_key: {{delivery: {{env: TRACKER_TOKEN}}}}
methods:
  main:
    inputs:
      type: object
      properties: {{issue: {{type: string}}, label: {{type: string}}}}
      required: [issue, label]
    steps:
{steps}
"""

READ = """      - id: read
        operation: tracker/issue.read
        inputs: {issue: $input.issue}
"""
LABEL = """      - id: label
        operation: tracker/issue.label
        idempotency_key: $input.issue
        inputs: {issue: $input.issue, label: $input.label}
"""
LABEL_NO_KEY = """      - id: label
        operation: tracker/issue.label
        inputs: {issue: $input.issue, label: $input.label}
"""
COMMENT = """      - id: comment
        operation: tracker/issue.comment
        idempotency_key: $input.issue
        inputs: {issue: $input.issue, body: $input.label}
"""
HOP = """      - id: hop
        operation: tracker/hop
"""


def tracker_workspace(root: Path, url: str, *steps: str) -> Path:
    """A workspace allowing loopback egress, with ``skills/triage`` and its connector."""
    ws = make_workspace(root)
    (ws / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    folder = make_skill(ws, "triage", RUN_YAML.format(steps="".join(steps)))
    (folder / "connectors" / "tracker").mkdir(parents=True)
    (folder / "connectors" / "tracker" / "connector.yaml").write_text(CONNECTOR.format(url=url))
    return ws

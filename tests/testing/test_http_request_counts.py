"""``expect.http_request_counts`` as the runx reference writes it: the requests each declared
exchange answered, in declaration order, repeats included (a request declared twice is answered
by those exchanges in order, the last answering every later repeat)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testing.support import checks, package, run_one, workspace

RUN_YAML = """
minimum_proctor: 0.1.0
methods:
  sync:
    description: Read a resource, change it, read it back twice, then read another.
    steps:
      - id: read
        tool: http.request
        inputs: {method: GET, url: "https://svc.example.com/item"}
      - id: change
        tool: http.request
        inputs: {method: POST, url: "https://svc.example.com/item", json: {state: done}}
      - id: reread
        tool: http.request
        inputs: {method: GET, url: "https://svc.example.com/item"}
      - id: again
        tool: http.request
        inputs: {method: GET, url: "https://svc.example.com/item"}
      - id: other
        tool: http.request
        inputs: {method: GET, url: "https://svc.example.com/other"}
"""

TEST = """
providers:
  http:
    - request: {{method: GET, url: "https://svc.example.com/item", body: none}}
      response: {{status: 200, body: open}}
    - request:
        {{method: POST, url: "https://svc.example.com/item", body: {{json: {{state: done}}}}}}
      response: {{status: 200, body: ok}}
    - request: {{method: GET, url: "https://svc.example.com/item", body: none}}
      response: {{status: 200, body: done}}
    - request: {{method: GET, url: "https://svc.example.com/other", body: none}}
      response: {{status: 200, body: other}}
expect:
  status: sealed
  outcome: completed
  step_outputs:
    read: {{subset: {{body: open}}}}
    reread: {{subset: {{body: done}}}}
    again: {{subset: {{body: done}}}}
  http_request_counts: {counts}
"""


@pytest.mark.parametrize(
    ("counts", "failed"),
    [
        ("[1, 1, 2, 1]", []),
        ("[1, 1, 1, 1]", ["http_request_counts"]),
        ("[1, 1, 2]", ["http_request_counts"]),
    ],
)
def test_counts_follow_declaration_order_with_repeats(
    tmp_path: Path, counts: str, failed: list[str]
) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "syncer", RUN_YAML, {"t": TEST.format(counts=counts)})
    assert checks(run_one(folder, "t")) == failed

"""Each expectation kind passes when the run did what it says, and fails, for that reason
alone, when it did not."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.testing.support import AGENT, ECHO, FETCH, checks, package, run_one, workspace

ECHO_TEST = """
method: say
inputs: {{text: hi}}
expect:
  status: sealed
{expect}
"""

AGENT_TEST = """
method: draft
host:
  answers: {{think: {{answer: yes}}}}
expect:
{expect}
"""

FETCH_TEST = """
method: fetch
inputs: {{url: "https://svc.example.com/a"}}
setup:
  credentials: {{svc: fixture-svc-token-123456}}
providers:
  http:
    - request: {{method: GET, url: "https://svc.example.com/a"}}
      response: {{status: 200, body: fine}}
expect:
  status: sealed
{expect}
"""

DIGEST_HI = "sha256:" + hashlib.sha256(b"hi").hexdigest()

# (kind, which package, expect lines that hold, expect lines that do not, the failed check)
CASES = [
    ("status", "echo", "", None, None),
    ("outcome", "echo", "  outcome: completed", "  outcome: failed", "outcome"),
    (
        "subset",
        "fetch",
        "  output: {subset: {status: 200, body: fine}}",
        "  output: {subset: {status: 200, body: other}}",
        "output",
    ),
    (
        "absent",
        "fetch",
        "  absent: [/headers/authorization, /nothing]",
        "  absent: [/body]",
        "absent",
    ),
    (
        "steps",
        "echo",
        "  steps: {echo: completed, write: completed}",
        "  steps: {echo: completed, write: {outcome: blocked}}",
        "steps",
    ),
    (
        "step_code",
        "echo",
        "  steps: {write: {outcome: completed}}",
        "  steps: {write: {code: file_exists}}",
        "steps",
    ),
    (
        "not_run",
        "agent_paused",
        "  steps: {think: completed, confirm: not_run}",
        "  steps: {confirm: completed}",
        "steps",
    ),
    (
        "requests",
        "agent_paused",
        "  requests: [{address: confirm, kind: approval, gate: ask}]",
        "  requests: [{address: think}]",
        "requests",
    ),
    (
        "requests_count",
        "agent_paused",
        "  requests: [{kind: approval}]",
        "  requests: [{kind: approval}, {kind: approval}]",
        "requests",
    ),
    (
        "http_request_counts",
        "fetch",
        "  http_request_counts: [1]",
        "  http_request_counts: [2]",
        "http_request_counts",
    ),
    (
        "files_content",
        "echo",
        "  files: {out.txt: {content: hi}}",
        "  files: {out.txt: {content: ho}}",
        "files",
    ),
    (
        "files_digest",
        "echo",
        f"  files: {{out.txt: {{digest: '{DIGEST_HI}'}}}}",
        "  files: {out.txt: {digest: 'sha256:" + "0" * 64 + "'}}",
        "files",
    ),
    (
        "files_absent",
        "echo",
        "  files: {other.txt: {exists: false}}",
        "  files: {out.txt: {exists: false}}",
        "files",
    ),
    (
        "audit",
        "echo",
        "  audit: [run_started, {event: run_sealed, outcome: completed}]",
        "  audit: [{event: run_sealed, outcome: failed}]",
        "audit",
    ),
    ("receipt", "echo", "  receipt: verified", None, None),
    (
        "step_outputs",
        "echo",
        "  step_outputs: {echo: {exact: {text: hi}}}",
        "  step_outputs: {echo: {subset: {text: ho}}}",
        "step_outputs",
    ),
    (
        "step_outputs_not_run",
        "agent_paused",
        "  step_outputs: {think: {subset: {answer: yes}}}",
        "  step_outputs: {confirm: {subset: {}}}",
        "step_outputs",
    ),
    (
        "receipt_fields",
        "echo",
        "  receipt: {schema: runx.receipt.v1, child_receipt_count: 2, outcome: completed}",
        "  receipt: {schema: proctor.receipt.v1, child_receipt_count: 3}",
        "receipt",
    ),
    ("receipt_missing", "agent_paused", "", "  receipt: verified", "receipt"),
]


def _write(tmp_path: Path, pkg: str, expect: str) -> Path:
    root = workspace(tmp_path / "ws")
    if pkg == "echo":
        return package(root, "echoer", ECHO, {"t": ECHO_TEST.format(expect=expect)})
    if pkg == "fetch":
        run_yaml = FETCH.format(audience="https://svc.example.com")
        return package(root, "fetcher", run_yaml, {"t": FETCH_TEST.format(expect=expect)})
    body = "  status: needs_approval\n" + expect
    return package(root, "drafter", AGENT, {"t": AGENT_TEST.format(expect=body)})


@pytest.mark.parametrize(
    ("kind", "pkg", "holds", "fails", "check"), CASES, ids=[c[0] for c in CASES]
)
def test_expectation_holds(
    tmp_path: Path, kind: str, pkg: str, holds: str, fails: str | None, check: str | None
) -> None:
    result = run_one(_write(tmp_path, pkg, holds), "t")
    assert result.status == "passed", [f.to_json() for f in result.failures] or result.error


@pytest.mark.parametrize(
    ("kind", "pkg", "holds", "fails", "check"),
    [c for c in CASES if c[3] is not None],
    ids=[c[0] for c in CASES if c[3]],
)
def test_expectation_fails_for_its_reason(
    tmp_path: Path, kind: str, pkg: str, holds: str, fails: str, check: str
) -> None:
    result = run_one(_write(tmp_path, pkg, fails), "t")
    assert result.status == "failed", result.error
    assert set(checks(result)) == {check}, [f.to_json() for f in result.failures]


def test_exact_output(tmp_path: Path) -> None:
    fetched = {
        "status": 200, "headers": {}, "body": "fine", "truncated": False,
        "body_digest": "sha256:" + hashlib.sha256(b"fine").hexdigest(), "redirects": 0,
    }  # fmt: skip
    import json

    exact = "  output: {exact: " + json.dumps(fetched) + "}"
    assert run_one(_write(tmp_path / "a", "fetch", exact), "t").status == "passed"
    # one member more than the run returned, one missing, one different: each named
    wrong = dict(fetched, body="other", extra=1)
    del wrong["redirects"]
    result = run_one(
        _write(tmp_path / "b", "fetch", "  output: {exact: " + json.dumps(wrong) + "}"), "t"
    )
    found = {(f.pointer, f.message.split(" ")[-1]) for f in result.failures}
    assert found == {("/body", "differs"), ("/extra", "missing"), ("/redirects", "expected")}


def test_status_fails_naming_what_the_run_waits_on(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "drafter", AGENT, {"t": "method: draft\nexpect: {status: sealed}\n"})
    result = run_one(folder, "t")
    assert checks(result) == ["status"]
    assert "agent_turn at think" in result.failures[0].message
    assert result.failures[0].expected == "sealed"
    assert result.failures[0].actual == "needs_agent"

"""Managed agents through the real CLI: config, keys by profile, --drive, --directive, ask, SIGTERM.

The stub model server runs in the test process on loopback; ``proctor`` runs in a subprocess and
reaches it only through the configured endpoint.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Ws
from tests.runtime.agent_stub import Reply, Seen, StubModel, answer, error, tool_results

DIALECT = "chat_completions"
KEY = "local-model-key-7f3a9c2e5b1d"

SKILL_MD = """---
name: summarise
description: Summarise a file with an agent.
---
Summarise files briefly.
"""
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {file: {type: string}}
      required: [file]
    steps:
      - id: draft
        agent:
          instructions: Read the file named in `file` and summarise it in `summary`.
          inputs: {file: $input.file}
          calls: {tools: [fs.read]}
          output:
            type: object
            properties: {summary: {type: string}}
            required: [summary]
"""


def configure(ws: Ws, stub: StubModel, *, secret: bool = True) -> None:
    for key, value in (
        ("agent.provider", "local"),
        ("agent.dialect", DIALECT),
        ("agent.endpoint_url", stub.url),
        ("agent.model", "stub-model"),
    ):
        result = ws.proctor("config", "set", key, value)
        assert result.code == 0, result.stderr
    if secret:
        stored = ws.proctor(
            "credential", "set", "local", "--profile", "model", "--from-stdin", stdin=KEY
        )
        assert stored.code == 0, stored.stderr
        assert ws.proctor("config", "set", "agent.secret", "model").code == 0


def add_skill(ws: Ws) -> None:
    folder = ws.root / "skills" / "summarise"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "run.yaml").write_text(RUN_YAML)
    (ws.root / "notes.txt").write_text("alpha beta\n")


def everything_written(ws: Ws) -> str:
    texts = [p.read_bytes().decode("utf-8", "replace") for p in ws.root.rglob("*") if p.is_file()]
    texts += [p.read_bytes().decode("utf-8", "replace") for p in ws.home.rglob("*.json")]
    return "\n".join(texts)


def test_a_managed_run_without_a_model_is_refused(ws: Ws) -> None:
    add_skill(ws)
    assert ws.proctor("config", "set", "agent.provider", "openai").code == 0
    result = ws.proctor("run", "summarise", "-i", "file=notes.txt", "--drive")
    assert result.code == 3
    assert "agent_model_missing" in result.stderr and "no default model" in result.stderr
    assert not list((ws.root / ".proctor").glob("receipts/*.json"))


def test_a_key_is_refused_as_a_config_value(ws: Ws) -> None:
    result = ws.proctor("config", "set", "agent.model", "sk-ant-api03-" + "a" * 90)
    assert result.code == 3 and "config_value_secret" in result.stderr
    assert "a" * 90 not in result.stderr
    assert not (ws.home / "config.json").exists()


def test_drive_runs_an_agent_step_through_admission_with_the_key_only_in_the_header(
    ws: Ws,
) -> None:
    add_skill(ws)
    script = [
        answer(DIALECT, calls=[("fs_read", {"path": "notes.txt", "reason": "read it"})]),
        answer(DIALECT, calls=[("fs_write", {"path": "x.txt", "content": "x", "create": True})]),
        answer(DIALECT, text='{"summary": "alpha beta"}'),
    ]
    with StubModel(script) as stub:
        configure(ws, stub)
        result = ws.proctor("run", "summarise", "-i", "file=notes.txt", "--drive", "--json")
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["outcome"] == "completed" and doc["result"] == {"summary": "alpha beta"}
    assert [(t["tool"], t["outcome"]) for t in doc["trace"]] == [
        ("fs.read", "completed"),
        ("fs.write", "refused"),
    ]
    assert not (ws.root / "x.txt").exists()
    assert all(s.headers["authorization"] == f"Bearer {KEY}" for s in stub.seen)
    assert KEY not in everything_written(ws)
    verified = ws.proctor("verify", doc["receipt_id"])
    assert verified.code == 0, verified.stdout + verified.stderr


def test_a_provider_error_reaches_the_envelope_as_status_and_message(ws: Ws) -> None:
    add_skill(ws)
    script = [error(DIALECT, 401, f"invalid key {KEY} for this project")]
    with StubModel(script) as stub:
        configure(ws, stub)
        result = ws.proctor("run", "summarise", "-i", "file=notes.txt", "--drive", "--json")
    doc = result.json()
    assert result.code == 1 and doc["outcome"] == "failed"
    refusal = doc["refusal"]
    assert refusal["code"] == "provider_error"
    assert "HTTP 401" in refusal["message"] and "for this project" in refusal["message"]
    assert KEY not in result.stdout and KEY not in everything_written(ws)
    assert "server_error" not in result.stdout  # the raw body's other fields never appear
    assert len(stub.seen) == 1  # 401 is not retried


def test_run_directive_with_drive_confines_writes_to_output(ws: Ws) -> None:
    (ws.root / "notes.txt").write_text("alpha\n")
    directives = ws.root / "directives"
    directives.mkdir()
    (directives / "report.md").write_text(
        "---\nid: report\ndescription: Write a report\ntools: [read_file, write_file]\n"
        "category: task\n---\n# Report\n## Steps\n1. Write output/report.md.\n"
    )
    script = [
        answer(DIALECT, calls=[("write_file", {"path": "notes.txt", "content": "pwned"})]),
        answer(DIALECT, calls=[("write_file", {"path": "policies/x.yaml", "content": "x"})]),
        answer(DIALECT, calls=[("write_file", {"path": "output/report.md", "content": "ok"})]),
        answer(DIALECT, text='{"done": true, "summary": "wrote it"}'),
    ]
    with StubModel(script) as stub:
        configure(ws, stub, secret=False)
        result = ws.proctor(
            "run", "--directive", "report", "write the report", "--drive", "--json",
            "--run-authority", '{"effects": "allow"}',
        )  # fmt: skip
    assert result.code == 0, result.stderr
    doc = result.json()
    assert [(t["tool"], t["outcome"], t["code"]) for t in doc["trace"]] == [
        ("fs.write", "refused", "outside_writable_dirs"),
        ("fs.write", "refused", "authority_file"),
        ("fs.write", "completed", None),
    ]
    assert (ws.root / "notes.txt").read_text() == "alpha\n"
    assert not (ws.root / "policies").exists()
    assert (ws.root / "output" / "report.md").read_text() == "ok"
    names = [t["function"]["name"] for t in stub.seen[0].body["tools"]]
    assert sorted(names) == ["read_file", "write_file"]


def test_a_managed_agent_changes_nothing_by_default(ws: Ws) -> None:
    directives = ws.root / "directives"
    directives.mkdir()
    (directives / "report.md").write_text(
        "---\nid: report\ndescription: Write a report\ntools: [read_file, write_file]\n"
        "category: task\n---\n# Report\n## Steps\n1. Write output/report.md.\n"
    )
    script = [
        answer(DIALECT, calls=[("write_file", {"path": "output/report.md", "content": "ok"})]),
        answer(DIALECT, text='{"done": true, "summary": "could not write it"}'),
    ] * 2  # one turn per run below
    with StubModel(script) as stub:
        configure(ws, stub, secret=False)
        result = ws.proctor("run", "--directive", "report", "write the report", "--drive", "--json")
        # what --run-authority leaves out is filled from the managed default too
        limited = ws.proctor(
            "run", "--directive", "report", "again", "--drive", "--json",
            "--run-authority", '{"max_calls": 5}',
        )  # fmt: skip
    for r in (result, limited):
        doc = r.json()
        assert [(t["tool"], t["outcome"], t["code"]) for t in doc["trace"]][:1] == [
            ("fs.write", "refused", "approval_required")
        ], doc["trace"]
    assert not (ws.root / "output" / "report.md").exists()
    assert any("effects ask, reach workspace" in n for n in result.json()["notes"])


def test_ask_routes_with_one_recorded_call_then_runs_the_directive(ws: Ws) -> None:
    (ws.root / "notes.txt").write_text("alpha\n")

    def router(seen: Seen) -> Reply:
        assert "tools" not in seen.body  # the router is offered no tools
        text = seen.body["messages"][1]["content"]
        assert "file_summary" in text and "tool_catalogue" not in text  # only the allowed set
        return answer(
            DIALECT,
            text='{"decision": "single", "directive_id": "file_summary",'
            ' "reason": "it asks for a summary"}',
        )

    script: list[Any] = [
        router,
        answer(DIALECT, calls=[("read_file", {"path": "notes.txt"})]),
        answer(DIALECT, text='{"done": true, "summary": "alpha"}'),
    ]
    with StubModel(script) as stub:
        configure(ws, stub, secret=False)
        result = ws.proctor(
            "ask",
            "summarise notes.txt",
            "--allow",
            "file_summary",
            "--allow",
            "policy_audit",
            "--json",
        )
    assert result.code == 0, result.stderr
    doc = result.json()
    assert doc["route"]["decision"] == "single"
    assert doc["route"]["directive_id"] == "file_summary"
    assert doc["run"]["outcome"] == "completed"
    assert len(stub.seen) == 3
    [read] = tool_results(DIALECT, stub.seen[2])
    assert read["result"]["content"] == "alpha\n"
    audit = [
        json.loads(line) for line in (ws.root / ".proctor" / "audit.jsonl").read_text().splitlines()
    ]
    routed = [e for e in audit if e["event"] == "directive_routed"]
    assert len(routed) == 1 and routed[0]["directive_id"] == "file_summary"
    assert routed[0]["allowed"] == ["file_summary", "policy_audit"]


def test_a_router_pick_outside_the_allowed_set_runs_nothing(ws: Ws) -> None:
    script = [answer(DIALECT, text='{"decision": "single", "directive_id": "directive_drafting"}')]
    with StubModel(script) as stub:
        configure(ws, stub, secret=False)
        result = ws.proctor("ask", "draft me a directive", "--allow", "file_summary", "--json")
    assert result.code == 1
    assert result.json()["route"]["decision"] == "none"
    assert result.json()["run"] is None
    assert len(stub.seen) == 1


def test_sigterm_cancels_the_model_request_in_flight(ws: Ws) -> None:
    add_skill(ws)
    release = threading.Event()
    with StubModel([Reply(body={}, hang=release)]) as stub:
        configure(ws, stub, secret=False)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "proctor",
                "run",
                "summarise",
                "-i",
                "file=notes.txt",
                "--drive",
                "--json",
            ],
            cwd=ws.root,
            env=ws.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert stub.received.wait(60), "the model request never arrived"
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 143, err
    assert len(stub.seen) == 1
    runs = ws.proctor("history", "--json")
    assert runs.code == 0


@pytest.mark.parametrize("dialect", ["openai_responses", "anthropic_messages"])
def test_drive_speaks_each_configured_dialect(ws: Ws, dialect: str) -> None:
    add_skill(ws)
    script = [
        answer(dialect, calls=[("fs_read", {"path": "notes.txt"})]),
        answer(dialect, text='{"summary": "alpha beta"}'),
    ]
    with StubModel(script) as stub:
        configure(ws, stub, secret=False)
        assert ws.proctor("config", "set", "agent.dialect", dialect).code == 0
        result = ws.proctor("run", "summarise", "-i", "file=notes.txt", "--drive", "--json")
    assert result.code == 0, result.stderr
    assert result.json()["result"] == {"summary": "alpha beta"}
    expected = "/v1/responses" if dialect == "openai_responses" else "/v1/messages"
    assert {s.path for s in stub.seen} == {expected}


def test_config_show_reports_readiness(ws: Ws, tmp_path: Path) -> None:
    shown = ws.proctor("config", "show", "--json")
    assert shown.json()["complete"] is False
    assert shown.json()["problem"]["code"] == "agent_provider_missing"

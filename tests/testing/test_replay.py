"""Replay of a recorded run: ``[replay] retain`` keeps what a run did, ``proctor test record
--from RUN_ID`` turns it into a test file checked against the run's receipts, and ``proctor
replay RUN_ID`` re-runs it offline against the package as it is now.

The recorded runs are real: HTTP reaches a loopback server (through the egress guard, a name
resolved to a public address, then sunk to the server) and a managed turn's model is a
loopback server speaking the chat-completions dialect. Each server counts what reaches it, so
"offline" is proven as zero requests during the replay.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from proctor.errors import ProctorError
from proctor.parser.testfile import parse_test_file
from proctor.runtime.boundary.egress import EgressRoute, StaticResolver
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.testing.replay import describe, record_from, replay_run
from proctor.testing.runner import collect, run_case
from tests.runtime.boundary.test_egress_helpers import Server, echo, serve, sinkhole
from tests.testing.support import FETCH, package, workspace

SECRET = "live-token-5f0c2a9e7b13d846"
RETAIN = "[replay]\nretain = true\n"
STEPS = (
    FETCH.format(audience="https://api.example.com")
    + """      - id: confirm
        ask: {reason: Send what the first call saw?}
      - id: post
        tool: http.request
        reason: Report what was seen.
        inputs: {method: POST, url: "https://api.example.com/report", json: {seen: $steps.get.body}}
    result_from: [get, post]
"""
)
TURN = """
minimum_proctor: 0.1.0
methods:
  think:
    description: One managed turn that calls a tool.
    steps:
      - id: think
        agent:
          instructions: Answer.
          calls: {tools: [echo]}
          output:
            type: object
            properties: {answer: {type: string}}
            required: [answer]
"""


def _live(
    tmp_path: Path,
    server: Server,
    *,
    retain: bool = True,
    url: str = "https://api.example.com/x?q=1",
) -> tuple[Path, dict[str, str], str]:
    """A workspace with the reporter package, and one real run of it: the credential is
    delivered, the loopback server echoes it back, a person approves."""
    root = workspace(tmp_path / "ws")
    if retain:
        (root / "proctor.toml").write_text(RETAIN)
    package(root, "reporter", STEPS, {})
    environ = {"PROCTOR_HOME": str(tmp_path / "home"), "SVC_TOKEN": SECRET}
    route = EgressRoute(
        resolver=StaticResolver({"api.example.com": ["93.184.216.34"]}),
        pool_factory=sinkhole(server),
    )
    session = Session(Workspace(root), environ=environ, egress_route=route)
    try:
        env = session.run("skills/reporter", inputs={"url": url}, cwd=root)
        assert env.status == "needs_approval" and env.run_id is not None
        template = env.to_json()["answers_template"]["approvals"]
        doc = {
            "schema": "proctor.resume.v1",
            "approvals": {a: {"request_digest": e["request_digest"], "approved": True}
                          for a, e in template.items()},
        }  # fmt: skip
        env = session.resume(env.run_id, doc)
        assert env.status == "sealed" and env.outcome == "completed", env.to_json()
    finally:
        session.close()
    assert [r.authorization for r in server.requests] == [f"Bearer {SECRET}", None]
    assert env.run_id is not None
    return root, environ, env.run_id


def test_a_recorded_run_replays_green_offline_and_keeps_no_secret(tmp_path: Path) -> None:
    with serve(echo) as server:
        root, environ, run_id = _live(tmp_path, server)
        seen = len(server.requests)
        out = root / "skills" / "reporter" / "tests" / "from-run.yaml"
        written = record_from(run_id, out, root, environ)
        text = out.read_text()
        assert SECRET not in text
        test = parse_test_file(text, out.name)
        assert [e.request.method for e in test.providers.http] == ["GET", "POST"]
        assert test.host.approvals == {"confirm": True}
        assert test.setup.credentials == {"svc": "fixture-svc-credential"}
        assert test.expect.status == "sealed" and test.expect.outcome == "completed"
        assert "2 HTTP exchanges" in written.summary
        (case,) = collect(out)
        result = run_case(case)
        assert result.status == "passed", [f.to_json() for f in result.failures]
        replay = replay_run(root, run_id, environ)
        assert not replay.diverged and replay.divergence is None, replay.to_json()
        assert SECRET not in json.dumps(replay.to_json())
        assert len(server.requests) == seen  # nothing of either replay reached the server


def test_a_secret_the_run_was_given_as_input_is_not_in_the_test(tmp_path: Path) -> None:
    # the run keeps its inputs as given; the recording scrubs what the credentials resolve to
    with serve(echo) as server:
        url = f"https://api.example.com/x?leak={SECRET}"
        root, environ, run_id = _live(tmp_path, server, url=url)
        assert SECRET in server.requests[0].path  # the live run really sent it
        out = root / "skills" / "reporter" / "tests" / "leak.yaml"
        record_from(run_id, out, root, environ)
        replay = replay_run(root, run_id, environ)
    text = out.read_text()
    assert SECRET not in text and "[REDACTED:tainted]" in text
    db = sqlite3.connect(root / ".proctor" / "runs.sqlite")
    try:  # what the run retained of its calls was scrubbed before it was stored
        rows = db.execute("SELECT result FROM calls WHERE run_id = ?", (run_id,)).fetchall()
        events = db.execute("SELECT body FROM events WHERE run_id = ?", (run_id,)).fetchall()
    finally:
        db.close()
    assert rows and all(SECRET not in str(row) for row in rows + events)
    assert all('"args"' in row[0] for row in rows)
    assert SECRET not in json.dumps(replay.to_json())
    # a call whose arguments held the secret is named; its replay sends the scrubbed form,
    # which is the form the run kept: the same call
    assert any("held a secret" in note for note in replay.notes), replay.notes
    assert not replay.diverged, replay.to_json()


def test_an_edited_package_shows_its_first_divergence(tmp_path: Path) -> None:
    with serve(echo) as server:
        root, environ, run_id = _live(tmp_path, server)
        seen = len(server.requests)
        run_yaml = root / "skills" / "reporter" / "run.yaml"
        run_yaml.write_text(run_yaml.read_text().replace("/report", "/report-v2"))
        replay = replay_run(root, run_id, environ)
        assert len(server.requests) == seen
    assert replay.diverged and replay.divergence is not None
    first = replay.divergence
    assert first["index"] == 1  # the GET still matches; the POST is the first to part
    assert "args_digest" in first["fields"]
    assert first["recorded"]["step"] == "post" and first["recorded"]["status"] == "completed"
    assert first["replayed"]["status"] == "refused"
    assert first["replayed"]["code"] == "http_fixture_unmatched"
    assert describe(first)[0].startswith("call 2 (http.request at post) differs in")


def test_a_run_that_retained_nothing_is_refused(tmp_path: Path) -> None:
    with serve(echo) as server:
        root, environ, run_id = _live(tmp_path, server, retain=False)
    out = root / "skills" / "reporter" / "tests" / "r.yaml"
    with pytest.raises(ProctorError) as refused:
        record_from(run_id, out, root, environ)
    assert refused.value.code == "replay_not_retained"
    assert not out.exists()


@pytest.mark.parametrize("edit", ["args", "result"])
def test_a_run_store_edited_after_the_seal_is_refused(tmp_path: Path, edit: str) -> None:
    with serve(echo) as server:
        root, environ, run_id = _live(tmp_path, server)
    db = sqlite3.connect(root / ".proctor" / "runs.sqlite")
    try:
        (raw,) = db.execute(
            "SELECT result FROM calls WHERE run_id = ? AND step_id = 'post'", (run_id,)
        ).fetchone()
        settled = json.loads(raw)
        if edit == "args":  # what the test would send is not what ran
            settled["args"]["json"] = {"seen": "something else"}
        else:  # what the fixture would answer is not what came back
            settled["result"]["body"] = "forged"
        db.execute(
            "UPDATE calls SET result = ? WHERE run_id = ? AND step_id = 'post'",
            (json.dumps(settled), run_id),
        )
        db.commit()
    finally:
        db.close()
    out = root / "skills" / "reporter" / "tests" / "r.yaml"
    with pytest.raises(ProctorError) as refused:
        record_from(run_id, out, root, environ)
    assert refused.value.code == "replay_retained_mismatch"
    assert not out.exists()


def test_a_malformed_replay_setting_refuses_the_run(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    (root / "proctor.toml").write_text('[replay]\nretain = "yes"\n')
    package(root, "reporter", STEPS, {})
    session = Session(Workspace(root), environ={"PROCTOR_HOME": str(tmp_path / "home")})
    try:
        env = session.run("skills/reporter", inputs={"url": "https://api.example.com/x"}, cwd=root)
    finally:
        session.close()
    assert env.outcome == "blocked"
    assert env.to_json()["refusal"]["code"] == "replay_config_invalid"


class _Model:
    """A loopback chat-completions endpoint answering from a script, counting requests."""

    def __init__(self, responses: list[dict[str, Any]]) -> None:
        self.responses = responses
        self.requests = 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.dumps(model.responses[model.requests]).encode()
                model.requests += 1
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def model() -> Iterator[_Model]:
    tool_call = {"id": "c1", "type": "function",
                 "function": {"name": "echo", "arguments": json.dumps({"text": "hi"})}}  # fmt: skip
    served = _Model([
        {"choices": [{"message": {"role": "assistant", "content": None,
                                  "tool_calls": [tool_call]}}]},
        {"choices": [{"message": {"role": "assistant", "content": '{"answer": "hi"}'}}]},
    ])  # fmt: skip
    served.thread.start()
    try:
        yield served
    finally:
        served.httpd.shutdown()
        served.httpd.server_close()
        served.thread.join()


def test_a_managed_turn_replays_from_the_model_answers_it_kept(
    tmp_path: Path, model: _Model
) -> None:
    from proctor.runtime.agents import ManagedAgent
    from proctor.runtime.home.config import AgentConfig

    root = workspace(tmp_path / "ws")
    (root / "proctor.toml").write_text(RETAIN)
    package(root, "thinker", TURN, {})
    environ = {"PROCTOR_HOME": str(tmp_path / "home")}
    config = AgentConfig(provider="loop", model="loop-model", dialect="chat_completions",
                         endpoint_url=model.url, secret=None, max_retries=0)  # fmt: skip
    agent = ManagedAgent(config)
    session = Session(Workspace(root), environ=environ, agent_driver=agent)
    try:
        env = session.run("skills/thinker", inputs={}, cwd=root)
    finally:
        session.close()
        agent.close()
    assert env.status == "sealed" and env.outcome == "completed", env.to_json()
    assert model.requests == 2
    out = root / "skills" / "thinker" / "tests" / "turn.yaml"
    record_from(str(env.run_id), out, root, environ)
    test = parse_test_file(out.read_text(), out.name)
    assert test.providers.model is not None
    assert test.providers.model.model == "loop-model"
    assert test.providers.model.responses == model.responses
    assert test.host.answers == {}  # the model answered the turn, not a host
    (case,) = collect(out)
    result = run_case(case)
    assert result.status == "passed", [f.to_json() for f in result.failures]
    replay = replay_run(root, str(env.run_id), environ)
    assert not replay.diverged, replay.to_json()
    assert model.requests == 2  # neither replay asked the model


def test_proctor_replay_and_record_from_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from proctor.cli.main import cli as main

    with serve(echo) as server:
        root, environ, run_id = _live(tmp_path, server)
    monkeypatch.chdir(root)
    runner = CliRunner()
    same = runner.invoke(main, ["replay", run_id, "--json"], env=environ)
    assert same.exit_code == 0, same.output
    assert json.loads(same.output)["diverged"] is False
    run_yaml = root / "skills" / "reporter" / "run.yaml"
    run_yaml.write_text(run_yaml.read_text().replace("/report", "/elsewhere"))
    parted = runner.invoke(main, ["replay", run_id], env=environ)
    assert parted.exit_code == 5, parted.output
    assert "call 2 (http.request at post) differs" in parted.output
    out = "skills/reporter/tests/cli.yaml"
    wrote = runner.invoke(main, ["test", "record", "--from", run_id, "--out", out], env=environ)
    assert wrote.exit_code == 0, wrote.output
    assert SECRET not in (root / out).read_text()
    both = runner.invoke(main, ["test", "record", "skills/reporter", "--from", run_id,
                                "--out", "skills/reporter/tests/x.yaml"], env=environ)  # fmt: skip
    assert isinstance(both.exception, ProctorError) and both.exception.exit_code == 2


WORKED = """
minimum_proctor: 0.1.0
methods:
  think:
    description: A turn a host works call by call.
    steps:
      - id: think
        agent:
          instructions: Echo, digest, answer.
          calls: {tools: [echo, data.digest]}
          output:
            type: object
            properties: {answer: {type: string}}
            required: [answer]
"""


def test_a_turn_a_host_worked_call_by_call_replays_its_calls(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    (root / "proctor.toml").write_text(RETAIN)
    package(root, "worker", WORKED, {})
    environ = {"PROCTOR_HOME": str(tmp_path / "home")}
    session = Session(Workspace(root), environ=environ)
    try:
        env = session.run("skills/worker", inputs={}, cwd=root)
        assert env.status == "needs_agent" and env.run_id is not None
        run_id = env.run_id
        said = session.turn_call(run_id, "think", "echo", {"text": "hi"}, "a", reason="say")
        assert said.status == "completed", said
        refused = session.turn_call(run_id, "think", "fs.read", {"path": "x"}, "b", reason="no")
        assert refused.status == "refused"
        kept = session.turn_call(run_id, "think", "data.digest", {"value": "hi"}, "c", reason="d")
        assert kept.status == "completed", kept
        template = session.envelope(run_id).to_json()["answers_template"]["answers"]
        doc = {
            "schema": "proctor.resume.v1",
            "answers": {"think": {"request_digest": template["think"]["request_digest"],
                                  "value": {"answer": "hi"}}},
        }  # fmt: skip
        env = session.resume(run_id, doc)
        assert env.outcome == "completed", env.to_json()
    finally:
        session.close()
    out = root / "skills" / "worker" / "tests" / "worked.yaml"
    record_from(run_id, out, root, environ)
    test = parse_test_file(out.read_text(), out.name)
    turn = test.host.turns["think"]
    assert [(c.tool, c.call_id, c.arguments) for c in turn.calls] == [
        ("echo", "a", {"text": "hi"}),
        ("fs.read", "b", {"path": "x"}),  # a refused call is made again, and refused again
        ("data.digest", "c", {"value": "hi"}),
    ]
    assert turn.output == {"answer": "hi"} and test.host.answers == {}
    replay = replay_run(root, run_id, environ)
    assert not replay.diverged, replay.to_json()
    assert replay.test["status"] == "passed"


def test_a_run_with_a_child_that_asked_a_person_replays(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    (root / "proctor.toml").write_text(RETAIN)
    package(root, "child", """
minimum_proctor: 0.1.0
methods:
  echo:
    description: Ask, then echo.
    inputs: {type: object, properties: {text: {type: string}}, required: [text]}
    steps:
      - id: confirm
        ask: {reason: Go on?}
      - id: say
        tool: echo
        inputs: {text: $input.text}
""", {})  # fmt: skip
    package(root, "parent", """
minimum_proctor: 0.1.0
methods:
  go:
    description: One child per text.
    inputs: {type: object, properties: {texts: {type: array}}, required: [texts]}
    steps:
      - id: each
        skill: ../child
        for_each: $input.texts
        inputs: {text: $item}
""", {})  # fmt: skip
    environ = {"PROCTOR_HOME": str(tmp_path / "home")}
    session = Session(Workspace(root), environ=environ)
    try:
        env = session.run("skills/parent", inputs={"texts": ["a", "b"]}, cwd=root)
        for _ in range(4):
            if env.status != "needs_approval":
                break
            assert env.run_id is not None
            template = env.to_json()["answers_template"]["approvals"]
            doc = {"schema": "proctor.resume.v1",
                   "approvals": {a: {"request_digest": e["request_digest"], "approved": True}
                                 for a, e in template.items()}}  # fmt: skip
            env = session.resume(env.run_id, doc)
        assert env.outcome == "completed", env.to_json()
    finally:
        session.close()
    run_id = str(env.run_id)
    out = root / "skills" / "parent" / "tests" / "children.yaml"
    record_from(run_id, out, root, environ)
    test = parse_test_file(out.read_text(), out.name)
    assert len(test.host.approvals) == 2 and all(test.host.approvals.values())
    replay = replay_run(root, run_id, environ)
    assert not replay.diverged, replay.to_json()
    # the children's calls are part of what was compared; an edited child shows
    from proctor.testing.retained import retained_test

    assert {e["run"] for e in retained_test(root, run_id, environ).trace} == {1, 2}
    child_yaml = root / "skills" / "child" / "run.yaml"
    child_yaml.write_text(child_yaml.read_text().replace("$input.text", "changed"))
    edited = replay_run(root, run_id, environ)
    assert edited.diverged and edited.divergence is not None
    assert edited.divergence["recorded"]["run"] == 1
    assert edited.divergence["fields"] == ["args_digest", "outputs_digest"]

"""OpenTelemetry export as a user meets it: ``proctor run`` in a subprocess with an OTLP
endpoint on loopback; the receiver decodes the protobuf export with opentelemetry-proto."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.e2e.conftest import REPO, Ws, ws  # noqa: F401  (the fixture)

SECRET_ARG = "argument-value-7c1f3e-never-exported"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

SKILL = """minimum_proctor: 0.1.0
methods:
  go:
    description: Write a note, then try to write a token.
    inputs:
      type: object
      properties: {note: {type: string}, token: {type: string}}
      required: [note, token]
      additionalProperties: false
    steps:
      - id: write
        tool: fs.write
        inputs: {path: note.txt, content: $input.note, create: true}
      - id: peek
        tool: fs.write
        inputs: {path: leak.txt, content: $input.token, create: true}
"""


class _Receiver:
    """A loopback OTLP/HTTP receiver: keeps every request body by path."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[bytes]] = {}
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                assert self.headers.get("Content-Type") == "application/x-protobuf"
                received.setdefault(self.path, []).append(self.rfile.read(size))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    yield server
    server.close()


def _spans(receiver: _Receiver) -> list[dict[str, Any]]:
    out = []
    for body in receiver.bodies.get("/v1/traces", []):
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attrs = {
                        a.key: getattr(a.value, a.value.WhichOneof("value"))
                        for a in span.attributes
                    }
                    out.append(
                        {
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "attrs": attrs,
                            "error": span.status.code == 2,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                        }
                    )
    return out


def test_run_step_and_call_spans_reach_an_otlp_receiver_without_secrets(
    ws: Ws,  # noqa: F811
    receiver: _Receiver,
) -> None:
    skill = ws.root / "skills" / "peek"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: peek\ndescription: Peeks.\n---\nPeek.\n")
    (skill / "run.yaml").write_text(SKILL)
    r = ws.proctor(
        "run",
        "peek",
        "-i",
        f"note={SECRET_ARG}",
        "-i",
        f"token={TOKEN}",
        "--json",
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
    )
    assert r.code == 1, r.stdout + r.stderr
    env = r.json()
    assert env["outcome"] == "blocked"
    raw = b"".join(b for bodies in receiver.bodies.values() for b in bodies)
    assert raw, "nothing was exported"
    assert SECRET_ARG.encode() not in raw and TOKEN.encode() not in raw
    assert not (ws.root / "leak.txt").exists()
    spans = _spans(receiver)
    by_name = {s["name"]: s for s in spans}
    run = by_name["invoke_agent peek"]
    write, peek = sorted(
        (s for s in spans if s["name"] == "execute_tool fs.write"), key=lambda s: s["start"]
    )
    step_write, step_peek = by_name["proctor.step write"], by_name["proctor.step peek"]
    # one trace, parent links run -> step -> call
    assert {s["trace_id"] for s in spans} == {run["trace_id"]}
    assert run["parent"] == ""
    assert step_write["parent"] == run["span_id"] and step_peek["parent"] == run["span_id"]
    assert write["parent"] == step_write["span_id"] and peek["parent"] == step_peek["span_id"]
    assert run["start"] <= write["start"] <= write["end"] <= peek["start"] <= run["end"]
    # the documented attributes
    assert run["attrs"]["gen_ai.operation.name"] == "invoke_agent"
    assert run["attrs"]["proctor.run.id"] == env["run_id"]
    assert run["attrs"]["proctor.receipt.id"] == env["receipt_id"]
    assert run["attrs"]["proctor.run.outcome"] == "blocked" and run["error"]
    assert write["attrs"]["gen_ai.operation.name"] == "execute_tool"
    assert write["attrs"]["gen_ai.tool.name"] == "fs.write"
    assert write["attrs"]["proctor.admission.outcome"] == "admitted"
    assert write["attrs"]["proctor.effect.class"] == "write"
    assert not write["error"]
    assert peek["attrs"]["proctor.admission.outcome"] == "refused"
    assert peek["attrs"]["proctor.refusal.code"] == "secret_detected"
    assert peek["attrs"]["proctor.rule.id"] == "proctor.no_secrets_in_args"
    assert peek["error"]
    # the trace id is in the run record, so a receipt leads to its trace
    one = ws.proctor("history", env["run_id"], "--json")
    assert one.code == 0
    record = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("
                "'select data from runs').fetchone()[0])",
                str(ws.root / ".proctor" / "runs.sqlite"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert record["trace_id"] == run["trace_id"]
    # metrics: calls admitted and refused by code, seals
    points: dict[str, list[dict[str, Any]]] = {}
    # cumulative sums: the last export holds every counter's total
    for body in receiver.bodies.get("/v1/metrics", [])[-1:]:
        request = ExportMetricsServiceRequest.FromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.sum.data_points:
                        attrs = {a.key: a.value.string_value for a in point.attributes}
                        points.setdefault(metric.name, []).append({**attrs, "n": point.as_int})
    assert {"proctor.admission.outcome": "admitted", "n": 1} in points["proctor.calls"]
    assert {
        "proctor.admission.outcome": "refused",
        "proctor.refusal.code": "secret_detected",
        "n": 1,
    } in points["proctor.calls"]
    assert points["proctor.seals"] == [{"proctor.run.outcome": "blocked", "n": 1}]


def test_without_an_endpoint_a_run_imports_no_opentelemetry(ws: Ws) -> None:  # noqa: F811
    script = (
        "import sys\n"
        "from proctor.cli.main import main\n"
        "try:\n"
        "    main(['run', sys.argv[1], '-i', 'message=hi', '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    env = {k: v for k, v in ws.env.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(REPO / "examples/hello-world")],
        cwd=ws.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr
    assert json.loads(done.stdout)["outcome"] == "completed"


def test_a_managed_turn_exports_a_span_per_model_request(
    ws: Ws,  # noqa: F811
    receiver: _Receiver,
) -> None:
    from tests.e2e.test_agent_cli import DIALECT, KEY, add_skill, configure
    from tests.runtime.agent_stub import StubModel, answer

    add_skill(ws)
    script = [
        answer(DIALECT, calls=[("fs_read", {"path": "notes.txt", "reason": "read it"})]),
        answer(DIALECT, text='{"summary": "alpha beta"}'),
    ]
    with StubModel(script) as stub:
        configure(ws, stub)
        r = ws.proctor(
            "run",
            "summarise",
            "-i",
            "file=notes.txt",
            "--drive",
            "--json",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
        )
    assert r.code == 0, r.stderr
    raw = b"".join(b for bodies in receiver.bodies.values() for b in bodies)
    assert KEY.encode() not in raw and b"alpha beta" not in raw
    spans = _spans(receiver)
    step = next(s for s in spans if s["name"] == "proctor.step draft")
    chats = sorted((s for s in spans if s["name"] == "chat stub-model"), key=lambda s: s["start"])
    assert len(chats) == 2
    assert all(c["parent"] == step["span_id"] for c in chats)
    assert chats[0]["attrs"]["gen_ai.operation.name"] == "chat"
    assert chats[0]["attrs"]["gen_ai.request.model"] == "stub-model"
    read = next(s for s in spans if s["name"] == "execute_tool fs.read")
    assert read["parent"] == step["span_id"]
    assert chats[0]["end"] <= read["start"] <= read["end"] <= chats[1]["start"]
    events = [
        json.loads(line)["event"]
        for line in (ws.root / ".proctor" / "audit.jsonl").read_text().splitlines()
    ]
    assert events.count("model_request") == 2


def test_an_approval_waited_across_processes_is_one_trace_with_its_wait(
    ws: Ws,  # noqa: F811
    receiver: _Receiver,
) -> None:
    skill = ws.root / "skills" / "pages"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pages\ndescription: Writes.\n---\nWrite.\n")
    (skill / "run.yaml").write_text(
        "minimum_proctor: 0.1.0\nmethods:\n  write:\n    description: Write a page.\n"
        "    steps:\n      - id: put\n        tool: fs.write\n        reason: Write it.\n"
        "        inputs: {path: page.txt, content: new, create: true}\n"
    )
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    paused = ws.proctor(
        "run", "pages#write", "--run-authority", '{"effects": "ask"}', "--json", env=otel
    )
    assert paused.code == 10, paused.stdout + paused.stderr
    env = paused.json()
    decision = {
        "schema": "proctor.resume.v1",
        "approvals": {
            "put": {"request_digest": env["requests"][0]["request_digest"], "approved": True}
        },
    }
    done = ws.proctor("resume", env["run_id"], "-", "--json", stdin=json.dumps(decision), env=otel)
    assert done.code == 0, done.stdout + done.stderr
    spans = _spans(receiver)
    assert len({s["trace_id"] for s in spans}) == 1  # both processes, one trace
    runs = sorted(
        (s for s in spans if s["name"].startswith("invoke_agent")), key=lambda s: s["start"]
    )
    assert [r["attrs"].get("proctor.run.status") for r in runs] == ["needs_approval", None]
    assert runs[1]["attrs"]["proctor.run.resumed"] is True
    [approval] = [s for s in spans if s["name"] == "proctor.approval put"]
    assert approval["parent"] == runs[1]["span_id"]
    assert approval["attrs"]["proctor.approval.approved"] is True
    assert approval["attrs"]["proctor.approval.wait_seen"] is True
    assert approval["start"] <= runs[0]["end"] < approval["end"]
    waits = []
    for body in receiver.bodies.get("/v1/metrics", []):
        request = ExportMetricsServiceRequest.FromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                waits += [m for m in scope.metrics if m.name == "proctor.approval.wait"]
    assert waits and waits[-1].histogram.data_points[0].count == 1


PARENT = """minimum_proctor: 0.1.0
methods:
  go:
    description: A skill step, then a managed turn that calls the same skill.
    steps:
      - id: each
        skill: ../child
        inputs: {text: from-step}
      - id: think
        agent:
          instructions: Call the child once, then answer.
          calls: {skills: [../child]}
          output:
            type: object
            properties: {answer: {type: string}}
            required: [answer]
"""
CHILD = """minimum_proctor: 0.1.0
methods:
  echo:
    description: Echo a text.
    inputs:
      type: object
      properties: {text: {type: string}}
      required: [text]
    steps:
      - id: say
        tool: echo
        inputs: {text: $input.text}
"""


def test_a_child_run_is_a_span_of_its_parents_call_or_step_in_the_same_trace(
    ws: Ws,  # noqa: F811
    receiver: _Receiver,
) -> None:
    from tests.e2e.test_agent_cli import DIALECT, configure
    from tests.runtime.agent_stub import StubModel, answer

    for name, text in (("parent", PARENT), ("child", CHILD)):
        folder = ws.root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name}.\n---\nGo.\n")
        (folder / "run.yaml").write_text(text)
    script = [
        answer(DIALECT, calls=[("skill_child_echo", {"text": "from-turn"})]),
        answer(DIALECT, text='{"answer": "done"}'),
    ]
    with StubModel(script) as stub:
        configure(ws, stub)
        r = ws.proctor(
            "run", "parent", "--drive", "--json", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        )
    assert r.code == 0, r.stdout + r.stderr
    root_id = r.json()["run_id"]
    spans = _spans(receiver)
    assert len({s["trace_id"] for s in spans}) == 1, "a child run started a trace of its own"
    by_id = {s["span_id"]: s for s in spans}
    [root] = [s for s in spans if s["name"] == "invoke_agent parent"]
    assert root["parent"] == "" and root["attrs"]["proctor.run.id"] == root_id
    children = sorted(
        (s for s in spans if s["name"] == "invoke_agent child"), key=lambda s: s["start"]
    )
    assert len(children) == 2
    by_step, by_call = children
    # the skill step's child hangs under the parent's step span
    step = by_id[by_step["parent"]]
    assert step["name"] == "proctor.step each" and step["parent"] == root["span_id"]
    assert step["start"] <= by_step["start"] and by_step["end"] <= step["end"]
    # the turn's skill call: its child hangs under the call span that started it
    call = by_id[by_call["parent"]]
    assert call["name"] == "execute_tool skill.child.echo"
    assert by_id[call["parent"]]["name"] == "proctor.step think"
    assert call["start"] <= by_call["start"] and by_call["end"] <= call["end"]
    # each child's own call is under the child's step, in the same trace
    echoes = [s for s in spans if s["name"] == "execute_tool echo"]
    assert len(echoes) == 2
    for echo in echoes:
        child_step = by_id[echo["parent"]]
        assert by_id[child_step["parent"]] in children
    # the run record of a child leads to the root's trace
    import sqlite3

    db = sqlite3.connect(ws.root / ".proctor" / "runs.sqlite")
    try:
        recorded = {
            run_id: json.loads(data)["trace_id"]
            for run_id, data in db.execute("SELECT run_id, data FROM runs").fetchall()
        }
    finally:
        db.close()
    assert len(recorded) == 3 and set(recorded.values()) == {root["trace_id"]}


ASKING_CHILD = """minimum_proctor: 0.1.0
methods:
  echo:
    description: Ask, then echo.
    steps:
      - id: confirm
        ask: {reason: Go on?}
      - id: say
        tool: echo
        inputs: {text: after}
"""


def test_a_child_continued_by_a_later_process_stays_in_its_roots_trace(
    ws: Ws,  # noqa: F811
    receiver: _Receiver,
) -> None:
    parent = "minimum_proctor: 0.1.0\nmethods:\n  go:\n    description: Go.\n    steps:\n"
    parent += "      - id: each\n        skill: ../child\n"
    for name, text in (("parent", parent), ("child", ASKING_CHILD)):
        folder = ws.root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name}.\n---\nGo.\n")
        (folder / "run.yaml").write_text(text)
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    paused = ws.proctor("run", "parent", "--json", env=otel)
    assert paused.code == 10, paused.stdout + paused.stderr
    env = paused.json()
    [request] = env["requests"]
    decision = {
        "schema": "proctor.resume.v1",
        "approvals": {
            request["address"]: {"request_digest": request["request_digest"], "approved": True}
        },
    }
    done = ws.proctor("resume", env["run_id"], "-", "--json", stdin=json.dumps(decision), env=otel)
    assert done.code == 0, done.stdout + done.stderr
    spans = _spans(receiver)
    assert len({s["trace_id"] for s in spans}) == 1  # two processes, a child: one trace
    by_id = {s["span_id"]: s for s in spans}
    children = sorted(
        (s for s in spans if s["name"] == "invoke_agent child"), key=lambda s: s["start"]
    )
    assert len(children) == 2  # started and paused, then continued and sealed
    assert children[1]["attrs"]["proctor.run.resumed"] is True
    for child in children:
        step = by_id[child["parent"]]
        assert step["name"] == "proctor.step each"
        owner = by_id[step["parent"]]
        assert owner["name"].startswith("invoke_agent")
        assert owner["attrs"]["proctor.run.id"] == env["run_id"]
    [echo] = [s for s in spans if s["name"] == "execute_tool echo"]
    assert by_id[by_id[echo["parent"]]["parent"]] is children[1]

"""proctor's own overhead per managed agent turn, model time excluded.

A stub model on loopback answers instantly (canned chat completions bodies, HTTP/1.1 keep-alive,
Nagle off). Each turn: the model asks for one tool call (``fs.read`` through full admission:
scope, schema, containment, shipped policies, run store, audit log), then answers the final
JSON object. Printed, median and p95 in microseconds:

  turn       the whole drive_turn;
  model      time inside the model client (request encode, loopback round trip, decode);
  overhead   turn - model: prompt and tool building, admission and recording of the call,
             result marking, output validation.

Run: .venv/bin/python bench/agent.py [turns]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from proctor.runtime.admission.governor import Governor
from proctor.runtime.agents import ManagedAgent
from proctor.runtime.boundary.sanitize import Sanitizer
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.runtime.home.config import agent_config
from proctor.runtime.records.runs import RunRecord

CALL = {
    "id": "c1",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "fs_read",
                            "arguments": json.dumps({"path": "notes.txt", "reason": "bench"}),
                        },
                    }
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
}
FINAL = {
    "id": "c2",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": '{"summary": "alpha"}'},
            "finish_reason": "stop",
        }
    ],
}


class _Model(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        has_result = any(m.get("role") == "tool" for m in body["messages"])
        data = json.dumps(FINAL if has_result else CALL).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(turns: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".proctor").mkdir()
        (root / "notes.txt").write_text("alpha beta\n")
        session = Session(Workspace(root), environ={"PROCTOR_HOME": str(root / "home")})
        policies, guards, _ = session.policy()
        cfg = agent_config(
            section={
                "provider": "stub",
                "model": "m",
                "dialect": "chat_completions",
                "endpoint_url": url,
            }
        )
        agent = ManagedAgent(cfg)
        samples: dict[str, list[float]] = {"turn": [], "model": [], "overhead": []}
        for i in range(turns + 20):
            run_id = f"bench-{i}"
            session.store.create_run(RunRecord(run_id=run_id, skill="bench", method="m"))
            governor = Governor(
                run_id=run_id,
                workspace=session.workspace,
                store=session.store,
                tools=session.tools,
                policies=policies,
                guards=guards,
                audit=session.audit,
                sanitizer=Sanitizer(),
                directive_id="bench",
            )
            turn = {
                "instructions": "Summarise notes.txt.",
                "inputs": {"file": "notes.txt"},
                "allowance": {"tools": ["fs.read"]},
                "output_schema": {"type": "object", "required": ["summary"]},
                "ask": False,
                "step": "draft",
            }
            out = agent.drive_turn(turn, governor.call)
            assert out == {"summary": "alpha"}, out
            if i < 20:
                continue  # warm-up: imports, validator compilation, connection set-up
            stats = agent.last
            samples["turn"].append(stats.total_s * 1e6)
            samples["model"].append(stats.model_s * 1e6)
            samples["overhead"].append((stats.total_s - stats.model_s) * 1e6)
        agent.close()
        session.close()
    server.shutdown()
    print(f"managed agent turn: 2 model requests + 1 admitted fs.read, {turns} turns")
    for name, values in samples.items():
        median, p95 = statistics.median(values), _pct(values, 0.95)
        print(f"  {name:9s} median {median:8.0f} us   p95 {p95:8.0f} us")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)

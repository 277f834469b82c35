#!/usr/bin/env python3
"""Connector operations against raw ``http.request``, and the state store's throughput.

Part 1, per call through ``Governor.call`` (shipped policies, audit line, SQLite run store), to
a loopback tracker in this process:

  http.request GET      the raw request a skill would hand-build (effect network: claimed and
                        settled, two commits)
  operation read        ``operation:tracker/issue.read`` for the same URL (effect read: the
                        template, the pinned egress guard, one commit)
  http.request POST     a raw POST with an idempotency key
  operation write       ``operation:tracker/issue.label`` (provider key, claim, settle)

The ratio operation / raw is printed beside each pair.

Part 2, the state store per backend: ``append`` calls per second (one event each, a new
idempotency key each) and events read per second (pages of 100). SQLite always; PostgreSQL
and Redis when ``PROCTOR_TEST_DATABASE_URL`` / ``PROCTOR_TEST_REDIS_URL`` are set (each in a
schema or key prefix of its own, dropped after).

    .venv/bin/python bench/connectors.py [--rounds 300] [--events 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Tracker(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # otherwise delayed ACKs add ~40 ms to every reply

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(b'{"id": "7", "title": "Crash", "label": "bug"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._reply(b'{"id": "7", "label": "bug"}')

    def log_message(self, format: str, *args: Any) -> None:
        pass


CONNECTOR = """name: tracker
base_url: {url}
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
"""


def _stats(samples: list[int]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) / 1000, s[int(len(s) * 0.95) - 1] / 1000


def operations(rounds: int) -> None:
    from proctor.core.authority import Authority
    from proctor.parser.connector import connector_origin, parse_connector
    from proctor.receipts.signing import signer_from_seed
    from proctor.runtime.admission.governor import CallSpec, Governor
    from proctor.runtime.boundary.egress import EgressAllow
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.connectors.catalog import LoadedConnector
    from proctor.runtime.connectors.operations import operation_deliver, operation_tools
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.runs import RunRecord
    from proctor.runtime.tools.http import network_deliver

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Tracker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    tmp = Path(tempfile.mkdtemp(prefix="proctor-bench-"))
    (tmp / ".proctor").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PROCTOR_AUDIT_LOG"}
    session = Session(Workspace(tmp), environ=env, signer=signer_from_seed(b"\x01" * 32))
    session.store.create_run(RunRecord(run_id="bench", skill="bench", method="m"))
    connector = parse_connector(CONNECTOR.format(url=url), "connector.yaml")
    ops = operation_tools({"tracker": LoadedConnector(connector, connector_origin(url), "x")})
    allow = EgressAllow.parse(["127.0.0.1"])
    raw = network_deliver({}, {}, allow=allow, taint=None)
    op = operation_deliver({}, allow=allow, taint=None)
    policies, guards, _ = session.policy()
    governor = Governor(
        run_id="bench", workspace=session.workspace, store=session.store,
        tools={**session.tools, **ops}, policies=policies, guards=guards, audit=session.audit,
        sanitizer=Sanitizer(), authority=Authority(), directive_id="bench",
        clock=session.clock, deliver=lambda spec, tool: {**raw(spec, tool), **op(spec, tool)},
    )  # fmt: skip

    def timed(label: str, make: Callable[[int], CallSpec]) -> float:
        samples = []
        for i in range(rounds + 20):
            spec = make(i)
            t0 = time.perf_counter_ns()
            outcome = governor.call(spec)
            t1 = time.perf_counter_ns()
            if not outcome.ok:
                raise SystemExit(f"{label}: {outcome.error}")
            if i >= 20:
                samples.append(t1 - t0)
            governor.history.clear()
        median, p95 = _stats(samples)
        print(f"{label:<28} median {median:9.1f} us   p95 {p95:9.1f} us")
        return median

    def spec(tool: str, args: dict[str, Any], key: str | None = None) -> CallSpec:
        return CallSpec(
            tool=tool, args=args, allowance=frozenset({tool}), step_id="s", step_index=0,
            idempotency_key=key,
        )  # fmt: skip

    get = {"method": "GET", "url": f"{url}/api/issues/7"}
    post = {"method": "POST", "url": f"{url}/api/issues/7/labels", "json": {"label": "bug"}}
    raw_get = timed("http.request GET", lambda i: spec("http.request", get))
    op_read = timed(
        "operation read", lambda i: spec("operation:tracker/issue.read", {"issue": "7"})
    )
    print(f"{'':<28} ratio operation/raw {op_read / raw_get:5.2f}")
    raw_post = timed("http.request POST", lambda i: spec("http.request", post, f"raw-{i}"))
    op_write = timed(
        "operation write",
        lambda i: spec(
            "operation:tracker/issue.label",
            {"issue": "7", "label": "bug", "idempotency_key": f"op-{i}"},
        ),
    )
    print(f"{'':<28} ratio operation/raw {op_write / raw_post:5.2f}")
    session.close()
    server.shutdown()
    server.server_close()


def _backends(tmp: Path) -> list[tuple[str, Any]]:
    from proctor.runtime.storage.sqlite import SqliteStateStore

    found: list[tuple[str, Any]] = [("sqlite", SqliteStateStore(tmp / "store.sqlite"))]
    unique = "bench" + uuid.uuid4().hex[:10]
    if os.environ.get("PROCTOR_TEST_DATABASE_URL"):
        from proctor.runtime.storage.postgres import PostgresStateStore

        pg = PostgresStateStore(os.environ["PROCTOR_TEST_DATABASE_URL"], schema=unique)
        found.append(("postgresql", pg))
    else:
        print("postgresql: skipped (PROCTOR_TEST_DATABASE_URL is unset)")
    if os.environ.get("PROCTOR_TEST_REDIS_URL"):
        from proctor.runtime.storage.redis import RedisStateStore

        rd = RedisStateStore(os.environ["PROCTOR_TEST_REDIS_URL"], prefix=f"proctor-{unique}")
        found.append(("redis", rd))
    else:
        print("redis: skipped (PROCTOR_TEST_REDIS_URL is unset)")
    return found


def store(events: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="proctor-bench-store-"))
    for name, backend in _backends(tmp):
        event = {"issue": "7", "label": "bug", "note": "x" * 64}
        t0 = time.perf_counter()
        for i in range(events):
            backend.append("bench", "log", event, f"k{i}")
        appended = time.perf_counter() - t0
        t0 = time.perf_counter()
        cursor, seen = 0, 0
        while True:
            page = backend.read("bench", "log", cursor, 100)
            if not page["events"]:
                break
            seen += len(page["events"])
            cursor = page["next_cursor"]
        read = time.perf_counter() - t0
        assert seen == events, (name, seen)
        print(
            f"store {name:<11} append {events / appended:9.0f} events/s"
            f"   read {seen / read:10.0f} events/s   ({events} events)"
        )
        if name != "sqlite":
            backend.drop()
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300, help="timed calls per path")
    parser.add_argument("--events", type=int, default=2000, help="events appended per backend")
    args = parser.parse_args()
    operations(args.rounds)
    store(args.events)
    print(json.dumps({"rounds": args.rounds, "events": args.events}))


if __name__ == "__main__":
    main()

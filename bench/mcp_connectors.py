#!/usr/bin/env python3
"""An MCP connector's operation against the upstream tool it calls.

The upstream is the npm filesystem server (``.ci/node``, as ``.ci/run`` installs it), run in
the sandbox once for the whole bench (a workspace's upstreams are kept for the process). Timed,
taking turns round by round so both see the same load:

  raw upstream call     ``Upstreams.call`` of ``read_text_file``: the pin check, the rate
                        windows and the stdio round trip, no admission, no run
  mcp: tool step        a whole run (start, admission, record, audit, seal) of one step
                        ``tool: mcp:fs/read_text_file``
  operation step        the same run with ``operation: files/file.read``, an MCP connector's
                        read of the same tool (template, result pointer)

Prints median and p95 of each, and the ratio operation / ``mcp:`` tool step (the yardstick:
what the connector adds over calling the upstream tool directly in a step).

    .venv/bin/python bench/mcp_connectors.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"

CONNECTOR = """name: files
mcp: fs
operations:
  file.read:
    verb: read
    mcp: {tool: read_text_file, arguments: {path: $input.path}}
    inputs: {type: object, properties: {path: {type: string}}, required: [path]}
    result: {text: /content/0/text}
"""

RUN_YAML = """minimum_proctor: 0.1.0
default_method: op
methods:
  op:
    description: Read through the connector.
    inputs: {{type: object, properties: {{path: {{type: string}}}}, required: [path]}}
    steps:
      - id: get
        operation: files/file.read
        inputs: {{path: $input.path}}
  tool:
    description: Read with the upstream tool.
    inputs: {{type: object, properties: {{path: {{type: string}}}}, required: [path]}}
    steps:
      - id: get
        tool: mcp:fs/read_text_file
        inputs: {{path: $input.path}}
"""


def _workspace(base: Path) -> tuple[Path, Path]:
    root = base / "ws"
    data = root / "data"
    data.mkdir(parents=True)
    (root / ".proctor").mkdir()
    (data / "a.txt").write_text("hello from the bench\n" * 20)
    script = (SERVER / "dist" / "index.js").resolve()
    servers = {"fs": {"command": "node", "args": [str(script), str(data)]}}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    reads = json.dumps([str((REPO / ".ci" / "node").resolve())])
    (root / "proctor.toml").write_text(f"[sandbox]\nread = {reads}\n")
    skill = root / "skills" / "read"
    (skill / "connectors" / "files").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: read\ndescription: Read a file.\n---\n")
    (skill / "run.yaml").write_text(RUN_YAML.format())
    (skill / "connectors" / "files" / "connector.yaml").write_text(CONNECTOR)
    return root, data / "a.txt"


def _stats(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    if not (SERVER / "dist" / "index.js").is_file():
        raise SystemExit("the filesystem server is not installed (.ci/run installs .ci/node)")
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.gateway.review import pin_servers
    from proctor.runtime.gateway.upstreams import shared_upstreams

    with tempfile.TemporaryDirectory() as tmp:
        root, target = _workspace(Path(tmp))
        environ = {**os.environ, "PROCTOR_HOME": str(Path(tmp) / "home")}
        upstreams = shared_upstreams(Workspace(root), environ)
        assert upstreams is not None
        pin_servers(upstreams, ["fs"])
        inputs = {"path": str(target)}

        def run(method: str) -> Callable[[], Any]:
            def once() -> None:
                session = Session(Workspace(root), environ=environ)
                try:
                    env = session.run(f"read#{method}", inputs=inputs, cwd=root)
                    assert env.outcome == "completed", env.refusal
                finally:
                    session.close()

            return once

        timed: dict[str, Callable[[], Any]] = {
            "raw upstream call": lambda: upstreams.call("fs", "read_text_file", inputs),
            "mcp: tool step (whole run)": run("tool"),
            "operation step (whole run)": run("op"),
        }
        for fn in timed.values():  # warm: the server started, modules imported
            fn()
            fn()
        times: dict[str, list[float]] = {k: [] for k in timed}
        for _ in range(args.rounds):
            for label, fn in timed.items():
                start = time.perf_counter()
                fn()
                times[label].append((time.perf_counter() - start) * 1000)
        upstreams.close()
    print(f"rounds: {args.rounds} (taking turns); milliseconds")
    for label, values in times.items():
        median, p95 = _stats(values)
        print(f"  {label:<30} median {median:8.2f}   p95 {p95:8.2f}")
    op = statistics.median(times["operation step (whole run)"])
    tool = statistics.median(times["mcp: tool step (whole run)"])
    print(f"operation / mcp: tool step (medians): {op / tool:.2f}x")


if __name__ == "__main__":
    main()

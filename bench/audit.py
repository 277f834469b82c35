"""Print what the anchored audit log costs: median and p95 per operation.

- ``emit``: one event appended (lock, chain, one write), against a bare ``os.write`` of the
  same bytes to an ``O_APPEND`` file (the peer);
- ``head`` at seal: the log's head once this process knows the log (incremental), and the
  first one of a process on a log of 20,000 lines: counting every line, or from the run
  store's newest anchor (what a seal does);
- ``verify``: the chain and 1,000 anchors over a log of 20,000 lines;
- ``coalesce``: one refused MCP HTTP request counted (no line written).

Run: .venv/bin/python bench/audit.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from _timing import measure

# Run as a script, this folder leads sys.path and bench/mcp.py would shadow the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from proctor.mcp.http import RefusalCoalescer  # noqa: E402
from proctor.runtime.records.audit import Anchor, AuditLog, line_digest, verify_chain  # noqa: E402

FIELDS = {
    "tool": "fs.read",
    "call_id": "s/7",
    "outcome": "completed",
    "args_digest": "sha256:" + "ab" * 32,
    "outputs_digest": "sha256:" + "cd" * 32,
}


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="proctor-bench-audit-"))
    log = AuditLog(folder / "audit.jsonl")
    emit = measure(
        "emit (one event)",
        lambda: log.emit("tool_call", run_id="r", step_index=1, **FIELDS),
        5000,
    )
    line = (folder / "audit.jsonl").read_bytes().splitlines()[-1] + b"\n"
    fd = os.open(folder / "peer.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    peer = measure("peer: os.write of the same line", lambda: os.write(fd, line), 5000)
    os.close(fd)
    print(f"{'emit / peer':<52} {emit / peer:9.1f}x")
    while sum(1 for _ in (folder / "audit.jsonl").open("rb")) < 20_000:
        log.emit("tool_call", run_id="r", step_index=1, **FIELDS)
    measure("head at seal (this process knows the log)", log.head, 2000)

    def cold(known: dict[str, Any] | None = None) -> None:
        fresh = AuditLog(folder / "audit.jsonl")
        fresh.head(known)
        fresh.close()

    measure("head, first in a process, counting 20,000 lines", cold, 50, warm=3)
    # the run store's anchor from the last seal, 10 lines before the end
    anchor = log.head()
    for _ in range(10):
        log.emit("tool_call", run_id="r", step_index=1, **FIELDS)
    measure("head, first in a process, from the store's anchor", lambda: cold(anchor), 500)
    lines = (folder / "audit.jsonl").read_bytes().splitlines()
    anchors = [
        Anchor(n, line_digest(lines[n - 1]), f"anchor {n}") for n in range(20, len(lines), 20)
    ]
    path = folder / "audit.jsonl"
    measure(
        f"verify: chain + {len(anchors)} anchors ({len(lines)} lines)",
        lambda: verify_chain(path, anchors),
        20,
        warm=2,
    )
    coalescer = RefusalCoalescer()
    measure(
        "coalesce one refused request",
        lambda: coalescer.refused("127.0.0.1", "missing", "POST", "/mcp"),
        20000,
    )
    log.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What ``proctor audit verify`` of a long log costs, against ``sha256sum`` of the same file.

Builds a log of ``--lines`` lines (1,000,000 by default) from the writer's own parts: each
line is :class:`proctor.runtime.records.audit.AuditLog`'s record (``_record``: the fixed
fields, the sanitized event fields, in the writer's encoding) chained by ``prev`` exactly as
``_write`` chains it, written in large blocks instead of one locked ``write`` per line (which
would take minutes); a prefix of it is checked to be byte-for-byte what ``emit`` writes.
Then it runs, each ``--repeat`` times in a fresh process, and prints the CPU (user + system of
the child, ``resource.getrusage``) median and p95, and the child's peak RSS:

  sha256sum FILE                        the yardstick
  proctor audit verify --json FILE      the chain, line by line

    .venv/bin/python bench/audit_verify.py [--lines 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _launch import Launcher  # before this folder leaves the path (below)

# Run as a script, this folder leads sys.path and bench/mcp.py would shadow the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from proctor.runtime.records.audit import GENESIS, AuditLog, line_digest  # noqa: E402

EVENTS = [  # the shapes a governed run writes most: call, step, policy verdicts
    ("tool_call", {"tool": "fs.read", "call_id": "s/7", "outcome": "completed",
                   "args_digest": "sha256:" + "ab" * 32, "outputs_digest": "sha256:" + "cd" * 32}),
    ("step_settled", {"step_id": "read", "outcome": "completed", "calls": 1}),
    ("policy_decision", {"tool": "fs.write", "verdicts": [{"rule_id": "r1", "code": "ok"}],
                         "decision": "allow"}),
]  # fmt: skip


def build(path: Path, lines: int) -> None:
    """``lines`` lines as the writer chains them (see the module docstring)."""
    writer = AuditLog(path.with_suffix(".unused"))
    prev = GENESIS
    out = bytearray()
    with path.open("wb") as handle:
        for n in range(lines):
            event, fields = EVENTS[n % len(EVENTS)]
            _, encoded = writer._record(event, f"run{n // 50:06d}", n % 50, None, fields)
            line = (encoded + ',"prev":"' + prev + '"}').encode()
            out += line + b"\n"
            prev = line_digest(line)
            if len(out) > 1 << 22:
                handle.write(out)
                out.clear()
        handle.write(out)
    writer.close()


def check_faithful(folder: Path) -> None:
    """A short log from ``emit`` and one from :func:`build` differ only in ids and times."""
    import json

    real = folder / "real.jsonl"
    with AuditLog(real) as log:
        for n in range(6):
            event, fields = EVENTS[n % len(EVENTS)]
            log.emit(event, run_id=f"run{n // 50:06d}", step_index=n % 50, **fields)
    made = folder / "made.jsonl"
    build(made, 6)
    for a, b in zip(real.read_bytes().splitlines(), made.read_bytes().splitlines(), strict=True):
        x, y = json.loads(a), json.loads(b)
        assert list(x) == list(y), (x, y)
        for key in ("event_id", "timestamp", "prev", "sequence"):
            x.pop(key), y.pop(key)
        assert x == y, (x, y)


def child(launcher: Launcher, argv: list[str], cwd: Path) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS (MiB) of one run of ``argv`` in ``cwd``, a
    fresh process started by ``launcher`` (its own peak, see ``_launch``)."""
    code, cpu, rss, _, _ = launcher.run(argv, cwd=str(cwd))
    if code != 0:
        raise SystemExit(f"{argv[0]} failed ({code})")
    return cpu, rss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    proctor = str(Path(sys.executable).with_name("proctor"))
    launcher = Launcher()  # while this process is small
    with launcher, tempfile.TemporaryDirectory(prefix="proctor-bench-audit-") as tmp:
        folder = Path(tmp)
        check_faithful(folder)
        (folder / "ws" / ".proctor").mkdir(parents=True)
        log = folder / "ws" / "other.jsonl"
        build(log, args.lines)
        print(f"log: {args.lines:,} lines, {os.path.getsize(log) / 2**20:.0f} MiB")
        rows = {}
        for label, argv in (
            ("sha256sum FILE", ["sha256sum", str(log)]),
            ("proctor audit verify --json FILE", [proctor, "audit", "verify", "--json", str(log)]),
        ):
            cpu, rss = [], 0.0
            for _ in range(args.repeat):
                spent, peak = child(launcher, argv, folder / "ws")
                cpu.append(spent)
                rss = max(rss, peak)
            cpu.sort()
            rows[label] = statistics.median(cpu)
            p95 = cpu[min(len(cpu) - 1, int(len(cpu) * 0.95))]
            print(
                f"{label:<36} CPU median {rows[label]:7.3f} s  p95 {p95:7.3f} s"
                f"  peak RSS {rss:6.1f} MiB"
            )
        ratio = rows["proctor audit verify --json FILE"] / rows["sha256sum FILE"]
        print(f"verify / sha256sum CPU: {ratio:.2f}x (target <= 2x; RSS target <= 64 MiB)")


if __name__ == "__main__":
    main()

"""Shared set-up of the sandbox tests: whether bubblewrap works here, a probe program that
tries to cross the boundary, and readers of a run's call records and receipts.

The sandbox tests skip only when bubblewrap does not work here *and* ``PROCTOR_REQUIRE_SANDBOX``
is unset; CI sets it (``.ci/run``), so there a missing bubblewrap fails them instead.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from proctor.receipts.model import parse_envelope
from proctor.runtime.boundary.sandbox import probe
from proctor.runtime.engine.session import Session

BWRAP = shutil.which("bwrap")
WORKS = probe(BWRAP).available

needs_bwrap = pytest.mark.skipif(
    not WORKS and os.environ.get("PROCTOR_REQUIRE_SANDBOX") != "1",
    reason="bubblewrap does not work here (set PROCTOR_REQUIRE_SANDBOX=1 to fail instead)",
)


def call_records(s: Session, run_id: str | None) -> list[Any]:
    """The run's calls as the store settled them."""
    return list(s.store.calls(run_id or ""))


def call_receipts(s: Session, receipt_id: str | None) -> list[dict[str, Any]]:
    """The bodies of every call receipt under a run receipt."""
    bodies: list[dict[str, Any]] = []
    pending = [receipt_id or ""]
    while pending:
        data = s.receipts.get(pending.pop())
        assert data is not None
        envelope = parse_envelope(data)
        if envelope.kind == "call":
            bodies.append(envelope.body)
        pending.extend(c.receipt_id for c in envelope.children)
    return bodies


def alive(marker: str) -> list[psutil.Process]:
    """Host processes (not zombies) whose command line holds ``marker``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmdline = p.info["cmdline"] or []
        if p.info["status"] != psutil.STATUS_ZOMBIE and any(marker in a for a in cmdline):
            found.append(p)
    return found


def wait_until(check: Any, what: str, seconds: float = 20.0) -> None:
    """Poll ``check`` until it is true; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def result_json(env: Any, ops: list[str]) -> dict[str, Any]:
    """The probe's report (its stdout), by the argument of each operation in ``ops``.

    The probe reports a list in order, so no path (``credentials.key``, say) becomes a JSON key
    the output scrubber would take for a secret-named field.
    """
    answers = json.loads(env.result["stdout"])
    return dict(zip(ops[1::2], answers, strict=True))


# Tries each attack named on its command line and prints what happened, as JSON. Reads report
# "denied" or the sha256 of what was read (never the content); writes report "denied" or "done".
PROBE = r"""
import hashlib, json, os, socket, sys

def read(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "denied"

def write(path):
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write("planted")
        return "done"
    except OSError:
        return "denied"

report = []
args = sys.argv[1:]
while args:
    op, arg = args.pop(0), args.pop(0)
    if op == "read":
        report.append(read(arg))
    elif op == "write":
        report.append(write(arg))
    elif op == "rename":
        src, dst = arg.split("|")
        try:
            os.rename(src, dst)
            report.append("done")
        except OSError:
            report.append("denied")
    elif op == "connect":
        host, port = arg.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
            report.append("done")
        except OSError:
            report.append("denied")
    elif op == "scan":
        hits = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        if arg.encode() in f.read():
                            hits.append(pid)
                except OSError:
                    pass
        report.append({"hits": hits, "ppid": os.getppid()})
print(json.dumps(report))
"""


def write_probe(root: Path) -> Path:
    """Write the probe into the workspace's ``tools/``."""
    path = root / "tools" / "attack.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(PROBE)
    return path

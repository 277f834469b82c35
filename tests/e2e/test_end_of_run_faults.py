"""The end of a run on a full disk: a code, no traceback, a resumable run, a log that verifies.

The disk is made full for real with ``RLIMIT_FSIZE`` in the child process (SIGXFSZ ignored,
so a write past the limit fails ``EFBIG`` and the one that reaches it is cut short): the file
we aim at is padded to be the largest one proctor writes, and the limit is set just above its
size, so that file alone runs out of room. Lifting the limit is running the next command
without it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

from proctor.runtime.records.audit import AuditLog
from tests.e2e.conftest import REPO, Result, Ws

HELLO = str(REPO / "examples/hello-world")
HINT = re.compile(r"`proctor resume ([0-9a-f]{32}) -`")


def limited(ws: Ws, limit: int, *args: str, env: dict[str, str] | None = None) -> Result:
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws.root,
        env={**ws.env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=preexec,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _log(ws: Ws) -> Path:
    return ws.root / ".proctor" / "audit.jsonl"


def _events(ws: Ws) -> list[dict[str, object]]:
    return [json.loads(line) for line in _log(ws).read_bytes().splitlines()]


def _pad_log(ws: Ws, megabytes: int = 4) -> int:
    """Grow the audit log with valid, chained events until it is the largest file."""
    with AuditLog(_log(ws)) as log:
        for _ in range(megabytes * 256):
            log.emit("padding", run_id=None, step_index=None, pad="x" * 4000)
    return _log(ws).stat().st_size


def _warm(ws: Ws) -> None:
    """One run first, so the run store and the receipt store exist at their working size."""
    r = ws.proctor("run", HELLO, "-i", "message=warm", "--json")
    assert r.code == 0, r.stderr


def _unsealed(r: Result) -> str:
    assert r.code == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    assert "error[seal_failed]" in r.stderr, r.stderr
    match = HINT.search(r.stderr)
    assert match is not None, r.stderr
    return match.group(1)


def _resumes(ws: Ws, run_id: str) -> dict[str, object]:
    history = ws.proctor("history", run_id, "--json")
    assert history.code == 0 and history.json()["status"] == "running", history.stdout
    done = ws.proctor("resume", run_id, "-", "--json", stdin="{}")
    assert done.code == 0, done.stdout + done.stderr
    env: dict[str, object] = done.json()
    assert (env["status"], env["outcome"]) == ("sealed", "completed")
    verified = ws.proctor("verify", str(env["receipt_id"]))
    assert verified.code == 0, verified.stdout
    return env


def _log_holds(ws: Ws) -> None:
    r = ws.proctor("audit", "verify", "--json")
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["ok"] is True and r.json()["anchors"] >= 2
    check = ws.proctor("check")
    assert "ok   records/audit_log" in check.stdout, check.stdout


def test_a_full_disk_under_the_audit_log_leaves_the_run_resumable(ws: Ws) -> None:
    _warm(ws)
    size = _pad_log(ws)
    # room for less than one line: the first append is cut short, every later one refused
    r = limited(ws, size + 100, "run", HELLO, "-i", "message=full", "--json")
    run_id = _unsealed(r)
    assert "audit_write_failed" in r.stderr
    # under --json the error is a proctor.error.v1 object on stdout (never an envelope)
    error = json.loads(r.stdout)
    assert error["schema"] == "proctor.error.v1" and error["code"] == "seal_failed"
    # the half-written line was cut off again at once: the log still verifies
    assert _log(ws).stat().st_size == size
    assert not any(e["run_id"] == run_id for e in _events(ws))
    assert ws.proctor("audit", "verify").code == 0
    env = _resumes(ws, run_id)
    # the events the full disk refused are counted in the run record and shown
    assert isinstance(env["audit_lost"], int) and env["audit_lost"] >= 2
    assert any("could not be written" in str(n) for n in env["notes"]), env["notes"]  # type: ignore[attr-defined]
    sealed = [e for e in _events(ws) if e["event"] == "run_sealed" and e["run_id"] == run_id]
    assert [e["receipt_id"] for e in sealed] == [env["receipt_id"]]
    _log_holds(ws)


def test_a_line_torn_by_a_crash_on_a_full_disk_is_repaired_by_the_next_command(ws: Ws) -> None:
    _warm(ws)
    # A run of the same skill with an input of the same length writes lines of the same
    # lengths (digests, ids and times are fixed-width), so the warm run's lines tell how much
    # room lets every line but the last one, run_sealed, in whole.
    lines = _log(ws).read_bytes().splitlines(keepends=True)
    assert [json.loads(line)["event"] for line in lines][-1] == "run_sealed"
    before_seal = sum(len(line) for line in lines[:-1])
    size = _pad_log(ws)
    # the run_sealed append is cut short by the full disk, and the process dies before it can
    # cut it back: a torn last line, as a crash mid-write leaves it
    kill = {"PROCTOR_TEST_HOOKS": "1", "PROCTOR_TEST_KILL_AT": "audit.torn_write:1"}
    r = limited(ws, size + before_seal + 100, "run", HELLO, "-i", "message=torn", env=kill)
    assert r.code == -signal.SIGKILL, r.stderr
    torn = _log(ws).read_bytes()[size + before_seal :]
    assert len(torn) == 100 and torn.startswith(b"{") and b"\n" not in torn
    whole = _log(ws).read_bytes()[: size + before_seal].splitlines()
    assert [json.loads(line)["event"] for line in whole[-3:]] == [
        "run_started",
        "tool_call",
        "tool_call",
    ]
    broken = ws.proctor("audit", "verify")
    assert broken.code == 1 and "incomplete" in broken.stdout
    run_id = ws.proctor("history", "--json").json()["runs"][0]["run_id"]
    # the next command that writes the log (the resume, with room again) repairs it first
    env = _resumes(ws, run_id)
    repaired = [e for e in _events(ws) if e["event"] == "audit_repaired"]
    assert len(repaired) == 1
    assert repaired[0]["torn_bytes"] == 100 and repaired[0]["moved_to"] == "audit.jsonl.torn"
    assert (ws.root / ".proctor" / "audit.jsonl.torn").read_bytes() == torn + b"\n"
    assert env["outcome"] == "completed"
    _log_holds(ws)


def test_a_full_disk_under_the_receipts_leaves_the_run_resumable(ws: Ws) -> None:
    _warm(ws)
    index = ws.root / ".proctor" / "receipts" / "index.jsonl"
    with index.open("a", encoding="utf-8") as handle:
        for n in range(40_000):  # listed receipts of kind call: nothing reads them as anchors
            entry = {"receipt_id": f"sha256:{n:064x}", "kind": "call", "outcome": "completed"}
            handle.write(json.dumps(entry, separators=(",", ":")) + "\n")
    size = index.stat().st_size
    assert size > max(_log(ws).stat().st_size, (ws.root / ".proctor/runs.sqlite").stat().st_size)
    r = limited(ws, size + 50, "run", HELLO, "-i", "message=full", "--json")
    run_id = _unsealed(r)
    assert "receipt_store_io" in r.stderr
    # no half index line was left behind, and no run_sealed line names a receipt not written
    assert index.stat().st_size == size
    assert not any(e["event"] == "run_sealed" and e["run_id"] == run_id for e in _events(ws))
    env = _resumes(ws, run_id)
    assert env["audit_lost"] == 0
    _log_holds(ws)
    assert os.path.getsize(index) > size

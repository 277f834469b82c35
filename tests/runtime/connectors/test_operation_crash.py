"""kill -9 after a write was sent and before it settled: the readback reconciles it, and the
provider sees exactly one write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.runtime.connectors.support import CANARY, LABEL, READ, tracker_workspace
from tests.runtime.connectors.tracker import TrackerServer


def _proctor(ws: Path, *args: str, kill_at: str | None = None, stdin: str | None = None) -> Any:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PROCTOR_HOME": str(ws / ".home"),
        "TRACKER_TOKEN": CANARY,
        "PROCTOR_TEST_HOOKS": "1",
    }
    if kill_at is not None:
        env["PROCTOR_TEST_KILL_AT"] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _run_id(ws: Path) -> str:
    import sqlite3

    conn = sqlite3.connect(str(ws / ".proctor" / "runs.sqlite"))
    try:
        (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone()
    finally:
        conn.close()
    return str(run_id)


def test_a_write_killed_before_it_settled_is_confirmed_by_readback(tmp_path: Path) -> None:
    server = TrackerServer()
    try:
        server.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
        ws = tracker_workspace(tmp_path / "ws", server.tracker.url, READ, LABEL)
        killed = _proctor(
            ws,
            "run",
            "triage",
            "-i",
            "issue=7",
            "-i",
            "label=bug",
            "--json",
            kill_at="call.executed:1",
        )
        assert killed.returncode == -9, killed.stderr
        assert server.tracker.writes == 1  # sent, never settled
        done = _proctor(ws, "resume", _run_id(ws), "-", "--json", stdin="{}")
        doc = json.loads(done.stdout)
        assert doc["outcome"] == "completed", doc
        assert server.tracker.writes == 1  # confirmed by the readback, not sent again
        assert server.tracker.hits["GET /api/issues/7"] == 2  # the read step and the readback
        for text in (killed.stdout, killed.stderr, done.stdout, done.stderr):
            assert CANARY not in text
    finally:
        server.stop()


def test_a_write_whose_readback_does_not_match_asks_a_person(tmp_path: Path) -> None:
    server = TrackerServer()
    try:
        server.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
        ws = tracker_workspace(tmp_path / "ws", server.tracker.url, LABEL)
        killed = _proctor(
            ws,
            "run",
            "triage",
            "-i",
            "issue=7",
            "-i",
            "label=bug",
            "--json",
            kill_at="call.executed:1",
        )
        assert killed.returncode == -9, killed.stderr
        server.tracker.issues["7"]["label"] = "someone-else"  # the provider changed it since
        paused = json.loads(_proctor(ws, "resume", _run_id(ws), "-", "--json", stdin="{}").stdout)
        assert paused["status"] == "needs_approval", paused
        assert [r["address"] for r in paused["requests"]] == ["label/retry"]
        assert server.tracker.writes == 1
    finally:
        server.stop()

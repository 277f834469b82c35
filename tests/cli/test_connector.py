"""``proctor connector list|inspect`` and ``proctor check`` on connectors, through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.runtime.connectors.support import LABEL, READ, tracker_workspace


def proctor(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "PROCTOR_HOME": str(ws / ".home")}
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_list_and_inspect_a_packages_connector(tmp_path: Path) -> None:
    ws = tracker_workspace(tmp_path / "ws", "http://127.0.0.1:9", READ, LABEL)
    listed = proctor(ws, "connector", "list", "--skill", "triage", "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["schema"] == "proctor.connector.list.v1"
    (row,) = doc["connectors"]
    assert row["name"] == "tracker" and row["origin"] == "http://127.0.0.1:9"
    assert "issue.label" in row["operations"]
    shown = proctor(ws, "connector", "inspect", "tracker", "--skill", "triage", "--json")
    assert shown.returncode == 0, shown.stderr
    inspected = json.loads(shown.stdout)
    assert inspected["schema"] == "proctor.connector.v1"
    ops = {op["operation"]: op for op in inspected["operations"]}
    assert ops["issue.comment"]["approval"] == "required"
    assert ops["issue.label"]["readback"] == "issue.read"
    assert ops["issue.label"]["cost"] == {"usd_micro": 250, "per": "call"}
    assert "idempotency_key" in ops["issue.label"]["input_schema"]["required"]
    missing = proctor(ws, "connector", "inspect", "nope", "--skill", "triage")
    assert missing.returncode == 2 and "unknown_connector" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_check_refuses_a_broken_connector_and_an_unknown_operation(tmp_path: Path) -> None:
    ws = tracker_workspace(tmp_path / "ws", "http://127.0.0.1:9", READ, LABEL)
    good = proctor(ws, "check", "--json")
    checks = {c["name"]: c for p in json.loads(good.stdout)["phases"] for c in p["checks"]}
    assert checks["connectors"]["passed"], checks["connectors"]
    manifest = ws / "skills" / "triage" / "connectors" / "tracker" / "connector.yaml"
    manifest.write_text(manifest.read_text().replace("issue.read:", "issue.fetch:", 1))
    bad = proctor(ws, "check", "--json")
    assert bad.returncode != 0
    checks = {c["name"]: c for p in json.loads(bad.stdout)["phases"] for c in p["checks"]}
    codes = {f["code"] for f in checks["connectors"]["findings"]}
    assert "readback_unknown" in codes, checks["connectors"]

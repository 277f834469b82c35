"""One identity per package, decided by where it came from: two packages that give themselves
the same name never see each other's state nor suppress each other's writes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.receipts.model import parse_envelope
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.skills import load_skill, local_identity
from tests.runtime.connectors.support import CANARY, CONNECTOR, RUN_YAML
from tests.runtime.connectors.tracker import TrackerServer
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_workspace,
    session,
)

SKILL_MD = "---\nname: summ\ndescription: The same name in every folder.\n---\nBody.\n"

STATE = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {value: {type: string}}
      required: [value]
    steps:
      - id: before
        tool: store.key.get
        inputs: {key: shared}
      - id: put
        tool: store.key.put
        idempotency_key: $input.value
        inputs: {key: shared, value: $input.value}
    result_from: [before, put]
"""

LABEL = """      - id: label
        operation: tracker/issue.label
        idempotency_key: "42"
        inputs: {issue: $input.issue, label: $input.label}
"""


def _package(folder: Path, run_yaml: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)  # the name every one of them chooses
    (folder / "run.yaml").write_text(run_yaml)
    return folder


def test_identity_is_where_the_package_came_from(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    a = _package(ws / "skills" / "summ", STATE)
    b = _package(ws / "team" / "summ", STATE)
    outside = _package(tmp_path / "elsewhere" / "summ", STATE)
    assert load_skill("skills/summ", cwd=ws, workspace_root=ws).identity == "local:skills/summ"
    assert load_skill(str(b), cwd=ws, workspace_root=ws).identity == "local:team/summ"
    far = load_skill(str(outside), cwd=ws, workspace_root=ws).identity
    assert far.startswith("local:outside/") and str(tmp_path) not in far
    assert local_identity(a, ws) != local_identity(b, ws)


def test_two_packages_of_one_name_never_share_state(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    _package(ws / "skills" / "summ", STATE)
    _package(ws / "team" / "summ", STATE)
    first = session(ws).run("skills/summ", inputs={"value": "alpha-private"}, cwd=ws)
    assert first.outcome == "completed", first.refusal
    second = session(ws).run("team/summ", inputs={"value": "beta"}, cwd=ws)
    assert second.outcome == "completed", second.refusal
    assert second.result["before"]["found"] is False  # it never read the first one's value
    again = session(ws).run("skills/summ", inputs={"value": "alpha-2"}, cwd=ws)
    assert again.result["before"]["value"] == "alpha-private"  # nor overwrote it


def test_the_identity_is_in_the_run_record_history_and_receipt(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    _package(ws / "team" / "summ", STATE)
    s = session(ws)
    env = s.run("team/summ", inputs={"value": "v"}, cwd=ws)
    assert env.outcome == "completed", env.refusal
    record = s.store.get_run(env.run_id)
    assert record is not None and record.identity == "local:team/summ"
    assert [r.identity for r in s.store.list_runs(limit=5)] == ["local:team/summ"]
    data = ReceiptStore(ws / ".proctor" / "receipts").get(env.receipt_id or "")
    body = parse_envelope(data or b"").body
    assert body["identity"] == "local:team/summ" and "package" not in body
    shown = subprocess.run(
        [sys.executable, "-m", "proctor", "history", "--json"],
        cwd=ws, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(shown.stdout)["runs"][0]["identity"] == "local:team/summ"
    one = subprocess.run(
        [sys.executable, "-m", "proctor", "history", env.run_id],
        cwd=ws, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "package: local:team/summ" in one.stdout


def test_a_folder_named_like_a_core_skill_shares_nothing_with_it(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    folder = _package(ws / "skills" / "repo-summary", STATE)
    skill = load_skill(str(folder), cwd=ws, workspace_root=ws)
    assert skill.identity == "local:skills/repo-summary"
    from proctor.runtime.packages.resolve import resolve_skill

    core = resolve_skill("proctor/repo-summary", cwd=ws, workspace_root=ws)
    assert core.identity == "core:repo-summary" != skill.identity


@pytest.fixture
def server() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


def test_two_packages_writing_with_one_key_each_reach_the_provider(
    tmp_path: Path, server: TrackerServer
) -> None:
    ws = make_workspace(tmp_path / "ws")
    (ws / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    for where in ("skills/summ", "team/summ"):
        folder = _package(ws / where, RUN_YAML.format(steps=LABEL))
        (folder / "connectors" / "tracker").mkdir(parents=True)
        connector = CONNECTOR.format(url=server.tracker.url)
        (folder / "connectors" / "tracker" / "connector.yaml").write_text(connector)
    inputs = {"issue": "7", "label": "bug"}
    secrets = {"tracker": CANARY}
    for where in ("skills/summ", "team/summ"):
        env = session(ws).run(where, inputs=inputs, cwd=ws, request_secrets=secrets)
        assert env.outcome == "completed", env.refusal
    assert server.tracker.writes == 2  # the second package's write was sent, not skipped
    keys = server.tracker.idempotency_keys
    assert len(keys) == 2 and keys[0] != keys[1]
    shutil.rmtree(ws / "skills" / "summ" / "connectors")  # nothing else is left to compare

"""PROCTOR_SANDBOX: required refuses without bubblewrap and nothing runs; auto runs as a
trusted host process, warned about in the envelope and marked in the receipt; off is audited.

"bubblewrap unavailable" is forced without mocks: ``PROCTOR_BWRAP`` names a missing file (or a
program that is not bubblewrap), exactly as an operator could.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.agents.sessions import AgentSession
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.runtime.records.verify_folder import verify_receipt
from tests.runtime.boundary.sandbox_support import call_receipts, call_records, needs_bwrap
from tests.runtime.driver_support import (
    _OPEN,
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
)

SIGNER = signer_from_seed(bytes(range(32)))


def _skill(root: Path) -> None:
    import sys

    make_skill(
        root,
        "cmd",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: run
        tool: command.execute
        inputs: {{argv: ["{sys.executable}", "tools/count.py", "counter.txt"]}}
""",
    )


def _session(root: Path, cls: type[Session] = Session, **environ: str) -> Session:
    ticks = itertools.count()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    opened = cls(
        Workspace(root),
        environ={"PROCTOR_HOME": str(root / ".home"), **environ},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
        signer=SIGNER,
    )
    _OPEN.append(opened)
    return opened


def _audit(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".proctor" / "audit.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    _skill(root)
    return root


@pytest.fixture
def missing(tmp_path: Path) -> str:
    return str(tmp_path / "no-such-bwrap")


def test_required_without_bubblewrap_refuses_and_nothing_runs(ws: Path, missing: str) -> None:
    s = _session(ws, PROCTOR_SANDBOX="required", PROCTOR_BWRAP=missing)
    env = s.run("cmd", cwd=ws)
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "sandbox_unavailable"
    assert "bubblewrap" in env.refusal.message and missing not in env.refusal.message
    assert not (ws / "counter.txt").exists()
    (call,) = call_records(s, env.run_id)
    assert call.state == "settled" and call.outcome == "refused"
    refused = [e for e in _audit(ws) if e["event"] == "call_refused"]
    assert [e["code"] for e in refused] == ["sandbox_unavailable"]
    assert not [e for e in _audit(ws) if e["event"] == "tool_call"]


def test_required_refuses_before_a_person_is_asked(ws: Path, missing: str) -> None:
    s = _session(ws, PROCTOR_SANDBOX="required", PROCTOR_BWRAP=missing)
    env = s.run("cmd", authority=authority(effects="ask"), cwd=ws)
    assert env.status == "sealed" and env.refusal is not None
    assert env.refusal.code == "sandbox_unavailable"
    assert not s.store.requests(env.run_id or "")


def test_a_program_that_is_not_bubblewrap_is_unavailable_too(ws: Path) -> None:
    s = _session(ws, PROCTOR_SANDBOX="required", PROCTOR_BWRAP="/bin/false")
    env = s.run("cmd", cwd=ws)
    assert env.refusal is not None and env.refusal.code == "sandbox_unavailable"
    assert not (ws / "counter.txt").exists()


def test_auto_without_bubblewrap_runs_as_a_trusted_host_process(ws: Path, missing: str) -> None:
    s = _session(ws, PROCTOR_BWRAP=missing)  # auto: the Python API's and the CLI's default
    env = s.run("cmd", cwd=ws)
    assert env.outcome == "completed", env.refusal
    assert (ws / "counter.txt").read_text() == "1"
    (entry,) = env.trace
    assert any(w.startswith("trusted_host_process") for w in entry.warnings), entry.warnings
    (body,) = call_receipts(s, env.receipt_id)
    assert body["sandbox"] == {
        "used": "none",
        "mode": "auto",
        "network": True,
        "verified": False,
        "checks": [],
        "toolchains": [],
    }
    assert {"rule_id": "sandbox", "code": "trusted_host_process", "enforcement": "warn"} in (
        body["verdicts"]
    )
    folder = ws / ".proctor" / "receipts"
    result = verify_receipt(env.receipt_id or "", receipts_dir=folder, public_key=SIGNER.public_key)
    assert result.ok, result


def test_off_runs_unsandboxed_and_every_call_is_audited(ws: Path) -> None:
    s = _session(ws, PROCTOR_SANDBOX="off")
    env = s.run("cmd", cwd=ws)
    assert env.outcome == "completed", env.refusal
    disabled = [e for e in _audit(ws) if e["event"] == "sandbox_disabled"]
    assert [e["tool"] for e in disabled] == ["command.execute"]
    (body,) = call_receipts(s, env.receipt_id)
    assert body["sandbox"]["used"] == "none" and body["sandbox"]["mode"] == "off"
    assert any(v["code"] == "sandbox_disabled" for v in body["verdicts"])
    assert any(w.startswith("sandbox_disabled") for w in env.trace[0].warnings)


def test_an_unknown_mode_blocks_the_run_before_any_step(ws: Path) -> None:
    env = _session(ws, PROCTOR_SANDBOX="sometimes").run("cmd", cwd=ws)
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "sandbox_setting_invalid"
    assert not (ws / "counter.txt").exists()


def test_managed_agent_sessions_require_the_sandbox(ws: Path, missing: str) -> None:
    s = _session(ws, AgentSession, PROCTOR_BWRAP=missing)
    env = s.run("cmd", cwd=ws)
    assert env.refusal is not None and env.refusal.code == "sandbox_unavailable"
    assert not (ws / "counter.txt").exists()


@pytest.mark.parametrize("starter", [AgentSession, Session])
def test_a_run_keeps_the_strictest_default_it_was_driven_under(
    ws: Path, missing: str, starter: type[Session]
) -> None:
    # started (and paused on a person) by a session that requires the sandbox, or by one that
    # does not (the control); resumed by a plain session whose own default is auto
    paused = _pause_on_a_person(ws, _session(ws, starter, PROCTOR_BWRAP=missing))
    resumer = _session(ws, Session, PROCTOR_BWRAP=missing)
    done = resumer.resume(paused.run_id or "", approve(paused))
    if starter is AgentSession:
        assert done.refusal is not None and done.refusal.code == "sandbox_unavailable"
        assert not (ws / "counter.txt").exists()
    else:
        assert done.outcome == "completed", done.refusal
        assert (ws / "counter.txt").read_text() == "1"


def _pause_on_a_person(ws: Path, s: Session) -> Any:
    """Start a run that waits on a person before its command (an ask step first)."""
    import sys

    make_skill(
        ws,
        "cmd",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: confirm
        ask: {{reason: Run it?}}
      - id: run
        tool: command.execute
        inputs: {{argv: ["{sys.executable}", "tools/count.py", "counter.txt"]}}
""",
    )
    env = s.run("cmd", cwd=ws)
    assert env.status == "needs_approval", env
    return env


@needs_bwrap
def test_a_program_hidden_from_the_sandbox_is_not_started(ws: Path) -> None:
    home = ws / ".home"
    home.mkdir(mode=0o700)
    tool = home / "tool.sh"
    tool.write_text("#!/bin/sh\necho ran > ran.txt\n")
    tool.chmod(0o700)
    make_skill(
        ws,
        "hidden",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: run
        tool: command.execute
        inputs: {{argv: ["{tool}"]}}
""",
    )
    env = _session(ws, PROCTOR_SANDBOX="required").run("hidden", cwd=ws)
    assert env.refusal is not None and env.refusal.code == "command_not_started"
    assert not (ws / "ran.txt").exists()

"""proctor run / resume as a person uses them: pause (exit 10), answer from any folder, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO

SKILL = """---
name: slow
description: A step, a command that takes a while, and a last step.
---
"""

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {seconds: {type: string}}
      required: [seconds]
    steps:
      - id: first
        tool: echo
        inputs: {text: one}
      - id: work
        tool: command.execute
        inputs: {argv: [PY, tools/slow.py, $input.seconds], timeout_seconds: 120}
      - id: last
        tool: echo
        inputs: {text: three}
"""

SLOW = """import sys, time, pathlib
pathlib.Path("started").write_text("1")
time.sleep(float(sys.argv[1]))
p = pathlib.Path("counter.txt")
p.write_text(str(int(p.read_text()) + 1 if p.exists() else 1))
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "tools" / "slow.py").write_text(SLOW)
    (root / "sub" / "deeper").mkdir(parents=True)
    skill = root / "skills" / "slow"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL)
    (skill / "run.yaml").write_text(RUN_YAML.replace("PY", json.dumps(sys.executable)))
    return root


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    return env | {"PROCTOR_HOME": str(root / ".home")}


def _proctor(
    root: Path, *args: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=cwd or root,
        env=_env(root),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _start(root: Path, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", "run", "slow", "-i", f"seconds={seconds}", "--json"],
        cwd=root,
        env=_env(root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while not path.exists():
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.02)


def _run_id(root: Path) -> str:
    out = _proctor(root, "history", "--json")
    return str(json.loads(out.stdout)["runs"][0]["run_id"])


def test_pause_exits_10_and_resume_works_from_a_subfolder(ws: Path) -> None:
    out = _proctor(
        ws, "run", "slow", "-i", "seconds=0", "--json", "--run-authority", '{"effects": "ask"}'
    )
    assert out.returncode == 10, out.stderr
    env = json.loads(out.stdout)
    assert env["status"] == "needs_approval"
    assert env["resume_command"] == f"proctor resume {env['run_id']} -"
    assert not (ws / "counter.txt").exists()
    doc = env["answers_template"]
    doc["approvals"]["work"].update({"approved": True, "reason": "fine"})
    done = _proctor(
        ws, "resume", env["run_id"], "-", "--json", stdin=json.dumps(doc), cwd=ws / "sub" / "deeper"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "completed"
    assert (ws / "counter.txt").read_text() == "1"
    again = _proctor(ws, "resume", env["run_id"], "-", "--json", stdin=json.dumps(doc))
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "sealed"
    assert (ws / "counter.txt").read_text() == "1"


def test_human_output_shows_the_diff_template_and_command(ws: Path) -> None:
    out = _proctor(ws, "run", "slow", "-i", "seconds=0", "--run-authority", '{"effects": "ask"}')
    assert out.returncode == 10
    assert "waiting approval at work" in out.stdout
    assert "argv:" in out.stdout and "proctor resume" in out.stdout


def test_help_documents_exit_codes() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "proctor", "run", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert "10 paused" in out.stdout and "143" in out.stdout and "130" in out.stdout


def test_sigterm_finishes_the_effect_records_it_and_exits_143(ws: Path) -> None:
    proc = _start(ws, 1.0)
    _wait_for(ws / "started")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert (ws / "counter.txt").read_text() == "1"  # the in-flight command finished
    run_id = _run_id(ws)
    hist = json.loads(_proctor(ws, "history", run_id, "--json").stdout)
    assert hist["status"] == "stopped"
    done = _proctor(ws, "resume", run_id, "-", "--json", stdin="{}")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert [t["step"] for t in body["trace"]] == ["first", "work", "last"]
    assert (ws / "counter.txt").read_text() == "1"  # not run again


def test_sigint_kills_the_command_within_2s_and_settles_it_cancelled(ws: Path) -> None:
    """Ctrl-C ends the call rather than leaving it in doubt: the command's tree is killed,
    its call settled ``cancelled``, the run ``stopped``, and nothing waits on a person."""
    proc = _start(ws, 60)
    _wait_for(ws / "started")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    # far short of the command's 60 s: it was killed, not waited for (a loaded machine can
    # take seconds to start and end the processes involved)
    assert time.monotonic() - sent < 30
    assert not (ws / "counter.txt").exists()
    run_id = _run_id(ws)
    hist = json.loads(_proctor(ws, "history", run_id, "--json").stdout)
    assert hist["status"] == "stopped"
    work = [c for c in hist["calls"] if c["step"] == "work"]
    assert [(c["state"], c["outcome"]) for c in work] == [("settled", "cancelled")]
    assert [r for r in hist["requests"] if r["state"] == "open"] == []
    pending = json.loads(_proctor(ws, "pending", "--json").stdout)
    assert pending.get("requests", []) == []


def test_a_second_signal_exits_at_once(ws: Path) -> None:
    proc = _start(ws, 20)
    _wait_for(ws / "started")
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)  # let the first handler run; the second must not wait for the command
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert time.monotonic() - sent < 5

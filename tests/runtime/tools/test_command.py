"""command.execute: exact argv, no shell, contained cwd, timeout kills the tree, bounded output."""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path

import psutil
import pytest

from proctor.runtime.tools.command import COMMAND_EXECUTE
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

PY = sys.executable


def _skill(root: Path, args: str) -> None:
    make_skill(
        root,
        "cmd",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: run
        tool: command.execute
        inputs: {args}
""",
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


def test_argv_is_exact_and_no_shell_expands_it(ws: Path) -> None:
    _skill(
        ws, f'{{argv: ["{PY}", "-c", "import sys; print(sys.argv[1:])", "$$HOME; rm -rf x", "*"]}}'
    )
    env = session(ws).run("cmd", cwd=ws)
    assert env.outcome == "completed", env.refusal
    out = env.result
    assert out["stdout"].strip() == "['$HOME; rm -rf x', '*']"
    assert out["exit_code"] == 0
    assert out["stdout_digest"].startswith("sha256:")


def test_counter_runs_once_and_records_digests(ws: Path) -> None:
    _skill(ws, f'{{argv: ["{PY}", "tools/count.py", "counter.txt"]}}')
    s = session(ws)
    env = s.run("cmd", cwd=ws)
    assert env.outcome == "completed"
    assert (ws / "counter.txt").read_text() == "1"
    (call,) = s.store.calls(env.run_id or "")
    assert call.state == "settled" and call.result["effect"] == "process"


def test_cwd_outside_the_workspace_is_refused(ws: Path) -> None:
    _skill(ws, f'{{argv: ["{PY}", "-c", "open(\'escaped\', \'w\')"], cwd: ".."}}')
    env = session(ws).run("cmd", cwd=ws)
    assert env.outcome == "blocked"
    assert not (ws.parent / "escaped").exists()


def _alive(marker: str) -> list[psutil.Process]:
    """Host processes whose command line holds ``marker`` (pids inside a sandbox are its own)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmdline = p.info["cmdline"] or []
        if p.info["status"] != psutil.STATUS_ZOMBIE and any(marker in a for a in cmdline):
            found.append(p)
    return found


def test_timeout_kills_the_whole_tree(ws: Path) -> None:
    marker = f"proctor-grandchild-{secrets.token_hex(6)}"
    script = (
        "import subprocess, sys, time; "
        f"c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '{marker}']); "
        "open('child.pid', 'w').write(str(c.pid)); time.sleep(60)"
    )
    _skill(ws, f'{{argv: ["{PY}", "-c", "{script}"], timeout_seconds: 1.5}}')
    started = time.monotonic()
    env = session(ws).run("cmd", cwd=ws)
    assert time.monotonic() - started < 30
    assert env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "command_timeout"
    assert (ws / "child.pid").read_text()  # the grandchild was started
    deadline = time.monotonic() + 10
    while _alive(marker):
        assert time.monotonic() < deadline, "the grandchild survived the timeout"
        time.sleep(0.05)


def test_output_is_bounded_counted_in_full_and_digested_as_returned(ws: Path) -> None:
    _skill(
        ws,
        f'{{argv: ["{PY}", "-c", "print(\'x\' * 100000)"], max_output_bytes: 1000}}',
    )
    env = session(ws).run("cmd", cwd=ws)
    out = env.result
    assert len(out["stdout"]) == 1000 and out["stdout_truncated"] is True
    assert out["stdout_bytes"] == 100001
    import hashlib

    # the digest is of the text the result carries (see docs/credentials.md: no raw-stream
    # digest that could confirm a guessed secret)
    assert out["stdout_digest"] == "sha256:" + hashlib.sha256(b"x" * 1000).hexdigest()


def test_nonzero_exit_fails_unless_check_false(ws: Path) -> None:
    _skill(ws, f'{{argv: ["{PY}", "-c", "raise SystemExit(3)"]}}')
    env = session(ws).run("cmd", cwd=ws)
    assert env.refusal is not None and env.refusal.code == "command_failed"


def test_under_ask_it_pauses_with_argv_cwd_and_digest_and_runs_once_approved(ws: Path) -> None:
    _skill(ws, f'{{argv: ["{PY}", "tools/count.py", "counter.txt"]}}')
    s = session(ws)
    env = s.run("cmd", authority=authority(effects="ask"), cwd=ws)
    assert env.status == "needs_approval"
    command = (env.requests or [])[0]["payload"]["command"]
    assert command["argv"] == [PY, "tools/count.py", "counter.txt"]
    assert command["cwd"] == "." and command["digest"].startswith("sha256:")
    assert not (ws / "counter.txt").exists()
    done = s.resume(env.run_id or "", approve(env))
    assert done.outcome == "completed"
    assert (ws / "counter.txt").read_text() == "1"


def test_standing_command_prefix_admits_only_that_prefix(ws: Path) -> None:
    _skill(ws, f'{{argv: ["{PY}", "tools/count.py", "counter.txt"]}}')
    s = session(ws)
    ok = authority(
        effects="ask", standing_approvals=[{"commands": {"argv_prefix": [PY, "tools/count.py"]}}]
    )
    assert s.run("cmd", authority=ok, cwd=ws).outcome == "completed"
    other = authority(effects="ask", standing_approvals=[{"commands": {"argv_prefix": [PY, "-c"]}}])
    assert s.run("cmd", authority=other, cwd=ws).status == "needs_approval"
    assert (ws / "counter.txt").read_text() == "1"


def test_schema_is_the_registered_one() -> None:
    assert COMMAND_EXECUTE.effect == "process"
    assert "argv" in COMMAND_EXECUTE.schema["required"]

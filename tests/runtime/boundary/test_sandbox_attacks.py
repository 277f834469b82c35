"""Attacks on the process sandbox, each with a run's own lever: one approved command.

Each test runs ``command.execute`` for real under bubblewrap (``PROCTOR_SANDBOX=required``,
so a sandbox that cannot start fails the test rather than running the attack unconfined) and
proves the effect did not happen: nothing of the home or the signing key read, the parent's
environment not seen, files outside reach and authority files unchanged, no connection
received, no process left after the timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.engine.session import Session
from tests.runtime.boundary.sandbox_support import (
    alive,
    call_records,
    needs_bwrap,
    result_json,
    wait_until,
    write_probe,
)
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

pytestmark = needs_bwrap

PY = sys.executable


def _skill(root: Path, argv: list[str], *, method: str = "", **extra: Any) -> None:
    inputs = {"argv": argv, **extra}
    make_skill(
        root,
        "attack",
        f"""minimum_proctor: 0.1.0
methods:
  main:
{method}    steps:
      - id: run
        tool: command.execute
        inputs: {json.dumps(inputs)}
""",
    )


def _session(root: Path, **environ: str) -> Session:
    return session(
        root,
        environ={"PROCTOR_HOME": str(root / ".home"), "PROCTOR_SANDBOX": "required", **environ},
    )


def _probe_run(root: Path, *ops: str, **environ: str) -> tuple[Session, Any, dict[str, Any]]:
    """Run the probe with ``ops``; return the session, the envelope and the probe's report."""
    write_probe(root)
    _skill(root, [PY, "tools/attack.py", *ops])
    s = _session(root, **environ)
    env = s.run("attack", cwd=root)
    assert env.outcome == "completed", env.refusal
    (call,) = call_records(s, env.run_id)
    assert call.result["sandbox"]["used"] == "bubblewrap"
    return s, env, result_json(env, list(ops))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def canary() -> str:
    return "canary-" + secrets.token_hex(16)


def test_the_home_and_the_signing_key_cannot_be_read(ws: Path, canary: str) -> None:
    # both inside the workspace, which the command may read and write: only hiding saves them
    home = ws / ".home"
    home.mkdir(mode=0o700)
    (home / "credentials.key").write_text(canary)
    key = ws / "keys" / "signing_key.pem"
    key.parent.mkdir()
    key.write_text(f"-----BEGIN PRIVATE KEY-----\n{canary}\n-----END PRIVATE KEY-----\n")
    key.chmod(0o600)
    (ws / ".env").write_text(f"TOKEN={canary}\n")
    (ws / "readable.txt").write_text("fine")
    targets = [home / "credentials.key", key, ws / ".env", ws / "readable.txt"]
    # a file of the real home of this process, whatever it holds, must be out of sight too
    real_home = Path.home()
    mine = [p for p in real_home.iterdir() if p.is_file() and not p.is_symlink()][:1]
    ops = [x for t in [*targets, *mine] for x in ("read", str(t))]
    _s, env, report = _probe_run(ws, *ops, PROCTOR_SIGNING_KEY=str(key))
    assert report[str(ws / "readable.txt")] == _digest(ws / "readable.txt")  # the control
    for target in [home / "credentials.key", key, ws / ".env", *mine]:
        assert report[str(target)] in ("denied", hashlib.sha256(b"").hexdigest()), target
    assert canary not in json.dumps(env.to_json())


def test_sensitive_files_below_the_top_level_cannot_be_read(ws: Path, canary: str) -> None:
    # a monorepo's service folders hold their own .env and keys; the fs tools refuse them at
    # any depth, and a command must not read them either
    nested = [ws / "app" / ".env", ws / "svc" / "deploy" / "id_rsa", ws / "svc" / ".aws" / "x"]
    for path in nested:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"SECRET={canary}\n")
    (ws / "app" / "main.py").write_text("print('fine')\n")
    ops = [x for t in [*nested, ws / "app" / "main.py"] for x in ("read", str(t))]
    _s, env, report = _probe_run(ws, *ops)
    assert report[str(ws / "app" / "main.py")] == _digest(ws / "app" / "main.py")  # the control
    for target in nested:
        assert report[str(target)] in ("denied", hashlib.sha256(b"").hexdigest()), target
        assert canary in target.read_text()  # still there for its owner, unchanged
    assert canary not in json.dumps(env.to_json())


# A proctor host started with a secret in its environment (as a shell exports one): the kernel
# keeps it in the host's /proc/<pid>/environ whatever Python does with os.environ later.
HOST = """
import json, os, sys
from pathlib import Path
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.receipts.signing import signer_from_seed
ws = Path(sys.argv[1])
mine = f"/proc/{os.getpid()}/environ"
control = os.environ["CANARY"].encode() in Path(mine).read_bytes()
(ws / "skills" / "attack" / "run.yaml").write_text(
    (ws / "skills" / "attack" / "run.yaml").read_text().replace("HOST_ENVIRON", mine)
)
environ = {"PROCTOR_HOME": str(ws / ".home"), "PROCTOR_SANDBOX": "required"}
s = Session(Workspace(ws), environ=environ, signer=signer_from_seed(bytes(range(32))))
env = s.run("attack", cwd=ws)
calls = s.store.calls(env.run_id)
print(json.dumps({"control": control, "envelope": env.to_json(),
                  "sandbox": calls[0].result.get("sandbox")}))
s.close()
"""


def test_the_parent_environment_is_not_visible_in_proc(ws: Path, canary: str) -> None:
    write_probe(ws)
    ops = ["read", "HOST_ENVIRON", "read", "/proc/1/environ", "scan", canary]
    _skill(ws, [PY, "tools/attack.py", *ops])
    host_env = {k: v for k, v in os.environ.items() if k != "PROCTOR_SANDBOX"}
    done = subprocess.run(
        [PY, "-c", HOST, str(ws)],
        env={**host_env, "CANARY": canary},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["control"] is True  # the secret is in the host's /proc/<pid>/environ
    assert doc["sandbox"]["used"] == "bubblewrap"
    env = doc["envelope"]
    assert env["outcome"] == "completed", env["refusal"]
    answers = json.loads(env["result"]["stdout"])
    assert answers[0] == "denied"  # the host's pid names nothing in the sandbox
    assert answers[1] != "denied"  # the control: the sandbox's own /proc is readable
    # no process in there holds it, and its parent is the sandbox's own init, not proctor
    assert answers[2] == {"hits": [], "ppid": 1}
    assert canary not in done.stdout + done.stderr


def test_a_hidden_home_or_a_package_cannot_be_moved_aside_and_replaced(ws: Path) -> None:
    # a home deep in the workspace: renaming a folder above it would carry the hidden mount
    # away and leave its old path free for a planted home with a key the attacker knows
    home = ws / "a" / "b" / "home"
    home.mkdir(parents=True)
    (home / "signing_key.pem").write_text("the real key")
    _s, _env, report = _probe_run(
        ws,
        "rename", f"{ws}/a|{ws}/c",
        "rename", f"{ws}/a/b|{ws}/a/x",
        "write", f"{home}/planted.pem",
        "rename", f"{ws}/skills/attack|{ws}/skills/moved",
        "rename", f"{ws}/skills|{ws}/skills2",
        PROCTOR_HOME=str(home),
    )  # fmt: skip
    assert list(report.values()) == ["denied"] * 5
    assert sorted(p.name for p in home.iterdir()) == ["signing_key.pem"]
    assert (home / "signing_key.pem").read_text() == "the real key"
    assert not (ws / "c").exists() and not (ws / "skills" / "moved").exists()


def test_nothing_outside_reach_nor_any_authority_file_is_written(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("original")
    escape = Path(sys.prefix) / f"proctor-sandbox-escape-{secrets.token_hex(6)}"
    policies = ws / "policies" / "rules.yaml"
    policies.parent.mkdir()
    policies.write_text("rules: []\n")
    state = ws / ".proctor" / "planted"
    _skill(ws, [PY])  # the package's SKILL.md exists before the run, as the probe rewrites it
    before = {p: _digest(p) for p in (outside, policies, ws / "skills" / "attack" / "SKILL.md")}
    try:
        _s, _env, report = _probe_run(
            ws,
            "write", str(outside),
            "write", str(escape),
            "write", str(policies),
            "write", str(state),
            "write", str(ws / "skills" / "attack" / "SKILL.md"),
            "write", str(ws / "allowed.txt"),
        )  # fmt: skip
        assert report[str(ws / "allowed.txt")] == "done"  # the control: the workspace is writable
        assert (ws / "allowed.txt").read_text() == "planted"
        assert report[str(escape)] == "denied" and not escape.exists()
        for target in (policies, state):
            assert report[str(target)] == "denied"
        assert not state.exists()
        assert {p: _digest(p) for p in before} == before
    finally:
        if escape.exists():
            escape.unlink()


def test_a_second_name_of_a_policy_or_a_key_gives_no_way_in(
    ws: Path, tmp_path: Path, canary: str
) -> None:
    # hard links made before the run: a policy's other name in the workspace, and a key of a
    # home outside it (hidden there) with another name inside, under node_modules for good
    # measure (the sensitive-file walk skips it)
    policy = ws / "policies" / "rules.yaml"
    policy.parent.mkdir()
    policy.write_text("rules: []\n")
    (ws / "notes").mkdir()
    os.link(policy, ws / "notes" / "rules.txt")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "config.json").write_text(json.dumps({"canary": canary}))
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    os.link(home / "config.json", ws / "node_modules" / "pkg" / "index.json")
    (ws / "notes" / "plain.txt").write_text("fine")
    ops = [
        "write", str(ws / "notes" / "rules.txt"),
        "read", str(ws / "node_modules" / "pkg" / "index.json"),
        "write", str(ws / "notes" / "plain.txt"),
    ]  # fmt: skip
    _s, env, report = _probe_run(ws, *ops, PROCTOR_HOME=str(home))
    assert report[str(ws / "notes" / "plain.txt")] == "done"  # the control
    assert report[str(ws / "notes" / "rules.txt")] == "denied"
    assert policy.read_text() == "rules: []\n"
    assert report[str(ws / "node_modules" / "pkg" / "index.json")] in (
        "denied",
        hashlib.sha256(b"").hexdigest(),
    )
    assert canary not in json.dumps(env.to_json())


def test_an_authority_file_the_command_creates_is_removed_and_fails_the_call(ws: Path) -> None:
    write_probe(ws)
    key = ws / "keys" / "signing_key.pem"  # named by PROCTOR_SIGNING_KEY, not there yet
    targets = [ws / "proctor.toml", ws / "directives" / "evil.md", key]
    ops = [x for t in targets for x in ("write", str(t))]
    _skill(ws, [PY, "tools/attack.py", *ops])
    env = _session(ws, PROCTOR_SIGNING_KEY=str(key)).run("attack", cwd=ws)
    assert env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "authority_file_created"
    assert not (ws / "proctor.toml").exists() and not (ws / "directives").exists()
    assert not key.exists()


def test_no_journal_or_receipt_store_is_planted_beside_the_state_the_session_names(
    ws: Path,
) -> None:
    # the run database, its receipts and audit log kept in the workspace but outside .proctor/:
    # a rollback journal planted beside the store would be rolled into it by its next opener,
    # and a receipt folder not made yet would be taken over by what the command put there
    (ws / "data").mkdir()
    db, receipts = ws / "data" / "runs.db", ws / "receipts"
    write_probe(ws)
    # (and a damage record planted beside it would refuse the store to every later command)
    targets = [
        Path(f"{db}-journal"),
        Path(f"{db}-damaged"),
        receipts / "index.jsonl",
        ws / "data" / "notes.txt",
    ]
    ops = [x for t in targets for x in ("write", str(t))]
    _skill(ws, [PY, "tools/attack.py", *ops])
    s = _session(ws, PROCTOR_DATABASE_PATH=str(db), PROCTOR_RECEIPT_DIR=str(receipts))
    env = s.run("attack", cwd=ws)
    assert env.refusal is not None and env.refusal.code == "authority_file_created"
    assert "runs.db-journal" in env.refusal.message
    (call,) = call_records(s, env.run_id)
    assert call.result["sandbox"]["used"] == "bubblewrap"
    assert (ws / "data" / "notes.txt").read_text() == "planted"  # the control: data/ is writable
    assert not Path(f"{db}-journal").exists() and not Path(f"{db}-damaged").exists()
    # the receipt folder is proctor's: the run sealed into it, and nothing planted is there
    assert env.receipt_id is not None and s.receipts.get(env.receipt_id) is not None
    assert "planted" not in (receipts / "index.jsonl").read_text()


def test_a_reach_root_is_writable_and_its_authority_files_are_not(ws: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "policies").mkdir(parents=True)
    (root / "policies" / "p.yaml").write_text("rules: []\n")
    write_probe(ws)
    ops = ["write", f"{root}/out.txt", "write", f"{root}/policies/p.yaml"]
    inputs = "    inputs: {type: object, properties: {repo: {type: string, format: path}}}\n"
    _skill(ws, [PY, "tools/attack.py", *ops], method=inputs)
    s = _session(ws)
    env = s.run("attack", inputs={"repo": str(root)}, authority=authority(reach="inputs"), cwd=ws)
    assert env.outcome == "completed", env.refusal
    report = result_json(env, ops)
    assert report[f"{root}/out.txt"] == "done" and (root / "out.txt").read_text() == "planted"
    assert report[f"{root}/policies/p.yaml"] == "denied"
    assert (root / "policies" / "p.yaml").read_text() == "rules: []\n"


def test_the_packages_and_tool_config_deep_in_a_reach_root_are_not_written(
    ws: Path, tmp_path: Path
) -> None:
    # another project the run reaches: its skill packages and a tool's code-running config
    # below the top level grant authority there as in the workspace (fs.write refuses them)
    root = tmp_path / "repo"
    package = root / "skills" / "deploy"
    package.mkdir(parents=True)
    (package / "SKILL.md").write_text("---\nname: deploy\ndescription: d\n---\n")
    (package / "run.yaml").write_text("minimum_proctor: 0.1.0\n")
    (root / "app" / ".vscode").mkdir(parents=True)
    (root / "app" / ".vscode" / "tasks.json").write_text("{}\n")
    guarded = [package / "SKILL.md", package / "run.yaml", root / "app" / ".vscode" / "tasks.json"]
    before = {p: _digest(p) for p in guarded}
    write_probe(ws)
    ops = [x for t in [*guarded, package / "notes.txt"] for x in ("write", str(t))]
    inputs = "    inputs: {type: object, properties: {repo: {type: string, format: path}}}\n"
    _skill(ws, [PY, "tools/attack.py", *ops], method=inputs)
    s = _session(ws)
    env = s.run("attack", inputs={"repo": str(root)}, authority=authority(reach="inputs"), cwd=ws)
    assert env.outcome == "completed", env.refusal
    report = result_json(env, ops)
    assert report[str(package / "notes.txt")] == "done"  # the control: the package folder is
    assert (package / "notes.txt").read_text() == "planted"  # writable, its definition is not
    assert [report[str(p)] for p in guarded] == ["denied"] * 3
    assert {p: _digest(p) for p in guarded} == before


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


def _connections(server: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def test_no_connection_leaves_without_an_egress_grant(ws: Path, listener: socket.socket) -> None:
    where = f"127.0.0.1:{listener.getsockname()[1]}"
    _s, _env, report = _probe_run(ws, "connect", where)
    assert report[where] == "denied"
    assert _connections(listener) == 0


def _sleeper(ws: Path, marker: str, *, then: str) -> None:
    # setsid, then a double fork: the sleeper is in no process group or session of the
    # command's, and its parent is gone; the command goes on once the sleeper is running
    script = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        open('sleeper.started', 'w').close()\n"
        f"        os.execvp('sleep', ['sleep', '{marker}'])\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "while not os.path.exists('sleeper.started'):\n"
        "    time.sleep(0.01)\n"
        f"{then}\n"
    )
    (ws / "tools" / "sleeper.py").write_text(script)


@pytest.mark.parametrize("ending", ["timeout", "exit"])
def test_nothing_the_command_started_outlives_it(ws: Path, ending: str) -> None:
    marker = f"1000.{secrets.randbelow(10**9):09d}"
    _sleeper(ws, marker, then="time.sleep(600)" if ending == "timeout" else "sys.exit(0)")
    _skill(ws, [PY, "tools/sleeper.py"], timeout_seconds=5 if ending == "timeout" else 60)
    s = _session(ws)
    done: list[Any] = []
    runner = threading.Thread(target=lambda: done.append(s.run("attack", cwd=ws)))
    runner.start()
    if ending == "timeout":
        wait_until(lambda: bool(alive(marker)), "the sleeper started")
    runner.join(timeout=120)
    assert not runner.is_alive()
    (env,) = done
    if ending == "timeout":
        assert env.refusal is not None and env.refusal.code == "command_timeout"
    else:
        assert env.outcome == "completed", env.refusal
    (call,) = call_records(s, env.run_id)
    assert call.result["sandbox"]["used"] == "bubblewrap"
    assert (ws / "sleeper.started").exists()
    wait_until(lambda: not alive(marker), "a process of the command survived it", seconds=10)


def test_a_stop_kills_the_whole_sandbox(ws: Path) -> None:
    from proctor.runtime.tools.command import stop_running

    marker = f"1000.{secrets.randbelow(10**9):09d}"
    _sleeper(ws, marker, then="time.sleep(600)")
    _skill(ws, [PY, "tools/sleeper.py"], timeout_seconds=600)
    s = _session(ws)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            s.run("attack", cwd=ws)
        except BaseException as exc:  # the stop surfaces as RunInterrupted
            failed.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    wait_until(lambda: bool(alive(marker)), "the sleeper started")
    assert stop_running() == 1
    runner.join(timeout=60)
    assert not runner.is_alive()
    assert [type(e).__name__ for e in failed] == ["RunInterrupted"]
    wait_until(lambda: not alive(marker), "a process of the command survived the stop", seconds=10)

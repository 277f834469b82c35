"""A run's start is one step: what would fail at its seal is refused before its first step.

Every case runs the real CLI in a subprocess and proves three things: the exit code and the
error code, no run left behind in the store (not even a ``running`` one), and the effect the
skill's first step would have had (a file written, a command's counter) never happened.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.records.runs import RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore

pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {text: {type: string}}
      required: [text]
    steps:
      - id: count
        tool: command.execute
        inputs: {argv: [PYTHON, tools/count.py, counter.txt]}
      - id: confirm
        ask: {reason: Write the note?}
      - id: write
        tool: fs.write
        inputs: {path: note.txt, content: $input.text, create: true}
"""

COUNTER = """import sys, pathlib
p = pathlib.Path(sys.argv[1])
p.write_text(str(int(p.read_text()) + 1 if p.exists() else 1))
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    skill = root / "skills" / "starter"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: starter\ndescription: Start tests.\n---\nNo.\n")
    (skill / "run.yaml").write_text(RUN_YAML.replace("PYTHON", json.dumps(sys.executable)))
    (root / "tools").mkdir()
    (root / "tools" / "count.py").write_text(COUNTER)
    (root / ".proctor").mkdir()
    return root


def proctor(
    root: Path, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    base["PROCTOR_HOME"] = str(root / "home")
    for name, value in (env or {}).items():
        if value == "<unset>":
            base.pop(name, None)
        else:
            base[name] = value
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=root, env=base, input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def runs(root: Path) -> list[tuple[str, str, dict[str, Any]]]:
    path = root / ".proctor" / "runs.sqlite"
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT run_id, status, data FROM runs").fetchall()
    finally:
        conn.close()
    return [(r[0], r[1], json.loads(r[2])) for r in rows]


def assert_refused_before_any_effect(
    root: Path, out: subprocess.CompletedProcess[str], code: str, exit_code: int = 3
) -> None:
    assert out.returncode == exit_code, (out.returncode, out.stdout, out.stderr)
    assert f"error[{code}]" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert str(root) not in out.stderr
    assert not (root / "counter.txt").exists(), "the first step ran"
    assert runs(root) == [], "a run was left behind"


def _key(root: Path) -> Path:
    return root / "home" / "signing_key.pem"


def test_an_exposed_key_is_refused_before_the_first_step(ws: Path) -> None:
    assert proctor(ws, "key", "show").returncode == 0
    _key(ws).chmod(0o644)
    out = proctor(ws, "run", "starter", "-i", "text=hi", "--json")
    assert_refused_before_any_effect(ws, out, "signing_key_exposed")
    assert "chmod 600" in out.stderr


def test_an_invalid_key_is_refused_before_the_first_step(ws: Path) -> None:
    (ws / "home").mkdir(mode=0o700)
    fd = os.open(_key(ws), os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    os.close(fd)
    out = proctor(ws, "run", "starter", "-i", "text=hi", "--json")
    assert_refused_before_any_effect(ws, out, "signing_key_invalid")


def test_an_uncreatable_key_is_refused_before_the_first_step(ws: Path) -> None:
    (ws / "plain-file").write_text("not a folder")
    env = {"PROCTOR_HOME": str(ws / "plain-file" / "home")}
    out = proctor(ws, "run", "starter", "-i", "text=hi", "--json", env=env)
    assert_refused_before_any_effect(ws, out, "signing_key_uncreatable")


@pytest.mark.parametrize("home", ["", "relative/home"])
def test_no_home_is_refused_before_the_first_step(ws: Path, home: str) -> None:
    env = {"PROCTOR_HOME": "<unset>", "HOME": home}
    out = proctor(ws, "run", "starter", "-i", "text=hi", "--json", env=env)
    assert_refused_before_any_effect(ws, out, "home_missing")
    assert not (ws / ".proctor" / "audit.jsonl").exists()


def test_a_foreign_receipt_folder_is_refused_before_the_first_step(ws: Path) -> None:
    (ws / ".proctor" / "receipts").mkdir()
    (ws / ".proctor" / "receipts" / "notes.txt").write_text("someone else's")
    out = proctor(ws, "run", "starter", "-i", "text=hi", "--json")
    assert_refused_before_any_effect(ws, out, "receipt_store_foreign", exit_code=1)


def test_a_paused_run_is_not_driven_on_with_a_key_that_fails(ws: Path) -> None:
    """resume checks the key before any step too; the run waits, and goes on once fixed."""
    first = proctor(ws, "run", "starter", "-i", "text=hi", "--json")
    assert first.returncode == 10, first.stderr
    envelope = json.loads(first.stdout)
    assert (ws / "counter.txt").read_text() == "1"
    _key(ws).chmod(0o640)
    (request,) = envelope["requests"]
    doc = {
        "approvals": {
            request["address"]: {
                "request_digest": request["request_digest"],
                "approved": True,
                "reason": "ok",
            }
        }
    }
    out = proctor(ws, "resume", envelope["run_id"], "-", "--json", stdin=json.dumps(doc))
    assert out.returncode == 3 and "error[signing_key_exposed]" in out.stderr, out.stderr
    assert not (ws / "note.txt").exists()
    ((_, status, _),) = runs(ws)
    assert status == "needs_approval"
    _key(ws).chmod(0o600)
    out = proctor(ws, "resume", envelope["run_id"], "-", "--json", stdin=json.dumps(doc))
    assert out.returncode == 0, out.stderr
    assert (ws / "note.txt").read_text() == "hi"
    assert (ws / "counter.txt").read_text() == "1"


def test_a_run_is_created_with_its_inputs_in_one_step(ws: Path) -> None:
    out = proctor(ws, "run", "starter", "-i", "text=hi", "--json")
    assert out.returncode == 10, out.stderr
    ((run_id, status, data),) = runs(ws)
    assert status == "needs_approval"
    assert data["inputs"] == {"text": "hi"} and data["inputs_digest"].startswith("sha256:")
    conn = sqlite3.connect(ws / ".proctor" / "runs.sqlite")
    kinds = [r[0] for r in conn.execute("SELECT kind FROM events WHERE run_id = ?", (run_id,))]
    conn.close()
    assert kinds[0] == "started"
    lines = (ws / ".proctor" / "audit.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["event"] == "run_started"


def test_invalid_inputs_seal_blocked_and_the_refusal_is_recorded_with_the_run(ws: Path) -> None:
    out = proctor(ws, "run", "starter", "--json")
    assert out.returncode == 1, out.stderr
    envelope = json.loads(out.stdout)
    assert envelope["outcome"] == "blocked" and envelope["refusal"]["code"] == "inputs_invalid"
    ((_, status, data),) = runs(ws)
    assert status == "sealed" and data["start_blocked"]["code"] == "inputs_invalid"
    assert "inputs" not in data
    assert not (ws / "counter.txt").exists()


def test_a_record_left_without_inputs_seals_blocked_and_never_runs_a_step(ws: Path) -> None:
    """What an earlier version left when killed between creating a run and storing its
    inputs: the next drive refuses it instead of running the method with no inputs."""
    assert proctor(ws, "key", "show").returncode == 0
    store = SQLiteRunStore(ws / ".proctor" / "runs.sqlite")
    skill = ws / "skills" / "starter"
    from proctor.runtime.skills import load_skill

    loaded = load_skill(str(skill), cwd=ws, workspace_root=ws)
    store.create_run(
        RunRecord(
            run_id="legacy",
            skill="starter",
            method="main",
            data={
                "package": loaded.label,
                "package_folder": str(loaded.folder),
                "package_digest": loaded.package_digest,
                "authority": {"effects": "allow", "reach": "inputs", "set_by": "default"},
            },
        )
    )
    store.close()
    out = proctor(ws, "resume", "legacy", "-", "--json", stdin="{}")
    assert out.returncode == 1, out.stderr
    envelope = json.loads(out.stdout)
    assert envelope["outcome"] == "blocked"
    assert envelope["refusal"]["code"] == "start_incomplete"
    assert not (ws / "counter.txt").exists()

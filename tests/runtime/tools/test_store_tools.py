"""The ``store.*`` tools in runs: namespaced per package (attack), keyed writes, and a store
write killed mid-call reconciled by its key."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

WRITER = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: put
        tool: store.key.put
        idempotency_key: put-token
        inputs: {key: token, value: alpha-private-value}
      - id: log
        tool: store.events.append
        idempotency_key: log-1
        inputs: {stream: audit, event: {said: alpha-private-event}}
      - id: read
        tool: store.events.read
        inputs: {stream: audit}
    result_from: [read]
"""

READER = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {key: {type: string}, args: {type: object}}
      required: [key]
    steps:
      - id: get
        tool: store.key.get
        inputs: {key: $input.key}
      - id: list
        tool: store.keys.list
        inputs: {}
      - id: read
        tool: store.events.read
        inputs: {stream: audit}
    result_from: [get, list, read]
"""

SMUGGLE = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: get
        tool: store.key.get
        inputs: {key: token, namespace: alpha}
"""

UNKEYED = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: put
        tool: store.key.put
        inputs: {key: k, value: v}
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "alpha", WRITER)
    make_skill(root, "beta", READER)
    make_skill(root, "smuggle", SMUGGLE)
    make_skill(root, "unkeyed", UNKEYED)
    return root


def test_a_package_reads_its_own_state(ws: Path) -> None:
    env = session(ws).run("alpha", cwd=ws)
    assert env.outcome == "completed", env.refusal
    assert env.result == {
        "events": [{"seq": 1, "event": {"said": "alpha-private-event"}}],
        "next_cursor": 1,
    }
    again = session(ws).run("alpha", cwd=ws)  # same keys: nothing written twice
    assert again.outcome == "completed"
    assert len(again.result["events"]) == 1


def test_a_repeat_answered_by_the_run_store_says_it_was_already_done(ws: Path) -> None:
    # the backend lost its data (a Redis restart, another PROCTOR_STORE_URL): the run store
    # still holds the keyed write, so it is not sent again, and the answer says so
    make_skill(
        ws, "putter", WRITER.replace("    result_from: [read]", "    result_from: [put, log]")
    )
    first = session(ws).run("putter", cwd=ws)
    assert first.outcome == "completed", first.refusal
    assert first.result["put"]["already_done"] is False
    assert first.result["log"]["already_done"] is False
    (ws / ".proctor" / "store.sqlite").unlink()
    again = session(ws).run("putter", cwd=ws)
    assert again.outcome == "completed", again.refusal
    assert again.result["put"] == {**first.result["put"], "already_done": True}
    assert again.result["log"] == {**first.result["log"], "already_done": True}


def test_one_package_cannot_read_anothers_namespace(ws: Path) -> None:
    assert session(ws).run("alpha", cwd=ws).outcome == "completed"
    for key in ("token", "../alpha/token", "alpha/token", "alpha:token"):
        env = session(ws).run("beta", inputs={"key": key}, cwd=ws)
        assert env.outcome == "completed", env.refusal
        assert env.result["get"]["found"] is False
        assert env.result["list"]["keys"] == []
        assert env.result["read"]["events"] == []
        assert "alpha-private" not in json.dumps(env.to_json())
    smuggled = session(ws).run("smuggle", cwd=ws)
    assert smuggled.refusal is not None and smuggled.refusal.code == "schema_invalid"


def test_a_store_write_needs_an_idempotency_key(ws: Path) -> None:
    env = session(ws).run("unkeyed", cwd=ws)
    assert env.refusal is not None and env.refusal.code == "idempotency_key_required"
    conn = sqlite3.connect(str(ws / ".proctor" / "store.sqlite"))
    try:
        assert conn.execute("SELECT COUNT(*) FROM keyvals").fetchone() == (0,)
    except sqlite3.OperationalError:
        pass  # never even created
    finally:
        conn.close()


def _proctor(ws: Path, *args: str, kill_at: str | None = None, stdin: str | None = None) -> str:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PROCTOR_HOME": str(ws / ".home"),
        "PROCTOR_TEST_HOOKS": "1",
    }
    if kill_at:
        env["PROCTOR_TEST_KILL_AT"] = kill_at
    done = subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=ws, env=env, input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if kill_at:
        assert done.returncode == -9, done.stderr
    return done.stdout


@pytest.mark.parametrize("point", ["call.claimed:2", "call.executed:2"])
def test_a_store_write_killed_mid_call_is_written_once(ws: Path, point: str) -> None:
    _proctor(ws, "run", "alpha", "--json", kill_at=point)  # the second claim: the append
    conn = sqlite3.connect(str(ws / ".proctor" / "runs.sqlite"))
    try:
        (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone()
    finally:
        conn.close()
    doc = json.loads(_proctor(ws, "resume", run_id, "-", "--json", stdin="{}"))
    assert doc["outcome"] == "completed", doc
    assert [e["seq"] for e in doc["result"]["events"]] == [1]


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_proctor_store_url_chooses_the_backend(tmp_path: Path, backend: str) -> None:
    import uuid

    from proctor.runtime.storage.select import close_state_stores

    var = "PROCTOR_TEST_DATABASE_URL" if backend == "postgres" else "PROCTOR_TEST_REDIS_URL"
    url = os.environ.get(var)
    if not url:
        pytest.skip(f"{var} is unset: no {backend} to test against")
    unique = "t" + uuid.uuid4().hex[:12]
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "alpha", WRITER)
    env = {"PROCTOR_STORE_URL": url, "PROCTOR_STORE_PREFIX": unique}
    s = session(root)
    s.environ = {**s.environ, **env}
    try:
        done = s.run("alpha", cwd=root)
        assert done.outcome == "completed", done.refusal
        assert done.result["events"][0]["event"] == {"said": "alpha-private-event"}
        assert not (root / ".proctor" / "store.sqlite").exists()  # not the SQLite default
    finally:
        from proctor.runtime.storage.select import open_state_store

        opened: Any = open_state_store(env, root / ".proctor")
        opened.drop()
        close_state_stores()

"""The canary claim for process tools: a credential reaches the child's env and nothing else.

A unique secret is delivered through each resolution path (``--profile``, a project binding,
the provider default, a host handle through the Python API, the process environment, the
workspace ``.env``) to a ``command.execute`` step. The child is a small Python program (the
interpreter's path is a run input) that writes a digest and the length of the variable it got
to a workspace file, then prints the secret (raw and base64) to stdout and stderr. The child
must really receive the secret under its declared name, and the secret must appear in none of:
the CLI's stdout and stderr, the envelope, the audit log, the run store (the SQLite file and
its WAL, as bytes), the receipts.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
import sys

import pytest

from tests.e2e.canary_support import PATHS, arrange, leaks
from tests.e2e.conftest import Result, Ws

SKILL_MD = """---
name: pcanary
description: Runs one program with a declared credential in its environment.
---
# pcanary

Runs a probe with the `api` credential delivered as CANARY_TOKEN.
"""

RUN_YAML = """minimum_proctor: 0.1.0
credentials:
  api:
    provider: canary
    auth:
      api_key: {delivery: {env: CANARY_TOKEN}}
methods:
  probe:
    description: Run the probe with the credential.
    inputs:
      type: object
      properties:
        python: {type: string}
      required: [python]
      additionalProperties: false
    steps:
      - id: run
        tool: command.execute
        credential: api
        reason: prove delivery to a process
        inputs: {argv: [$input.python, probe.py, got.json]}
"""

PROBE = """
import base64, hashlib, json, os, sys
token = os.environ.get("CANARY_TOKEN", "")
with open(sys.argv[1], "w") as out:
    json.dump({"digest": hashlib.sha256(token.encode()).hexdigest(), "length": len(token),
               "names": sorted(os.environ)}, out)
print("token", token)
print("b64", base64.b64encode(token.encode()).decode())
print("err", token, file=sys.stderr)
"""

HOST_SCRIPT = """
import json, sys
from pathlib import Path
from proctor.runtime.engine.session import Session
from proctor.runtime.boundary.workspace import Workspace

secret = sys.stdin.read()
session = Session(Workspace.discover(Path.cwd()))
try:
    envelope = session.run("pcanary#probe", inputs={"python": sys.executable},
                           request_secrets={"api": secret})
    # while the session is open the run store's WAL file is live: grep it (and all the rest)
    live = {p.name: secret.encode() in p.read_bytes()
            for p in (Path.cwd() / ".proctor").rglob("*") if p.is_file()}
finally:
    session.close()
print(json.dumps({"envelope": envelope.to_json(), "live": live}))
"""


def _workspace(ws: Ws) -> None:
    folder = ws.root / "skills" / "pcanary"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "run.yaml").write_text(RUN_YAML)
    (ws.root / "probe.py").write_text(PROBE)


@pytest.mark.parametrize("path", PATHS)
def test_canary_reaches_the_child_and_no_output(ws: Ws, path: str) -> None:
    _workspace(ws)
    secret = "canary-" + secrets.token_hex(16)
    decoy = "decoy-" + secrets.token_hex(16)
    env: dict[str, str] = {"PROCTOR_TEST_PARENT_SECRET": decoy}
    extra = arrange(ws, path, "pcanary", secret, decoy, env)
    if path == "host":
        proc = subprocess.run(
            [sys.executable, "-c", HOST_SCRIPT],
            cwd=ws.root,
            env={**ws.env, **env},
            input=secret,
            capture_output=True,
            text=True,
            timeout=120,
        )
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        assert result.code == 0, result.stdout + result.stderr
        envelope, live = result.json()["envelope"], result.json()["live"]
        assert "runs.sqlite-wal" in live, sorted(live)
        assert not any(live.values()), live
    else:
        result = ws.proctor(
            "run", "pcanary#probe", "-i", f"python={sys.executable}", "--json", *extra, env=env
        )
        assert result.code == 0, result.stdout + result.stderr
        envelope = result.json()
    assert (envelope["status"], envelope["outcome"]) == ("sealed", "completed")
    # delivery works: the child got exactly this secret under the declared name
    got = json.loads((ws.root / "got.json").read_text())
    assert got["digest"] == hashlib.sha256(secret.encode()).hexdigest()
    assert got["length"] == len(secret)
    # ... and nothing else of the parent's: no PROCTOR_* setting, no other variable
    assert not any(name.startswith("PROCTOR_") for name in got["names"])
    # (PWD: bubblewrap sets it to the folder it starts the command in)
    assert set(got["names"]) <= {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
                                 "PWD", "CANARY_TOKEN"}  # fmt: skip
    # what it printed came back scrubbed, and its digests are of the scrubbed text
    out = envelope["result"]
    assert out["stdout"].count("[REDACTED:tainted]") == 2
    assert out["stderr"] == "err [REDACTED:tainted]\n"
    assert out["stdout_digest"] == "sha256:" + hashlib.sha256(out["stdout"].encode()).hexdigest()
    # ... and the secret (and the decoy in the parent's environment) is nowhere else
    assert leaks(ws, result, secret) == []
    assert leaks(ws, result, decoy) == []
    assert (ws.root / ".proctor" / "runs.sqlite").is_file()
    from proctor.runtime.records.sqlite import SQLiteRunStore

    store = SQLiteRunStore(ws.root / ".proctor" / "runs.sqlite")
    try:
        record = store.get_run(envelope["run_id"])
    finally:
        store.close()
    assert record is not None
    [chosen] = record.data["credentials"]
    expected = {"profile": "chosen", "binding": "bound", "default": "only"}.get(path)
    assert chosen["source"] == path and chosen["profile"] == expected
    assert chosen["env"] == "CANARY_TOKEN"
    verified = ws.proctor("verify", envelope["receipt_id"], "--json")
    assert verified.code == 0, verified.stdout + verified.stderr

"""command.execute and credentials: the child's environment is an allow-list plus the step's own
credential under its declared delivery name; its output is scrubbed before it is returned,
digested or stored."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import secrets
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.runtime.tools.command import INHERITED_ENV
from tests.runtime.driver_support import (
    _OPEN,
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
)

PY = sys.executable

# Writes the names it was given and a digest of CANARY_TOKEN, then prints the token (raw and
# base64) to both streams, the way a careless tool would.
PROBE = """
import base64, hashlib, json, os, sys
token = os.environ.get("CANARY_TOKEN", "")
with open(sys.argv[1], "w") as out:
    json.dump({"names": sorted(os.environ),
               "digest": hashlib.sha256(token.encode()).hexdigest(),
               "length": len(token)}, out)
pad = int(sys.argv[2]) if len(sys.argv) > 2 else 0
print("x" * pad + token)
print("b64", base64.b64encode(token.encode()).decode())
print("err", token, file=sys.stderr)
raise SystemExit(int(os.environ.get("PROBE_EXIT", "0")))
"""


def _skill(root: Path, *, env_name: str = "CANARY_TOKEN", tail: str = "]") -> None:
    make_skill(
        root,
        "cmd",
        f"""minimum_proctor: 0.1.0
credentials:
  api:
    provider: canary
    auth:
      api_key: {{delivery: {{env: {env_name}}}}}
methods:
  main:
    description: One command with the credential.
    steps:
      - id: run
        tool: command.execute
        credential: api
        inputs: {{argv: ["{PY}", "tools/probe.py", "got.json"{tail}}}
  both:
    description: A command without the credential, then one with it.
    steps:
      - id: plain
        tool: command.execute
        inputs: {{argv: ["{PY}", "tools/probe.py", "plain.json"]}}
      - id: run
        tool: command.execute
        credential: api
        inputs: {{argv: ["{PY}", "tools/probe.py", "got.json"]}}
""",
    )
    (root / "tools" / "probe.py").write_text(PROBE)


def _session(root: Path, **environ: str) -> Session:
    ticks = itertools.count()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    opened = Session(
        Workspace(root),
        environ={"PROCTOR_HOME": str(root / ".home"), **environ},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
        signer=signer_from_seed(bytes(range(32))),
    )
    _OPEN.append(opened)
    return opened


def _stored(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((root / ".proctor").rglob("*")) if p.is_file())


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def secret() -> str:
    return "canary-" + secrets.token_hex(16)


def test_the_child_gets_the_credential_in_its_env_and_nothing_shows_it(
    ws: Path, secret: str
) -> None:
    _skill(ws)
    s = _session(ws, PATH=os.environ.get("PATH", ""))
    env = s.run("cmd#main", cwd=ws, request_secrets={"api": secret})
    assert env.outcome == "completed", env.refusal
    got = json.loads((ws / "got.json").read_text())
    assert got["digest"] == hashlib.sha256(secret.encode()).hexdigest()
    assert "CANARY_TOKEN" in got["names"]
    out = env.result
    assert secret not in json.dumps(out)
    assert out["stdout"].count("[REDACTED:tainted]") == 2  # the raw and the base64 forms
    assert out["stderr"] == "err [REDACTED:tainted]\n"
    # the digests are of exactly the returned (scrubbed) text
    for stream in ("stdout", "stderr"):
        expected = hashlib.sha256(out[stream].encode()).hexdigest()
        assert out[f"{stream}_digest"] == "sha256:" + expected
    assert out["stdout_bytes"] > len(out["stdout"]) - 2 * len("[REDACTED:tainted]")
    # never in the driver's own environment, the recorded arguments, the store or the audit log
    assert secret not in os.environ.values() and "CANARY_TOKEN" not in os.environ
    (call,) = s.store.calls(env.run_id or "")
    assert secret not in json.dumps(call.result)
    assert secret.encode() not in _stored(ws)


def test_the_parent_environment_does_not_reach_the_child(
    ws: Path, secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _skill(ws)
    parent = "parent-" + secrets.token_hex(16)
    monkeypatch.setenv("PROCTOR_TEST_PARENT_SECRET", parent)
    monkeypatch.setenv("SOME_OTHER_TOKEN", parent)
    s = _session(ws, PROCTOR_TEST_PARENT_SECRET=parent, SOME_OTHER_TOKEN=parent, LANG="C.UTF-8")
    env = s.run("cmd#both", cwd=ws, request_secrets={"api": secret})
    assert env.outcome == "completed", env.refusal
    plain = json.loads((ws / "plain.json").read_text())
    got = json.loads((ws / "got.json").read_text())
    # Python itself may coerce the C locale by setting LC_CTYPE in its own environment, and
    # bubblewrap sets PWD to the folder it starts the command in (neither comes from the parent).
    assert set(plain["names"]) - {"LC_CTYPE", "PWD"} <= set(INHERITED_ENV)
    assert "LANG" in plain["names"]
    # the step without credential: gets none, even though the run resolved one
    assert plain["length"] == 0
    assert set(got["names"]) - {"LC_CTYPE", "PWD"} <= {*INHERITED_ENV, "CANARY_TOKEN"}
    assert got["length"] == len(secret)
    assert parent.encode() not in (ws / "plain.json").read_bytes() + (ws / "got.json").read_bytes()


def test_a_secret_straddling_the_output_cut_is_not_left_half_shown(ws: Path, secret: str) -> None:
    _skill(ws, tail=', "995"], max_output_bytes: 1000')
    env = _session(ws).run("cmd#main", cwd=ws, request_secrets={"api": secret})
    assert env.outcome == "completed", env.refusal
    out = env.result
    assert out["stdout_truncated"] is True and len(out["stdout"].encode()) == 1000
    assert out["stdout"].startswith("x" * 995 + "[RED")
    assert secret[:5] not in out["stdout"]


def test_a_reserved_delivery_name_fails_before_anything_starts(ws: Path, secret: str) -> None:
    _skill(ws, env_name="PATH")
    env = _session(ws).run("cmd#main", cwd=ws, request_secrets={"api": secret})
    assert env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "credential_env_reserved"
    assert not (ws / "got.json").exists()


def test_a_failing_command_records_only_scrubbed_facts(ws: Path, secret: str) -> None:
    _skill(ws)
    s = _session(ws, PROBE_EXIT="3")  # not inherited: the command exits 0
    assert s.run("cmd#main", cwd=ws, request_secrets={"api": secret}).outcome == "completed"
    (ws / "tools" / "probe.py").write_text(PROBE.replace('"PROBE_EXIT", "0"', '"X", "3"'))
    env = s.run("cmd#main", cwd=ws, request_secrets={"api": secret})
    assert env.refusal is not None and env.refusal.code == "command_failed"
    assert secret not in json.dumps(env.to_json())
    assert secret.encode() not in _stored(ws)


def test_the_approval_payload_never_holds_the_credential(ws: Path, secret: str) -> None:
    _skill(ws)
    s = _session(ws)
    env = s.run(
        "cmd#main", authority=authority(effects="ask"), cwd=ws, request_secrets={"api": secret}
    )
    assert env.status == "needs_approval"
    assert not (ws / "got.json").exists()
    doc: dict[str, Any] = env.to_json()
    assert secret not in json.dumps(doc)
    assert secret.encode() not in _stored(ws)
    rotated = "canary-" + secrets.token_hex(16)
    done = s.resume(env.run_id or "", approve(env), request_secrets={"api": rotated})
    assert done.outcome == "completed", done.refusal
    got = json.loads((ws / "got.json").read_text())
    assert got["digest"] == hashlib.sha256(rotated.encode()).hexdigest()
    stored = _stored(ws)
    assert secret.encode() not in stored and rotated.encode() not in stored

"""An MCP connector's server credential is resolved when the run is prepared, as an HTTP
connector's is: a missing one pauses the run ``needs_credential`` (unsealed, no step run, the
server never called) with its setup commands; with it set up the same run completes, and a
resume without it is refused ``needs_credential`` with the run waiting as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.errors import ResumeRefused
from tests.runtime.connectors.mcp_support import Held, connector_workspace, roots
from tests.runtime.driver_support import (
    approve,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    session,
)
from tests.runtime.gateway.support import python_stdio_server

__all__ = ["roots"]  # the fixture, used by name

NOTES = """name: notes
mcp: py
operations:
  note.lookup:
    verb: read
    mcp: {tool: lookup, arguments: {key: $input.note}}
    inputs: {type: object, properties: {note: {type: string}}, required: [note]}
  note.record:
    verb: write
    approval: required
    mcp: {tool: record, arguments: {note: $input.note}}
    inputs: {type: object, properties: {note: {type: string}}, required: [note]}
"""

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    description: Look a note up, then record it.
    steps:
      - id: look
        operation: notes/note.lookup
        inputs: {note: n1}
      - id: record
        operation: notes/note.record
        idempotency_key: n1
        inputs: {note: n1}
"""

TOML = '[mcp.py]\ncredential = {provider = "pytest", env = "PY_TOKEN"}\n'
SECRET = "tok-py-op-51c0e2"


def test_a_missing_server_credential_pauses_the_run_before_any_step(
    tmp_path: Path, roots: Held
) -> None:
    state = tmp_path / "ws" / "upstream"
    state.mkdir(parents=True)
    (state / "description.txt").write_text("Look up a key.")
    servers = {"py": python_stdio_server(state)}
    root, ready = connector_workspace(
        tmp_path, roots, servers, ("jot", RUN_YAML), ("notes", NOTES), TOML, {"PY_TOKEN": SECRET}
    )  # pinned with the credential: `proctor mcp pin` starts the server
    environ = {k: v for k, v in ready.items() if k != "PY_TOKEN"}
    s = session(root, environ=environ)
    env = s.run("jot", cwd=root, authority=authority(effects="allow"))
    assert env.status == "needs_credential", (env.status, env.refusal)
    assert env.refusal is not None and env.refusal.code == "needs_credential"
    assert "PY_TOKEN" in json.dumps(env.to_json())  # the setup it needs is named
    assert s.store.calls(env.run_id or "") == []  # no step ran: nothing was called
    assert not (state / "notes.txt").exists()
    # set up, the run goes on to the write's approval, and with it runs once
    env = session(root, environ=ready).run("jot", cwd=root, authority=authority(effects="allow"))
    assert env.status == "needs_approval", env.refusal
    # a resume whose environment lost the credential is refused; the run waits as it was
    with pytest.raises(ResumeRefused) as refused:
        session(root, environ=environ).resume(env.run_id or "", approve(env))
    assert refused.value.code == "needs_credential"
    assert not (state / "notes.txt").exists()
    done = session(root, environ=ready).resume(env.run_id or "", approve(env))
    assert done.outcome == "completed", done.refusal
    assert (state / "notes.txt").read_text() == "n1\n"
    assert SECRET not in json.dumps(done.to_json())


def test_the_credential_is_not_asked_for_a_run_that_calls_no_mcp_operation(
    tmp_path: Path, roots: Held
) -> None:
    state = tmp_path / "ws" / "upstream"
    state.mkdir(parents=True)
    (state / "description.txt").write_text("Look up a key.")
    run_yaml = RUN_YAML + (
        "  other:\n    description: Say hi.\n    steps:\n"
        "      - id: say\n        tool: echo\n        inputs: {text: hi}\n"
    )
    root, ready = connector_workspace(
        tmp_path, roots, {"py": python_stdio_server(state)}, ("jot", run_yaml),
        ("notes", NOTES), TOML, {"PY_TOKEN": SECRET},
    )  # fmt: skip
    environ = {k: v for k, v in ready.items() if k != "PY_TOKEN"}
    env = session(root, environ=environ).run("jot#other", cwd=root)
    assert env.outcome == "completed", env.refusal

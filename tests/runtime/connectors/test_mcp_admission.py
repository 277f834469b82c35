"""What an MCP connector's operation (and an ``mcp:`` tool) would send is checked at admission,
against the upstream tool's pinned definition, before a person is asked to approve it: arguments
the upstream would refuse are refused ``schema_invalid`` with nothing asked and nothing sent
(the upstream's notes file never written, its request log unchanged)."""

from __future__ import annotations

from pathlib import Path

from tests.runtime.connectors.mcp_support import Held, connector_workspace, roots
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    session,
)
from tests.runtime.gateway.support import HttpUpstream, http_upstream, python_stdio_server

__all__ = ["http_upstream", "roots"]  # fixtures, used by name

# the operation's own inputs admit anything: only the upstream's pinned schema says `note` is a
# required string
LOOSE = """name: loose
mcp: py
operations:
  note.record:
    verb: write
    approval: required
    mcp: {tool: record, arguments: {note: $input.note}}
    inputs: {type: object, properties: {note: {}}}
"""

RUN_YAML = """minimum_proctor: 0.1.0
default_method: number
methods:
  number:
    description: Record a number where the upstream takes text.
    steps:
      - id: put
        operation: loose/note.record
        idempotency_key: k1
        inputs: {note: 5}
  missing:
    description: Record without the argument the upstream requires.
    steps:
      - id: put
        operation: loose/note.record
        idempotency_key: k2
        inputs: {}
  fits:
    description: Record text.
    steps:
      - id: put
        operation: loose/note.record
        idempotency_key: k3
        inputs: {note: fits}
  tool:
    description: Call the upstream tool itself with a number.
    steps:
      - id: put
        tool: mcp:py/record
        inputs: {note: 5}
  turn:
    description: A turn offered the operation and the tool.
    steps:
      - id: draft
        agent:
          instructions: Keep notes.
          calls: {operations: [loose/*], tools: [mcp:py/record]}
"""


def _stdio(tmp_path: Path, held: Held) -> tuple[Path, dict[str, str], Path]:
    state = tmp_path / "ws" / "upstream"  # inside the workspace: the sandbox shows it
    state.mkdir(parents=True)
    (state / "description.txt").write_text("Look up a key.")
    root, environ = connector_workspace(
        tmp_path, held, {"py": python_stdio_server(state)}, ("jot", RUN_YAML), ("loose", LOOSE)
    )
    return root, environ, state / "notes.txt"


def test_operation_arguments_that_do_not_fit_the_pinned_schema_are_never_asked_for(
    tmp_path: Path, roots: Held
) -> None:
    root, environ, notes = _stdio(tmp_path, roots)
    for method in ("number", "missing"):
        # approval: required would ask a person for this write under any effects but none
        env = session(root, environ=environ).run(
            f"jot#{method}", cwd=root, authority=authority(effects="ask")
        )
        assert env.status == "sealed", (method, env.status, env.requests)
        assert env.refusal is not None and env.refusal.code == "schema_invalid", env.refusal
        assert "pinned input schema" in env.refusal.message
        assert not env.requests
        s = session(root, environ=environ)
        assert s.store.requests(env.run_id or "") == []  # nothing was ever asked
    assert not notes.exists()  # nothing reached the server
    # the same operation with arguments that fit is asked for, exactly as before
    fits = session(root, environ=environ).run("jot#fits", cwd=root, authority=authority())
    assert fits.status == "needs_approval", fits.refusal


def test_an_mcp_tool_steps_arguments_are_checked_against_the_pin_before_asking(
    tmp_path: Path, roots: Held
) -> None:
    root, environ, notes = _stdio(tmp_path, roots)
    env = session(root, environ=environ).run("jot#tool", cwd=root, authority=authority())
    assert env.status == "sealed", env.requests
    assert env.refusal is not None and env.refusal.code == "schema_invalid", env.refusal
    assert not env.requests
    assert not notes.exists()


def test_a_turns_calls_are_checked_against_the_pin_before_asking(
    tmp_path: Path, roots: Held
) -> None:
    root, environ, notes = _stdio(tmp_path, roots)
    env = session(root, environ=environ).run("jot#turn", cwd=root, authority=authority())
    assert env.status == "needs_agent", env.refusal
    s, run_id = session(root, environ=environ), env.run_id or ""
    op = s.turn_call(
        run_id, "draft", "operation:loose/note.record", {"note": [1], "idempotency_key": "t"}, "c1"
    )
    assert op.code == "schema_invalid", op.error
    tool = s.turn_call(run_id, "draft", "mcp:py/record", {"note": 7}, "c2")
    assert tool.code == "schema_invalid", tool.error
    # nothing waits on a person: only the turn itself is open
    assert [r.address for r in s.store.requests(run_id)] == ["draft"]
    assert not notes.exists()


def test_over_http_a_refused_operation_sends_the_server_nothing(
    tmp_path: Path, roots: Held, http_upstream: HttpUpstream
) -> None:
    toml = '[egress]\nallow = ["127.0.0.1"]\n'
    servers = {"py": {"type": "http", "url": http_upstream.url}}
    root, environ = connector_workspace(
        tmp_path, roots, servers, ("jot", RUN_YAML), ("loose", LOOSE), toml
    )
    seen = len(http_upstream.requests())  # pinning listed the tools
    env = session(root, environ=environ).run("jot", cwd=root, authority=authority(effects="allow"))
    assert env.refusal is not None and env.refusal.code == "schema_invalid", env.refusal
    assert not env.requests
    assert len(http_upstream.requests()) == seen  # not even a connection's first request
    assert http_upstream.calls() == []

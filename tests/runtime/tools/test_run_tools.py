"""``run.read``: a skill reads its own run, pages its events by cursor, reads a run of its own
tree, and is refused any other run of the workspace (attack: a run id taken from history)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

READER = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties:
        run_id: {type: string}
        after: {type: integer}
    steps:
      - id: mark
        tool: echo
        inputs: {text: private-marker}
      - id: own
        tool: run.read
        inputs: {}
      - id: other
        tool: run.read
        inputs: {run_id: $input.run_id}
    result_from: [own, other]
"""

OWN_ONLY = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: own
        tool: run.read
        inputs: {}
    result_from: [own]
"""

PARENT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: child
        skill: ../child
        inputs: {}
    result_from: [child]
"""

CHILD = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {}
    steps:
      - id: own
        tool: run.read
        inputs: {}
    result_from: [own]
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "reader", READER)
    make_skill(root, "own", OWN_ONLY)
    make_skill(root, "parent", PARENT)
    make_skill(root, "child", CHILD)
    return root


def test_a_run_reads_itself_and_pages_its_events(ws: Path) -> None:
    env = session(ws).run("own", cwd=ws)
    assert env.outcome == "completed", env.refusal
    own = env.result
    assert own["schema"] == "proctor.run_read.v1"
    assert own["run_id"] == env.run_id and own["status"] == "running"
    seqs = [e["seq"] for e in own["events"]]
    assert seqs == sorted(seqs) and seqs[0] == 1
    assert own["next_cursor"] is None


def test_another_run_of_the_workspace_is_refused(ws: Path) -> None:
    first = session(ws).run("own", cwd=ws)
    assert first.outcome == "completed"
    env = session(ws).run("reader", inputs={"run_id": first.run_id}, cwd=ws)
    assert env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "run_not_in_tree"
    assert first.run_id not in json.dumps(env.result or {})
    for bad in ("../x", "A" * 32, ""):
        refused = session(ws).run("reader", inputs={"run_id": bad}, cwd=ws)
        assert refused.refusal is not None and refused.refusal.code == "schema_invalid"


def test_a_run_id_the_store_does_not_hold_is_refused(ws: Path) -> None:
    env = session(ws).run("reader", inputs={"run_id": "0" * 32}, cwd=ws)
    assert env.refusal is not None and env.refusal.code == "run_not_found"


def _read(ws: Path, caller: str, **args: object) -> dict[str, object]:
    from proctor.runtime.tools.base import ToolContext
    from proctor.runtime.tools.run_tools import RUN_READ

    s = session(ws)
    return RUN_READ.handler(ToolContext(s.workspace, s.store, caller, "call-1"), dict(args))


def test_events_page_by_cursor_within_one_tree(ws: Path) -> None:
    from proctor.errors import ToolFailed
    from proctor.runtime.records.runs import RunRecord

    store = session(ws).store
    root, child, stranger = "a" * 32, "b" * 32, "c" * 32
    store.create_run(RunRecord(run_id=root, skill="parent", method="main"))
    store.create_run(RunRecord(run_id=child, skill="child", method="main", data={"tree": root}))
    store.create_run(RunRecord(run_id=stranger, skill="other", method="main"))
    for n in range(5):
        store.append_event(root, "note", {"n": n})
    first = _read(ws, child, run_id=root, after=2, limit=2)
    assert [e["seq"] for e in first["events"]] == [3, 4]  # type: ignore[index]
    assert first["next_cursor"] == 4
    rest = _read(ws, child, run_id=root, after=4, limit=2)
    assert [e["seq"] for e in rest["events"]] == [5]  # type: ignore[index]
    assert rest["next_cursor"] is None
    assert _read(ws, root, run_id=child)["run_id"] == child  # a root reads its children
    with pytest.raises(ToolFailed) as refused:
        _read(ws, child, run_id=stranger)
    assert refused.value.code == "run_not_in_tree"


def test_a_child_reads_its_own_run(ws: Path) -> None:
    env = session(ws).run("parent", cwd=ws)
    assert env.outcome == "completed", env.refusal
    child = env.result
    assert child["schema"] == "proctor.run_read.v1" and child["run_id"] != env.run_id


BUNDLE = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: read
        tool: fs.read_bundle
        inputs: {paths: [notes.md, .env]}
    result_from: [read]
"""


def test_a_sensitive_file_in_a_bundle_refuses_the_whole_read(tmp_path: Path) -> None:
    # fs.read_bundle is under the shipped sensitive-paths rule as fs.read is: one .env among
    # the paths refuses the call, and nothing of either file comes back
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "bundle", BUNDLE)
    (root / "notes.md").write_text("public notes\n")
    (root / ".env").write_text("API_TOKEN=very-secret-token-value\n")
    env = session(root).run("bundle", cwd=root)
    assert env.refusal is not None and env.refusal.code == "sensitive_path"
    text = json.dumps(env.to_json())
    assert "very-secret-token-value" not in text and "public notes" not in text

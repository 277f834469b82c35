"""Rows in the shared queue that ``proctor submit`` never wrote: anyone with access to the
database can insert one, so a worker reads each as a document from outside.

- a real ``proctor worker`` process takes hostile rows (a body that is a list, empty, of wrong
  types, not JSON, nested 100,000 deep, with a repeated key; an unknown kind; a run id that is
  not one; a ``cwd`` or a local skill outside the workspace, by ``..``, by an absolute path or
  by a symbolic link): each is settled ``failed`` with a code, nothing runs, no traceback, and
  the same slot then drives a good submission;
- ``proctor run --submit`` refuses, before queueing, a reference outside the workspace;
- an unexpected error while driving one submission (a bug) fails that submission as
  ``worker_error``, without its message, and the slot drives the next one.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.fleet.support import (
    proctor,
    run_status,
    shared_workspace,
    start_worker,
    wait_for,
)

OUTSIDE_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: finish
        tool: echo
        inputs: {text: outside}
"""

DEEP = "[" * 100_000 + "]" * 100_000


def _id(n: int) -> str:
    return f"{n:032x}"


# (kind, run id, body as stored, the code it is failed with)
HOSTILE: list[tuple[str, str, str, str]] = [
    ("start", _id(1), "[]", "submission_invalid"),
    ("start", _id(2), "{}", "submission_invalid"),
    ("start", _id(3), '{"ref": 5}', "submission_invalid"),
    ("start", _id(4), "not json", "submission_invalid"),
    ("start", _id(5), '{"ref": "appender", "inputs": [1]}', "submission_invalid"),
    ("start", _id(6), '{"ref": "appender", "cli_inputs": 5}', "submission_invalid"),
    ("start", _id(7), '{"ref": "appender", "cli_inputs": [7]}', "submission_invalid"),
    ("start", _id(8), '{"ref": "appender", "authority": "x"}', "submission_invalid"),
    ("start", _id(9), '{"ref": "appender", "authority": {"effects": []}}', "authority_invalid"),
    ("start", _id(10), '{"ref": "appender", "cwd": "../.."}', "submission_invalid"),
    ("start", _id(11), '{"ref": "appender", "cwd": "/"}', "submission_invalid"),
    ("start", _id(12), '{"ref": "appender", "cwd": "out"}', "submission_outside_workspace"),
    ("start", _id(13), '{"ref": "../outside"}', "submission_outside_workspace"),
    ("start", _id(14), '{"ref": "OUTSIDE"}', "submission_outside_workspace"),
    ("start", _id(15), '{"ref": "appender", "inputs": {"line": NaN}}', "submission_invalid"),
    ("start", _id(16), '{"ref": "appender", "ref": "../outside"}', "duplicate_key"),
    ("start", _id(17), DEEP, "too_deep"),
    ("start", _id(18), '{"ref": "appender", "surprise": 1}', "submission_invalid"),
    ("start", _id(19), '{"ref": "appender", "cli_inputs": ["noequals"]}', "input_malformed"),
    ("start", _id(25), '{"ref": "appender", "profile": ["hunter2"]}', "submission_invalid"),
    ("resume", _id(20), "[]", "submission_invalid"),
    ("resume", _id(21), '{"document": []}', "submission_invalid"),
    ("resume", _id(22), '{"document": "x", "extra": 1}', "submission_invalid"),
    ("bogus", _id(23), "{}", "submission_invalid"),
    ("start", "../../etc", '{"ref": "appender"}', "submission_invalid"),
    ("start", "", '{"ref": "appender"}', "submission_invalid"),
]


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], str]]:
    with shared_workspace(tmp_path) as (root, env, url):
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "SKILL.md").write_text(
            (root / "skills" / "appender" / "SKILL.md").read_text().replace("appender", "outside")
        )
        (outside / "run.yaml").write_text(OUTSIDE_YAML)
        (root / "out").symlink_to(tmp_path, target_is_directory=True)
        (root / "skills" / "escape").symlink_to(outside, target_is_directory=True)
        yield root, env, url


def _insert(store: Any, kind: str, run_id: str, body: str) -> int:
    rows = store._rows(
        "INSERT INTO submissions (kind, run_id, body, due_at)"
        " VALUES (%s, %s, %s, extract(epoch from clock_timestamp())) RETURNING id",
        (kind, run_id, body),
    )
    return int(rows[0][0])


def test_hostile_rows_are_failed_with_a_code_and_the_worker_drives_the_next(
    shared: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    store = PostgresRunStore(url)
    cases = [
        (kind, run_id, body.replace("OUTSIDE", str(tmp_path / "outside")), code)
        for kind, run_id, body, code in HOSTILE
    ]
    cases.append(("start", _id(24), '{"ref": "skills/escape"}', "submission_outside_workspace"))
    ids = {_insert(store, kind, run_id, body): code for kind, run_id, body, code in cases}
    good = _id(99)
    _insert(store, "start", good, json.dumps({"ref": "appender", "inputs": {"line": "ok"}}))
    log = tmp_path / "worker.log"
    worker = start_worker(root, env, concurrency=1, log=log)  # one slot takes every row
    try:
        wait_for(
            lambda: run_status(store, good) == "needs_approval",
            90,
            "the good submission after the hostile ones",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(30)
    text = log.read_text()
    assert code == 0, text
    assert "Traceback" not in text and "Error:" not in text, text
    rows = dict(
        (int(sid), (state, note))
        for sid, state, note in store._rows("SELECT id, state, note FROM submissions")
    )
    for sid, expected in ids.items():
        state, note = rows[sid]
        assert state == "failed" and note.startswith(f"{expected}: "), (sid, state, note)
        assert f"failed ({expected})" in text
        assert "hunter2" not in note and str(tmp_path) not in note  # never the value
    runs = [r[0] for r in store._rows("SELECT run_id FROM runs")]
    assert runs == [good]  # nothing hostile started a run, the outside skill included
    assert not (root / "lines.txt").exists()
    assert store._rows("SELECT * FROM leases WHERE holder <> ''") == []


def test_submit_refuses_a_skill_outside_the_workspace_and_queues_nothing(
    shared: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    store = PostgresRunStore(url)
    for ref in ("../outside", str(tmp_path / "outside"), "skills/escape"):
        out = proctor(root, env, ["run", ref, "--submit"])
        assert out.returncode == 2, (ref, out.stdout, out.stderr)
        assert "submission_outside_workspace" in out.stderr and "Traceback" not in out.stderr
    out = proctor(root, env, ["run", "appender", "-i", "line=x", "--submit", "--json"])
    assert out.returncode == 0, out.stderr
    ((kind, body),) = store._rows("SELECT kind, body FROM submissions")
    assert kind == "start" and json.loads(body)["cwd"] == "."


def test_an_unexpected_error_fails_its_submission_and_the_slot_goes_on(
    shared: tuple[Path, dict[str, str], str],
) -> None:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.fleet.daemon import Worker
    from proctor.runtime.fleet.queue import Submission
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    store = PostgresRunStore(url)
    doomed, good = _id(1), _id(2)

    class Buggy(Worker):
        """A worker with a bug in driving one run: what no hostile row should reach."""

        def _start_or_resume(self, session: Any, work: Submission) -> Any:
            if work.run_id == doomed:
                raise KeyError("hunter2")
            return super()._start_or_resume(session, work)

    lines: list[str] = []
    body = json.dumps({"ref": "appender", "inputs": {"line": "ok"}})
    first = _insert(store, "start", doomed, body)
    _insert(store, "start", good, body)
    worker = Buggy(Workspace.discover(root), env, concurrency=1, log=lines.append)
    serving = threading.Thread(target=worker.serve)
    serving.start()
    try:
        wait_for(
            lambda: run_status(store, good) == "needs_approval",
            90,
            "the next submission after the bug",
        )
    finally:
        worker.stop.set()
        serving.join(60)
    assert not serving.is_alive()
    ((state, note),) = store._rows("SELECT state, note FROM submissions WHERE id = %s", (first,))
    assert state == "failed"
    assert note.startswith("worker_error: unexpected KeyError at test_hostile_submissions.py:")
    assert not any("hunter2" in line for line in lines) and "hunter2" not in note
    assert any(line.startswith(f"submission {first}: failed (worker_error") for line in lines)
    assert store.get_run(doomed) is None

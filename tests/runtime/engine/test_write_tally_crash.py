"""A run's write tally commits with the call it counts, on SQLite and PostgreSQL: a driver
killed inside the settling transaction (after the tally is written, before the commit) leaves
neither the settlement nor the count; one killed after the commit leaves both. A governor in
the next process starts from what committed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.policy import write_tally
from tests.pg import fresh_schema
from tests.runtime.driver_support import make_workspace

REPO = Path(__file__).resolve().parents[3]

DRIVER = """
import json, sys
from proctor.core.authority import parse_authority
from proctor.receipts.signing import signer_from_seed
from proctor.runtime.admission.governor import CallSpec, Governor
from proctor.runtime.boundary.sanitize import Sanitizer
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.runtime.records.runs import RunRecord

root, url, names = sys.argv[1], sys.argv[2], sys.argv[3]
s = Session(Workspace(root), environ={"PROCTOR_HOME": root + "/.home"},
            signer=signer_from_seed(bytes(range(32))))
if url == "sqlite":
    store = s.store
else:
    from proctor.runtime.records.postgres import PostgresRunStore
    store = PostgresRunStore(url)
if store.get_run("r") is None:
    store.create_run(RunRecord(run_id="r", skill="k", method="m"))
policies, guards, _ = s.policy()
governor = Governor(
    run_id="r", workspace=s.workspace, store=store, tools=s.tools, policies=policies,
    guards=guards, audit=s.audit, sanitizer=Sanitizer(),
    authority=parse_authority({"effects": "allow"}), write_budget=2,
)
out = []
for name in names:
    args = {"path": name + ".md", "content": name, "create": True}
    spec = CallSpec("fs.write", args, frozenset({"fs.write"}), step_id="s", call_id="w-" + name,
                    reason="a note")
    o = governor.call(spec)
    out.append([o.status, o.code])
print(json.dumps(out))
"""


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        yield "sqlite"
        return
    with fresh_schema() as url:
        yield url


def _drive(root: Path, where: str, names: str, kill_at: str | None = None) -> Any:
    env = {"PYTHONPATH": str(REPO / "src"), "PROCTOR_HOME": str(root / ".home")}
    if kill_at is not None:
        env |= {"PROCTOR_TEST_HOOKS": "1", "PROCTOR_TEST_KILL_AT": kill_at}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(root), where, names],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=120, cwd=root,
    )  # fmt: skip
    if kill_at is not None:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        return None
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _state(root: Path, where: str) -> tuple[dict[str, str], Any]:
    if where == "sqlite":
        from proctor.runtime.records.sqlite import SQLiteRunStore

        store: Any = SQLiteRunStore(root / ".proctor" / "runs.sqlite")
    else:
        from proctor.runtime.records.postgres import PostgresRunStore

        store = PostgresRunStore(where)
    try:
        calls = {c.call_id: c.state for c in store.calls("r")}
        run = store.get_run("r")
        return calls, None if run is None else run.data.get(write_tally.KEY)
    finally:
        store.close()


def test_the_tally_commits_with_the_settlement_it_counts(tmp_path: Path, where: str) -> None:
    root = make_workspace(tmp_path / "ws")
    # killed inside the transaction: the write happened, neither settlement nor count kept
    _drive(root, where, "a", kill_at="call.counted:1")
    assert (root / "a.md").exists()
    assert _state(root, where) == ({"w-a": "claimed"}, None)
    # killed right after the commit: both kept
    _drive(root, where, "b", kill_at="call.settled:1")
    assert _state(root, where) == (
        {"w-a": "claimed", "w-b": "settled"},
        {"changing": 1, "paths": ["b.md"], "unheld": 0, "first": ["b.md"]},
    )
    # the next process's governor starts from the committed count: one more, then refused
    assert _drive(root, where, "cd") == [["completed", None], ["refused", "write_budget_exceeded"]]
    assert (root / "c.md").exists() and not (root / "d.md").exists()
    assert _state(root, where)[1]["paths"] == ["b.md", "c.md"]

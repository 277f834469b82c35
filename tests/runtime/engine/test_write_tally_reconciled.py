"""A write a crash left unsettled still spends the run's write budget (attack test).

A driver killed after its write took effect and before the write was settled leaves a claim;
the next driver confirms it by the file's digest and settles it. That settlement must count
in the run's write tally like any other, or each crash buys the run one more write than
``PROCTOR_WRITE_BUDGET`` allows. With a budget of 2 and three write steps, killed after the
first write: the resumed run confirms the first, writes the second, and the third is refused
and writes nothing. On SQLite and PostgreSQL, through the real CLI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.policy import write_tally
from tests.crash.harness import proctor
from tests.pg import fresh_schema
from tests.runtime.driver_support import make_skill, make_workspace

THREE_WRITES = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: a
        tool: fs.write
        inputs: {path: a.md, content: "a\\n", create: true}
      - id: b
        tool: fs.write
        inputs: {path: b.md, content: "b\\n", create: true}
      - id: c
        tool: fs.write
        inputs: {path: c.md, content: "c\\n", create: true}
"""


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    with fresh_schema() as url:
        yield url


def _run(root: Path, url: str | None) -> tuple[str, dict[str, Any]]:
    """The one run the store holds: its id and data."""
    from proctor.runtime.records.backend import open_run_store

    environ = {} if url is None else {"PROCTOR_DATABASE_URL": url}
    store = open_run_store(root / ".proctor", environ, ".proctor")
    try:
        (run,) = store.list_runs()
        return run.run_id, run.data
    finally:
        store.close()


def test_a_write_confirmed_after_a_crash_spends_the_budget(
    tmp_path: Path, database: str | None
) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "writes", THREE_WRITES)
    if database is not None:
        (root / ".pg_url").write_text(database)  # the harness's CLI runs on this store
    budget = {"PROCTOR_WRITE_BUDGET": "2"}
    killed = proctor(
        root, ["run", "writes", "--json"], env={**budget, "PROCTOR_TEST_KILL_AT": "call.executed:1"}
    )
    assert killed.returncode == -9, killed.stderr
    assert (root / "a.md").read_text() == "a\n"  # the write took effect, unsettled
    run_id, data = _run(root, database)
    assert write_tally.KEY not in data  # nothing counted yet
    out = proctor(root, ["resume", run_id, "-", "--json"], stdin="{}", env=budget)
    envelope = json.loads(out.stdout)
    assert envelope["status"] == "sealed", envelope
    assert (root / "b.md").read_text() == "b\n"
    assert not (root / "c.md").exists()  # the third write is over the budget
    refusal = envelope.get("refusal") or {}
    assert refusal.get("code") == "write_budget_exceeded", envelope
    _, data = _run(root, database)
    assert data[write_tally.KEY]["changing"] == 2
    assert data[write_tally.KEY]["paths"] == ["a.md", "b.md"]

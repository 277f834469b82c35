"""A running ``proctor worker`` settles deadlines by itself: a request that expires in a
workspace where nobody runs another command is decided by its default, as ``deadline``."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.runtime.fleet.support import proctor, shared_workspace, start_worker, wait_for

EXPIRING = """minimum_proctor: 0.1.0
methods:
  ship:
    description: Ship once approved.
    steps:
      - id: confirm
        ask: {reason: Ship it?, expires_in: 10}
"""


def test_a_worker_declines_an_expired_request(tmp_path: Path) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    with shared_workspace(tmp_path) as (root, env, url):
        pkg = root / "skills" / "expiring"
        pkg.mkdir(parents=True)
        (pkg / "SKILL.md").write_text("---\nname: expiring\ndescription: Expires.\n---\n")
        (pkg / "run.yaml").write_text(EXPIRING)
        run = proctor(root, env, ["run", "expiring", "--json"])
        assert run.returncode == 10, run.stderr
        run_id = json.loads(run.stdout)["run_id"]
        store = PostgresRunStore(url)
        before = store.get_run(run_id)
        if before is None or before.status != "needs_approval":
            pytest.skip(f"the run is {before and before.status}: its own command settled it")
        worker = start_worker(root, env, log=tmp_path / "worker.log")
        try:

            def sealed() -> bool:
                record = store.get_run(run_id)
                return record is not None and record.status == "sealed"

            wait_for(sealed, 60, "the worker to settle the deadline")
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
        record = store.get_run(run_id)
        assert record is not None and record.outcome == "declined"
        (request,) = store.requests(run_id)
        assert request.decision is not None and request.decision["decided_by"] == "deadline"

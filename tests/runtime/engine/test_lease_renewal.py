"""A driver renews its run's lease before a step only when it took or renewed it more than a
tenth of the lease's time ago, and always before the seal: a run of short steps makes one
renewal, a step that outlasts a tenth of the lease is followed by one, and a lease another
driver holds stops the run before its seal writes any receipt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from proctor.errors import LeaseLost
from proctor.runtime.records.sqlite import SQLiteRunStore
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

ECHOES = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - {id: a, tool: echo, inputs: {text: a}}
      - {id: b, tool: echo, inputs: {text: b}}
      - {id: c, tool: echo, inputs: {text: c}}
"""

SLOW = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: wait
        tool: command.execute
        inputs: {argv: [PYTHON, -c, "import time; time.sleep(0.4)"]}
      - {id: after, tool: echo, inputs: {text: after}}
"""


class Renewals(SQLiteRunStore):
    """The real store, counting lease renewals."""

    renewed = 0
    steal_before_seal = False

    def renew_lease(self, run_id: str, holder: str, ttl_seconds: float) -> bool:
        self.renewed += 1
        return super().renew_lease(run_id, holder, ttl_seconds)

    def settle_step(self, run_id: str, step_id: str, body: dict, **kw: object) -> None:  # type: ignore[override]
        super().settle_step(run_id, step_id, body, **kw)  # type: ignore[arg-type]
        lease = self.lease(run_id)
        if self.steal_before_seal and step_id == "c" and lease is not None:
            # another driver takes the run over (after a release, as a lapse would let it)
            self.release_lease(run_id, lease.holder)
            self.acquire_lease(run_id, "elsewhere|1|0.00|ff", 600)


def _counted(root: Path) -> tuple[object, Renewals]:
    s = session(root)
    store = Renewals(root / ".proctor" / "runs.sqlite")
    s._store = store
    return s, store


def test_short_steps_renew_once_before_the_seal(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "echoes", ECHOES)
    s, store = _counted(ws)
    env = s.run("echoes", cwd=ws)  # type: ignore[attr-defined]
    assert env.outcome == "completed"
    assert store.renewed == 1  # the seal's; each step's renewal was less than 60 s after
    assert _packs(ws)  # the seal wrote its receipts


def test_a_step_longer_than_a_tenth_of_the_lease_is_followed_by_a_renewal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_LEASE_TTL", "1")  # a tenth: 0.1 s; the command takes 0.4 s
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "slow", SLOW.replace("PYTHON", json.dumps(sys.executable)))
    s, store = _counted(ws)
    env = s.run("slow", cwd=ws)  # type: ignore[attr-defined]
    assert env.outcome == "completed", env.refusal
    assert store.renewed == 2  # before the step after the command, and before the seal


def test_a_lease_taken_over_stops_the_run_before_its_seal(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "echoes", ECHOES)
    s, store = _counted(ws)
    store.steal_before_seal = True
    with pytest.raises(LeaseLost):
        s.run("echoes", cwd=ws)  # type: ignore[attr-defined]
    run = store.list_runs(limit=1)[0]
    assert run.status != "sealed" and run.receipt_id is None
    assert _packs(ws) == []  # no receipt was written


def _packs(root: Path) -> list[Path]:
    folder = root / ".proctor" / "receipts" / "packs"
    return sorted(folder.iterdir()) if folder.exists() else []

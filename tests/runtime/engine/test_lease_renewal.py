"""A driver renews its run's lease before a step or its seal only when it took or renewed it
more than a tenth of the lease's time ago (before the seal it checks it otherwise): a run of
short steps makes no renewal, a step that outlasts a tenth of the lease is followed by one, and
a lease another driver holds, or one given back, stops the run before its seal writes any
receipt. The seal gives the lease back in its own transaction; a seal that fails keeps it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from proctor.errors import LeaseLost, StoreError
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


def test_short_steps_renew_nothing_and_the_seal_gives_the_lease_back(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "echoes", ECHOES)
    s, store = _counted(ws)
    env = s.run("echoes", cwd=ws)  # type: ignore[attr-defined]
    assert env.outcome == "completed"
    assert store.renewed == 0  # taken less than 60 s before each step and the seal
    assert _packs(ws)  # the seal wrote its receipts
    lease = store.lease(env.run_id)
    assert lease is not None and lease.holder == "" and lease.epoch == 1
    assert env.run_id not in store._fences  # its fence went with the committed release
    # another driver takes the sealed run at once (resume of a sealed run, say)
    assert store.acquire_lease(env.run_id, "elsewhere|1|0.00|ff", 600) is None


def test_a_step_longer_than_a_tenth_of_the_lease_is_followed_by_a_renewal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_LEASE_TTL", "1")  # a tenth: 0.1 s; the command takes 0.4 s
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "slow", SLOW.replace("PYTHON", json.dumps(sys.executable)))
    s, store = _counted(ws)
    env = s.run("slow", cwd=ws)  # type: ignore[attr-defined]
    assert env.outcome == "completed", env.refusal
    # before the step after the command; the seal checks it, or renews it once more when a
    # loaded machine let another tenth of the lease go by since (a count, never a duration)
    assert store.renewed in (1, 2)


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


def test_a_lease_given_back_before_the_seal_stops_it(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "echoes", ECHOES)
    s, store = _counted(ws)

    def release_after_c(run_id: str, step_id: str, body: dict, **kw: object) -> None:  # type: ignore[type-arg]
        Renewals.settle_step(store, run_id, step_id, body, **kw)
        if step_id == "c":
            store.release_lease(run_id, s.holder)  # type: ignore[attr-defined]

    store.settle_step = release_after_c  # type: ignore[method-assign]
    with pytest.raises(LeaseLost):
        s.run("echoes", cwd=ws)  # type: ignore[attr-defined]
    assert _packs(ws) == []  # checked, not renewed: still no receipt written


def test_a_seal_that_fails_keeps_the_lease_until_the_driving_ends(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "echoes", ECHOES)
    s, store = _counted(ws)
    seen: list[tuple[str, bool]] = []

    def release_then_fail(run_id: str, holder: str) -> None:
        if not store._depth:  # the driver's own, after the failed seal: the fence is there
            seen.append((run_id, run_id in store._fences))
        SQLiteRunStore.release_lease(store, run_id, holder)
        if store._depth:  # the seal's: its commit fails after the release (a full disk)
            raise StoreError("the disk is full", code="store_full")

    store.release_lease = release_then_fail  # type: ignore[method-assign]
    with pytest.raises(StoreError) as info:
        s.run("echoes", cwd=ws)  # type: ignore[attr-defined]
    assert info.value.code == "seal_failed"
    run = store.list_runs(limit=1)[0]
    assert run.status != "sealed"
    # the seal's transaction rolled back with its release, which kept the fence; the
    # driver's own release then gave the lease back (a resume may take it at once)
    assert seen and seen[-1] == (run.run_id, True)
    lease = store.lease(run.run_id)
    assert lease is not None and lease.holder == ""
    assert run.run_id not in store._fences


def _packs(root: Path) -> list[Path]:
    folder = root / ".proctor" / "receipts" / "packs"
    return sorted(folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize(
    "given", [None, "", "5", "30.5", "0.5", "1e9", "abc", " 7 ", "\uff15", "nan", "\udcff"]
)
def test_the_lease_ttl_is_the_variable_as_os_environ_gives_it_now(
    monkeypatch: pytest.MonkeyPatch, given: str | None
) -> None:
    """lease_ttl's answer is the one os.environ.get's text gives, whatever the text (a fullwidth
    digit, an undecodable byte), and a change between two calls is seen by the second."""
    import os

    from proctor.runtime.engine.lease import LEASE_TTL_SECONDS, lease_ttl

    def expected() -> float:
        text = os.environ.get("PROCTOR_LEASE_TTL")
        try:
            value = float(text) if text else LEASE_TTL_SECONDS
        except ValueError:
            return LEASE_TTL_SECONDS
        return value if 1.0 <= value <= 86400.0 else LEASE_TTL_SECONDS

    monkeypatch.setenv("PROCTOR_LEASE_TTL", "42")
    assert lease_ttl() == 42.0
    if given is None:
        monkeypatch.delenv("PROCTOR_LEASE_TTL")
    else:
        monkeypatch.setenv("PROCTOR_LEASE_TTL", given)
    assert lease_ttl() == expected()
    # a mapping put in place of os.environ is asked as it is
    monkeypatch.setattr(os, "environ", {"PROCTOR_LEASE_TTL": "9"})
    assert lease_ttl() == 9.0

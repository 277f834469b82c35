"""A seal reads who decided the run's requests unless its driver knows there is none: the
driver created the run and recorded no request (only a lease holder records one). A driver
that recorded one reads them, so a decision is never left out of the receipts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.engine import drive, pausing
from proctor.runtime.engine.session import Session
from proctor.runtime.records.runs import RequestRecord
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  ship:
    description: Ship once approved.
    steps:
      - id: confirm
        ask: {reason: Ship it?}
      - id: say
        tool: echo
        inputs: {text: shipped}
  plain:
    description: Say it.
    steps:
      - id: say
        tool: echo
        inputs: {text: said}
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "gate", RUN_YAML)
    return ws


def _told(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each seal from now on was told the run has no request."""
    told: list[bool] = []
    real = pausing.seal_run  # the engine tests' guard (conftest), which checks the claim

    def seal_run(session: Any, record: Any, **kwargs: Any) -> Any:
        told.append(bool(kwargs.get("no_requests")))
        return real(session, record, **kwargs)

    monkeypatch.setattr(pausing, "seal_run", seal_run)
    return told


def _reads(s: Session, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The run ids whose requests the store is asked for from now on."""
    asked: list[str] = []
    real = type(s.store).requests

    def requests(store: Any, run_id: str) -> list[RequestRecord]:
        asked.append(run_id)
        return real(store, run_id)

    monkeypatch.setattr(type(s.store), "requests", requests)
    return asked


def test_a_fresh_run_that_asked_nothing_seals_without_reading_requests(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = session(root)
    told = _told(monkeypatch)
    env = s.run("gate#plain", cwd=root)
    assert (env.status, env.outcome) == ("sealed", "completed")
    assert told == [True]
    assert s.store.requests(env.run_id) == []


def test_a_driver_that_recorded_a_request_reads_them_at_its_seal(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = session(root)
    told = _told(monkeypatch)
    reads = _reads(s, monkeypatch)
    seen: list[tuple[bool, bool]] = []

    def seal_instead(run: drive.RunDriver, requests: list[RequestRecord]) -> Any:
        # the same driver seals the run it just asked about (declined, as a stop would)
        seen.append((run.fresh, run.asked))
        return pausing.seal(run, "declined", None, None, None)

    monkeypatch.setattr(drive.RunDriver, "pause", seal_instead)
    env = s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    assert seen == [(True, True)]
    assert told == [False]
    assert env.status == "sealed"
    assert len(s.store.requests(env.run_id)) == 1
    assert env.run_id in reads  # the seal looked for who decided it

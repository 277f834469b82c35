"""The crash harness's fencing points (see :mod:`tests.crash.stale`): a driver frozen past
its lease changes nothing once another took the run over, and a worker whose connections the
server ends keeps its heartbeat and drives its run to one seal. Each point reports its
violations; there must be none."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import drop_schemas
from tests.crash.stale import dropped_connection, stale_driver


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_stale_driver_is_fenced_off_and_the_effect_happens_once(
    tmp_path: Path, backend: str
) -> None:
    if backend == "postgres":
        from tests.pg import base_url

        base_url()  # skips, saying why, without PostgreSQL
    try:
        outcome = stale_driver(tmp_path / "ws", backend)
    finally:
        if backend == "postgres":
            drop_schemas()
    print(f"\n[{outcome.point}] ended {outcome.final_status}; violations: {outcome.violations}")
    assert outcome.violations == []


def test_a_dropped_connection_keeps_the_heartbeat_and_the_run_seals_once(
    tmp_path: Path,
) -> None:
    from tests.pg import base_url

    base_url()
    try:
        outcome = dropped_connection(tmp_path / "ws", tmp_path / "worker.log")
    finally:
        drop_schemas()
    print(f"\n[{outcome.point}] ended {outcome.final_status}; violations: {outcome.violations}")
    assert outcome.violations == [], (tmp_path / "worker.log").read_text()[-2000:]

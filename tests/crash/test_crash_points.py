"""kill -9 at every kill point of a run (its start, each step and call, pauses, the seal),
inside the bundle, and inside ``proctor key rotate``; every run and key stays consistent.

The figures (kill points, violations, how each run ended) are printed; run with ``-s`` to see
them. Cases: ``crashy`` (no inputs) under ``allow`` and ``ask``; ``inputful`` started with
``-i`` and with ``--inputs`` under both, and with invalid inputs (its start is refused);
``nested``: ``crashy`` as the child run of a ``skill:`` step, killed at every point inside it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.crash.harness import CASES, Outcome, all_scenarios
from tests.crash.rotation import rotation_scenarios
from tests.pg import base_url

RUNS = [
    ("crashy", "allow", 30),
    ("crashy", "ask", 35),
    ("inputs-i", "allow", 13),  # the two inputful cases share their points, half each
    ("inputs-i", "ask", 16),
    ("inputs-json", "allow", 13),
    ("inputs-json", "ask", 16),
    ("inputs-refused", "allow", 8),
    ("nested", "allow", 25),
]
"""(case, flavour, at least this many kill points)."""


def _report(label: str, outcomes: list[Outcome], started: float) -> list[str]:
    violations = [v for o in outcomes for v in o.violations]
    summary = "\n".join(f"  {o.point}: {o.final_status}" for o in outcomes)
    print(
        f"\n[{label}] kill points: {len(outcomes)}; violations: {len(violations)};"
        f" {time.monotonic() - started:.0f} s\n{summary}"
    )
    return violations


@pytest.mark.parametrize(("case", "flavour", "least"), RUNS)
def test_every_kill_point_leaves_the_run_consistent(
    tmp_path: Path, case: str, flavour: str, least: int
) -> None:
    started = time.monotonic()
    outcomes = all_scenarios(tmp_path, CASES[case], flavour)
    violations = _report(f"{case} {flavour}", outcomes, started)
    assert len(outcomes) >= least
    start_points = [o for o in outcomes if ": start." in o.point]
    assert len(start_points) >= 7, "the run's start is not covered"
    assert violations == [], "\n".join(violations)


PG_POINTS = frozenset({"start.committed", "call.executed", "resume.recorded"})
"""The kill points around the commits that matter most on PostgreSQL (kept few: each point is
several real driver processes): the run created, each effect done but not yet settled (the
claim committed before it must be reconciled, never repeated), a decision recorded."""


def test_kill_points_on_postgresql_leave_the_run_consistent(tmp_path: Path) -> None:
    """The crashy case (a bundle, an approval, a command) on PostgreSQL, killed around each
    commit; ``PROCTOR_CRASH_PG_ALL=1`` kills at every point instead (38 points under ``ask``;
    slow: each point is several real driver processes)."""
    base_url()
    started = time.monotonic()
    every = os.environ.get("PROCTOR_CRASH_PG_ALL") == "1"
    flavour = "ask" if every else "allow"
    outcomes = all_scenarios(
        tmp_path, CASES["crashy"], flavour, "postgres", None if every else PG_POINTS
    )
    violations = _report(f"crashy {flavour} postgres", outcomes, started)
    assert len(outcomes) >= (35 if every else 4)
    assert violations == [], "\n".join(violations)


def test_every_kill_point_of_a_key_rotation_keeps_receipts_trusted(tmp_path: Path) -> None:
    started = time.monotonic()
    outcomes = rotation_scenarios(tmp_path)
    violations = _report("key rotate", outcomes, started)
    assert len(outcomes) >= 5
    assert violations == [], "\n".join(violations)

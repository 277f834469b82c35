"""kill -9 at every recorded step boundary and inside the bundle; every run stays consistent.

The figures (kill points, violations, how each run ended) are printed; run with ``-s`` to see
them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import all_scenarios


@pytest.mark.parametrize("flavour", ["allow", "ask"])
def test_every_kill_point_leaves_the_run_consistent(tmp_path: Path, flavour: str) -> None:
    outcomes = all_scenarios(tmp_path, flavour)
    violations = [v for o in outcomes for v in o.violations]
    summary = "\n".join(f"  {o.point}: {o.final_status}" for o in outcomes)
    print(f"\n[{flavour}] kill points: {len(outcomes)}; violations: {len(violations)}\n{summary}")
    assert len(outcomes) >= 24
    assert violations == [], "\n".join(violations)

"""Every core skill's own ``proctor test`` files pass, replayed in-process (CI runs this; the
skills are copied out of the package first, so their test workspaces never land in the tree)."""

from __future__ import annotations

import shutil
from pathlib import Path

from proctor.runtime.packages.core import core_skill_names, shipped_folder
from proctor.testing.runner import collect, run_cases


def test_every_core_skill_has_tests_and_they_pass(tmp_path: Path) -> None:
    (tmp_path / ".proctor").mkdir()
    for name in core_skill_names():
        shutil.copytree(shipped_folder(name), tmp_path / "core" / name)
    cases = collect(tmp_path / "core")
    assert {c.package_folder.name for c in cases} == set(core_skill_names())
    results = run_cases(cases)
    failed = [(r.test_id, r.status, r.failures, r.error) for r in results if r.status != "passed"]
    assert not failed
    assert len(results) >= 2 * len(core_skill_names())

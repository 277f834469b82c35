"""``$run.act``: the act a host states when it starts a run is recorded with the run, so a step
after a pause (driven by another session) reads the same act; a refused act starts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import UsageError
from tests.runtime.driver_support import (
    approve,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

PAUSING = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: confirm
        ask: {reason: Go on?}
      - id: say
        tool: echo
        inputs: {text: $run.act.for}
    result_from: [say]
"""


def test_the_act_outlives_a_pause_and_a_new_session(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "pausing", PAUSING)
    paused = session(root).run("pausing", cwd=root, act={"for": "ops-team"})
    assert paused.status == "needs_approval"
    sealed = session(root).resume(paused.run_id or "", approve(paused))
    assert sealed.outcome == "completed", sealed.refusal
    assert sealed.result == {"text": "ops-team"}


@pytest.mark.parametrize("act", [float("nan"), {"x": "y" * (70 * 1024)}, {1: "non-string key"}])
def test_an_act_that_is_not_bounded_json_starts_no_run(tmp_path: Path, act: object) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "pausing", PAUSING)
    s = session(root)
    with pytest.raises(UsageError) as caught:
        s.run("pausing", cwd=root, act=act)
    assert caught.value.code == "act_invalid"
    assert s.store.list_runs() == []


PARENT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: child
        skill: ../actor
        inputs: {}
        reuse: {max_age_seconds: 86400}
    result_from: [child]
"""

ACTOR = """minimum_proctor: 0.1.0
methods:
  main:
    inputs: {type: object, properties: {}}
    steps:
      - id: say
        tool: echo
        inputs: {text: $run.act.for}
    result_from: [say]
"""


def test_a_child_reads_the_act_of_the_run_that_started_it_and_is_reused_only_under_it(
    tmp_path: Path,
) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "parent", PARENT)
    make_skill(root, "actor", ACTOR)
    first = session(root).run("parent", cwd=root, act={"for": "first-host"})
    assert first.outcome == "completed", first.refusal
    assert first.result == {"text": "first-host"}
    # the same child, inputs and package under another act: run again, never reused
    second = session(root).run("parent", cwd=root, act={"for": "second-host"})
    assert second.result == {"text": "second-host"}
    # under the first act again: the earlier child is reused
    s = session(root)
    third = s.run("parent", cwd=root, act={"for": "first-host"})
    assert third.result == {"text": "first-host"}
    reused = [r for r in s.store.list_runs() if r.data.get("reused_from")]
    assert len(reused) == 1

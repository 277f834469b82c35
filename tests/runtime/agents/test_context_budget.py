"""The context budget of a managed turn: a long turn's requests stay under it, older tool results
are summarised (never the latest, never their content kept), and each summary is recorded in the
turn's statistics and the audit log.

A stub model on loopback reads a large file again and again; every request it receives is
measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ConfigError
from proctor.runtime.agents import ManagedAgent
from proctor.runtime.agents.context import ContextBudget
from proctor.runtime.agents.sessions import DirectiveSession
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.home.config import agent_config
from tests.fuzzing import FUZZ
from tests.runtime.agent_stub import DIALECTS, Seen, StubModel, answer, config, tool_results

BUDGET = 30_000
READS = 8


def _script(dialect: str) -> list[Any]:
    def read(seen: Seen) -> Any:
        return answer(dialect, calls=[("read_file", {"path": "big.txt", "reason": "again"})])

    return [*([read] * READS), answer(dialect, text='{"done": true, "summary": "read"}')]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_long_turn_stays_under_its_budget(tmp_path: Path, dialect: str) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    line = "the quick brown fox jumps over the lazy dog %05d\n"
    (root / "big.txt").write_text("".join(line % i for i in range(200)), encoding="utf-8")
    with StubModel(_script(dialect)) as stub:
        agent = ManagedAgent(config(stub, dialect), view="reference", context_chars=BUDGET)
        session = DirectiveSession(
            Workspace(root), environ={"PROCTOR_HOME": str(root / ".home")}, agent_driver=agent
        )
        try:
            doc = session.run_directive("file_summary", "big.txt").to_json()
        finally:
            session.close()
            agent.close()
        seen = list(stub.seen)
    assert doc["outcome"] == "completed", doc
    assert len(seen) == READS + 1
    sizes = [len(json.dumps(s.body, ensure_ascii=False)) for s in seen]
    assert max(sizes) <= BUDGET, sizes
    # without the budget the last request would hold every read in full
    assert sizes[-1] < 10_000 * READS // 2
    last = tool_results(dialect, seen[-1])
    assert last[-1]["status"] == "completed" and "lazy dog 00199" in last[-1]["result"]["content"]
    elided = [r for r in last if r.get("elided_by_context_budget")]
    assert elided and all(r["tool"] == "read_file" and r["chars"] > 9_000 for r in elided)
    assert not any("lazy dog" in json.dumps(r) for r in elided)  # only what it was, not content
    assert [e["digest"] for e in agent.last.elided] == [r["digest"] for r in elided]
    audit = [
        json.loads(line)
        for line in (root / ".proctor" / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    [event] = [e for e in audit if e["event"] == "agent_context_elided"]
    assert event["run_id"] == doc["run_id"] and event["budget_chars"] == BUDGET
    assert len(event["results"]) == len(elided)


def test_the_latest_result_is_never_summarised() -> None:
    budget = ContextBudget(max_chars=10)
    texts = [json.dumps({"tool": "t", "status": "completed", "x": "a" * 50})] * 3
    chosen = budget.fit(texts, size=1_000)
    assert [index for index, _ in chosen] == [0, 1]
    # already summarised results are left as they are
    again = budget.fit([chosen[0][1], chosen[1][1], texts[2]], size=1_000)
    assert again == []


def test_the_budget_is_configured_within_bounds(tmp_path: Path) -> None:
    section = {"provider": "x", "model": "m", "dialect": "chat_completions",
               "endpoint_url": "http://127.0.0.1:9/v1"}  # fmt: skip
    assert agent_config(section={**section, "context_chars": 50_000}).context_chars == 50_000
    for bad in (999, True, "50000", 10**9):
        with pytest.raises(ConfigError):
            agent_config(section={**section, "context_chars": bad})


@FUZZ
@given(
    texts=st.lists(st.text(max_size=300), max_size=12),
    size=st.integers(min_value=0, max_value=10_000),
    limit=st.integers(min_value=0, max_value=5_000),
)
def test_fit_never_touches_the_latest_and_goes_oldest_first(
    texts: list[str], size: int, limit: int
) -> None:
    budget = ContextBudget(max_chars=limit)
    chosen = budget.fit(texts, size)
    indexes = [index for index, _ in chosen]
    assert indexes == sorted(set(indexes))
    assert not texts or len(texts) - 1 not in indexes
    assert len(budget.elided) == len(chosen)
    if size <= limit:
        assert chosen == []

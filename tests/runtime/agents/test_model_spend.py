"""A managed turn's model requests spend from the tree's limit: the provider's declared `cost`
is reserved (worst case) before each request and settled with the usage the provider reports.
Over the limit nothing is sent: the stub model server counts what reached it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proctor.core.spend import (
    Price,
    SpendLedger,
    SpendRefused,
    model_request_cost,
    model_request_quote,
    parse_prices,
)
from proctor.errors import ConfigError, UsageError
from proctor.receipts.model import parse_envelope
from proctor.runtime.agents import ManagedAgent
from proctor.runtime.engine.metering import ModelMeter, reported_tokens
from proctor.runtime.home.config import agent_config, set_agent_value
from tests.runtime.agent_stub import DIALECTS, StubModel, answer, config
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

TURN = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: think
        agent:
          instructions: Say done.
          output: {type: object, properties: {done: {type: boolean}}, required: [done]}
"""
KEY = "stub-key-0123456789abcdef"
PER_CALL = [{"usd_micro": 400, "per": "call"}]
# the stub reports 10 tokens in and 5 out for every answer
PER_TOKEN = [
    {"usd_micro": 1000, "per": "1k_tokens_in"},
    {"usd_micro": 2000, "per": "1k_tokens_out"},
]


def _ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "turn", TURN)
    return root


def _receipt(root: Path, receipt_id: str) -> dict[str, Any]:
    from proctor.runtime.records.receipts import ReceiptStore

    data = ReceiptStore(root / ".proctor" / "receipts").get(receipt_id)
    assert data is not None
    return parse_envelope(data).body


def _run(root: Path, stub: StubModel, dialect: str, limit: int | None, **cfg: Any) -> Any:
    agent = ManagedAgent(config(stub, dialect, **cfg), key=KEY)
    s = session(root, agent_driver=agent)
    doc = {} if limit is None else {"max_spend_micro_usd": limit}
    return s.run("turn", cwd=root, authority=authority(**doc))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_priced_turn_under_its_limit_spends_per_call_into_its_receipts(
    tmp_path: Path, dialect: str
) -> None:
    root = _ws(tmp_path)
    script = [answer(dialect, calls=[("nothing_here", {})]), answer(dialect, text='{"done": true}')]
    with StubModel(script) as stub:
        env = _run(root, stub, dialect, 1000, cost=PER_CALL)
    assert env.outcome == "completed", env.refusal
    assert len(stub.seen) == 2 and env.spend_micro_usd == 800
    run = _receipt(root, env.receipt_id or "")
    assert run["spend_micro_usd"] == 800
    assert _receipt(root, run["children"][0]["receipt_id"])["spend_micro_usd"] == 800


def test_over_the_limit_the_next_model_request_is_never_sent(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    dialect = "chat_completions"
    script = [answer(dialect, calls=[("nothing_here", {})]), answer(dialect, text='{"done": true}')]
    with StubModel(script) as stub:
        env = _run(root, stub, dialect, 700, cost=PER_CALL)
    # 400 fits, a second 400 would pass 700: refused before it is sent
    assert len(stub.seen) == 1
    assert env.outcome == "blocked" and env.refusal is not None
    assert env.refusal.code == "cost_limit_exceeded" and env.spend_micro_usd == 400
    assert _receipt(root, env.receipt_id or "")["seal_reason"] == "budget_exceeded"


def test_a_limit_smaller_than_one_request_sends_nothing(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    with StubModel([answer("chat_completions", text='{"done": true}')]) as stub:
        env = _run(root, stub, "chat_completions", 399, cost=PER_CALL)
    assert stub.seen == [] and env.refusal is not None
    assert env.refusal.code == "cost_limit_exceeded"


def test_an_undeclared_provider_price_under_a_limit_sends_nothing(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    with StubModel([answer("chat_completions", text='{"done": true}')]) as stub:
        env = _run(root, stub, "chat_completions", 10_000)
    assert stub.seen == [] and env.refusal is not None and env.refusal.code == "price_unknown"


def test_an_output_price_with_no_answer_limit_cannot_be_bounded(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    with StubModel([answer("chat_completions", text='{"done": true}')]) as stub:
        env = _run(root, stub, "chat_completions", 10_000, cost=PER_TOKEN)
    assert stub.seen == [] and env.refusal is not None and env.refusal.code == "price_unknown"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_per_token_prices_reserve_the_worst_case_and_settle_the_reported_usage(
    tmp_path: Path, dialect: str
) -> None:
    root = _ws(tmp_path)
    with StubModel([answer(dialect, text='{"done": true}')]) as stub:
        env = _run(root, stub, dialect, 1_000_000, cost=PER_TOKEN, max_tokens=500)
    assert env.outcome == "completed", env.refusal
    # 10 tokens in at 1000/1k (rounded up: 10), 5 out at 2000/1k: 10
    assert env.spend_micro_usd == 20
    record = session(root).store.get_run(env.run_id or "")
    assert record is not None and record.data["spend"] == {
        "spent": 20,
        "held": 0,
        "limit": 1_000_000,
    }


def test_a_worst_case_that_does_not_fit_is_refused_though_the_usage_would(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    with StubModel([answer("chat_completions", text='{"done": true}')]) as stub:
        # 500 answer tokens at 2000/1k is 1000 alone: the hold cannot fit 900
        env = _run(root, stub, "chat_completions", 900, cost=PER_TOKEN, max_tokens=500)
    assert stub.seen == [] and env.refusal is not None
    assert env.refusal.code == "cost_limit_exceeded"


def test_without_a_limit_a_priced_turn_is_counted(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    with StubModel([answer("chat_completions", text='{"done": true}')]) as stub:
        env = _run(root, stub, "chat_completions", None, cost=PER_CALL)
    assert env.outcome == "completed" and env.spend_micro_usd == 400


def test_a_provider_error_releases_the_hold_and_a_timeout_is_charged() -> None:
    from proctor.errors import AgentError

    ledger = SpendLedger(1000)
    meter = ModelMeter(ledger, (Price(100),), what="t")
    held = meter.before({"messages": []})
    assert ledger.held == 100
    meter.failed(held, AgentError("no", code="provider_error"))
    assert (ledger.spent, ledger.held) == (0, 0)
    held = meter.before({"messages": []})
    meter.failed(held, AgentError("slow", code="provider_timeout"))
    assert (ledger.spent, ledger.held, meter.spent) == (100, 0, 100)


def test_quotes_and_costs() -> None:
    prices = (Price(1000, "1k_tokens_in"), Price(3000, "1k_tokens_out"), Price(7))
    assert model_request_quote(prices, 2001, 100) == 2001 + 300 + 7
    assert model_request_quote(prices, 2001, None) is None
    # reported counts are used; an unreported one is taken at its bound
    assert (
        model_request_cost(prices, (10, None), body_bytes=2001, max_tokens_out=100) == 10 + 300 + 7
    )
    assert (
        model_request_cost(prices, (None, 1), body_bytes=2001, max_tokens_out=100) == 2001 + 3 + 7
    )
    assert reported_tokens({"usage": {"prompt_tokens": 4, "completion_tokens": True}}) == (4, None)
    assert reported_tokens({"usage": {"input_tokens": 4, "cache_read_input_tokens": 6}}) == (
        10,
        None,
    )
    assert reported_tokens({"usage": "lots"}) == (None, None)
    with pytest.raises(SpendRefused):
        SpendLedger(0).reserve(model_request_quote((Price(1),), 0, None), what="x")


BAD_PRICES = [
    [],
    [{"usd_micro": 1, "per": "call"}, {"usd_micro": 2, "per": "call"}],
    {"usd_micro": -1},
    "free",
    [{"usd_micro": 1, "per": "1k_tokens"}],
]


@pytest.mark.parametrize("doc", BAD_PRICES)
def test_bad_provider_prices_are_refused(doc: Any) -> None:
    with pytest.raises(UsageError) as info:
        parse_prices(doc)
    assert info.value.code == "cost_invalid"
    with pytest.raises(ConfigError) as config_info:
        agent_config(section={"provider": "p", "model": "m", "dialect": "chat_completions",
                              "endpoint_url": "http://127.0.0.1:9/v1", "cost": doc})  # fmt: skip
    assert config_info.value.code == "cost_invalid"


def test_config_set_agent_cost(tmp_path: Path) -> None:
    home = tmp_path / "home"
    set_agent_value("agent.cost", '{"usd_micro": 5, "per": "call"}', home=home)
    section = set_agent_value("agent.max_tokens", "256", home=home)
    assert section["cost"] == [{"usd_micro": 5, "per": "call"}] and section["max_tokens"] == 256
    with pytest.raises(ConfigError) as info:
        set_agent_value("agent.cost", "{not json", home=home)
    assert info.value.code == "cost_invalid"


PARENT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: child
        skill: ../turn
"""


def test_a_childs_managed_turn_spends_from_the_roots_limit(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    make_skill(root, "parent", PARENT)
    dialect = "chat_completions"
    script = [answer(dialect, calls=[("nothing_here", {})]), answer(dialect, text='{"done": true}')]
    with StubModel(script) as stub:
        agent = ManagedAgent(config(stub, dialect, cost=PER_CALL), key=KEY)
        s = session(root, agent_driver=agent)
        env = s.run("parent", cwd=root, authority=authority(max_spend_micro_usd=700))
    assert len(stub.seen) == 1  # the child's second request would pass the root's limit
    assert env.outcome == "blocked" and env.refusal is not None
    assert env.refusal.code == "cost_limit_exceeded" and env.spend_micro_usd == 400

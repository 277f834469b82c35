"""Spend limits as attacks: over the limit, or with no price, nothing is sent; children share it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.core.spend import SpendLedger, SpendRefused, parse_price, parse_usd
from proctor.errors import UsageError
from proctor.receipts.model import parse_envelope
from proctor.runtime.engine.compose import child_run_id
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.engine.test_compose import _verify

PRICED = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {url: {type: string}}
      required: [url]
    steps:
      - id: fetch
        tool: http.request
        cost: {usd_micro: 300, per: call}
        inputs: {method: GET, url: $input.url}
"""

UNPRICED = PRICED.replace("        cost: {usd_micro: 300, per: call}\n", "")

FANNED = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {urls: {type: array, items: {type: string}}}
      required: [urls]
    steps:
      - id: all
        skill: ../priced
        for_each: $input.urls
        concurrency: 3
        inputs: {url: $item}
"""


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "priced", PRICED)
    make_skill(root, "unpriced", UNPRICED)
    make_skill(root, "fanned", FANNED)
    (root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    return root


def _receipt_body(root: Path, receipt_id: str) -> dict[str, Any]:
    from proctor.runtime.records.receipts import ReceiptStore

    data = ReceiptStore(root / ".proctor" / "receipts").get(receipt_id)
    assert data is not None
    return parse_envelope(data).body


def test_a_priced_call_under_its_limit_is_sent_and_its_spend_is_receipted(
    ws: Path, server: tuple[str, list[str]]
) -> None:
    url, seen = server
    s = session(ws)
    env = s.run(
        "priced",
        inputs={"url": url + "/a"},
        cwd=ws,
        authority=authority(max_spend_micro_usd=1000),
    )
    assert env.outcome == "completed", env.refusal
    assert seen == ["/a"] and env.spend_micro_usd == 300
    root = _receipt_body(ws, env.receipt_id or "")
    assert root["spend_micro_usd"] == 300
    step = _receipt_body(ws, root["children"][0]["receipt_id"])
    assert step["spend_micro_usd"] == 300
    assert _verify(ws, env.receipt_id).status == "verified"


def test_over_the_limit_nothing_is_sent_and_the_run_seals_blocked(
    ws: Path, server: tuple[str, list[str]]
) -> None:
    url, seen = server
    env = session(ws).run(
        "priced", inputs={"url": url + "/a"}, cwd=ws, authority=authority(max_spend_micro_usd=299)
    )
    assert env.status == "sealed" and env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "cost_limit_exceeded"
    assert seen == []  # the request was never sent
    assert env.spend_micro_usd == 0


def test_an_unknown_price_under_a_limit_is_refused_and_missing_is_not_zero(
    ws: Path, server: tuple[str, list[str]]
) -> None:
    url, seen = server
    env = session(ws).run(
        "unpriced", inputs={"url": url + "/a"}, cwd=ws, authority=authority(max_spend_micro_usd=10)
    )
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "price_unknown"
    assert seen == []
    free = session(ws).run("unpriced", inputs={"url": url + "/b"}, cwd=ws)
    assert free.outcome == "completed" and seen == ["/b"]  # no limit: nothing is refused


def test_children_spend_from_one_limit_and_cannot_widen_it(
    ws: Path, server: tuple[str, list[str]]
) -> None:
    url, seen = server
    urls = [f"{url}/{n}" for n in range(6)]
    s = session(ws)
    env = s.run(
        "fanned",
        inputs={"urls": urls},
        cwd=ws,
        authority=authority(max_spend_micro_usd=1000, max_concurrency=3),
    )
    # 6 children at 300 each under 1,000: three fit, the rest are refused before sending
    assert env.outcome == "blocked", env.refusal
    assert len(seen) == 3
    assert env.refusal is not None and env.refusal.code == "cost_limit_exceeded"
    assert env.spend_micro_usd == 900
    blocked = [
        n
        for n in range(6)
        if (run := s.store.get_run(child_run_id(env.run_id or "", "all", n))) is not None
        and run.outcome == "blocked"
    ]
    assert len(blocked) == 3
    assert _verify(ws, env.receipt_id).status == "verified"


def test_max_spend_on_the_command_line(ws: Path, server: tuple[str, list[str]]) -> None:
    import os

    from proctor.cli.main import cli

    url, seen = server
    env = {"PROCTOR_HOME": str(ws / ".home")}
    cwd = os.getcwd()
    os.chdir(ws)
    try:
        runner = CliRunner()
        args = ["run", "priced", "-i", f"url={url}/x", "--json"]
        over = runner.invoke(cli, [*args, "--max-spend", "0.000299"], env=env)
        assert json.loads(over.stdout)["refusal"]["code"] == "cost_limit_exceeded"
        assert seen == []
        bad = runner.invoke(cli, [*args, "--max-spend", "-1"], env=env)
        assert bad.exit_code != 0 and getattr(bad.exception, "code", None) == "max_spend_invalid"
        ok = runner.invoke(cli, [*args, "--max-spend", "0.0003"], env=env)
        assert json.loads(ok.stdout)["spend_micro_usd"] == 300 and seen == ["/x"]
    finally:
        os.chdir(cwd)


def test_the_ledger_holds_then_settles_or_releases() -> None:
    states: list[dict[str, Any]] = []
    ledger = SpendLedger(500, persist=states.append)
    held = ledger.reserve(300, what="a call")
    assert states[-1] == {"spent": 0, "held": 300, "limit": 500}  # recorded before sending
    with pytest.raises(SpendRefused) as refused:
        ledger.reserve(201, what="another")
    assert refused.value.code == "cost_limit_exceeded"
    ledger.settle(held, 250)
    spare = ledger.reserve(250, what="the rest")
    ledger.release(spare)
    assert ledger.state() == {"spent": 250, "held": 0, "limit": 500}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_fuzz_max_spend_is_an_amount_or_a_clear_refusal(text: str) -> None:
    try:
        value = parse_usd(text)
    except UsageError as exc:
        assert exc.code == "max_spend_invalid"
    else:
        assert value >= 0


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda c: st.dictionaries(st.sampled_from(["usd_micro", "per", "x"]), c, max_size=3),
        max_leaves=5,
    )
)
def test_fuzz_cost_declarations(doc: Any) -> None:
    try:
        price = parse_price(doc)
    except UsageError as exc:
        assert exc.code == "cost_invalid"
    else:
        assert price.usd_micro >= 0


TURNING = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: think
        agent:
          instructions: Fetch with the priced skill.
          calls: {skills: [../priced]}
          output: {type: object}
"""


def test_a_turns_skill_calls_spend_from_the_same_limit(
    ws: Path, server: tuple[str, list[str]]
) -> None:
    url, seen = server
    make_skill(ws, "turning", TURNING)
    s = session(ws)
    env = s.run("turning", cwd=ws, authority=authority(max_spend_micro_usd=500))
    assert env.status == "needs_agent"
    first = s.turn_call(env.run_id or "", "think", "skill.priced.main", {"url": url + "/1"}, "c1")
    assert first.ok, first.error
    second = s.turn_call(env.run_id or "", "think", "skill.priced.main", {"url": url + "/2"}, "c2")
    assert second.code == "cost_limit_exceeded"  # 300 + 300 > 500: the child sent nothing
    assert seen == ["/1"]
    (turn,) = env.requests or []
    answer = {"answers": {"think": {"request_digest": turn["request_digest"], "value": {}}}}
    done = s.resume(env.run_id or "", answer)
    assert done.outcome == "completed" and done.spend_micro_usd == 300
    assert _verify(ws, done.receipt_id).status == "verified"


def test_per_success_is_charged_only_for_a_call_that_completed(
    ws: Path, server: tuple[str, list[str]]
) -> None:
    import socket

    make_skill(ws, "on_success", PRICED.replace("per: call", "per: success"))
    url, _seen = server
    done = session(ws).run(
        "on_success",
        inputs={"url": url + "/a"},
        cwd=ws,
        authority=authority(max_spend_micro_usd=1000),
    )
    assert done.outcome == "completed" and done.spend_micro_usd == 300
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: the request fails
    failed = session(ws).run(
        "on_success",
        inputs={"url": f"http://127.0.0.1:{port}/b"},
        cwd=ws,
        authority=authority(max_spend_micro_usd=1000),
    )
    assert failed.outcome == "failed", failed
    assert failed.spend_micro_usd == 0
    per_call = session(ws).run(
        "priced",
        inputs={"url": f"http://127.0.0.1:{port}/c"},
        cwd=ws,
        authority=authority(max_spend_micro_usd=1000),
    )
    assert per_call.outcome == "failed" and per_call.spend_micro_usd == 300  # may have left

"""The HTTP stand-in: declared exchanges answer after the egress guard; anything else is
refused as a call, and no connection is ever made (a loopback listener counts them)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from proctor.contracts.testfile import HttpExchange
from proctor.errors import RefusedCall
from proctor.testing.http import HttpFixtures, same_json
from proctor.testing.http_transport import FixtureTransport
from tests.testing.support import (
    FETCH,
    PLAIN_FETCH,
    checks,
    connections,
    counting_listener,
    package,
    run_one,
    workspace,
)

LOOPBACK_TEST = """
method: fetch
inputs: {{url: "http://127.0.0.1:{port}/data?x=1"}}
setup:
  egress: ["127.0.0.1"]
{providers}
expect:
  status: sealed
"""


def _loopback(tmp_path: Path, port: int, providers: str, allow: bool = True) -> Path:
    text = LOOPBACK_TEST.format(port=port, providers=providers)
    if not allow:
        text = text.replace('egress: ["127.0.0.1"]', "egress: []")
    return package(workspace(tmp_path / "ws"), "fetcher", PLAIN_FETCH, {"t": text})


def test_an_unmatched_request_is_refused_and_never_connects(tmp_path: Path) -> None:
    with counting_listener() as (port, sock):
        folder = _loopback(tmp_path, port, "")
        result = run_one(folder, "t", keep=True)
        assert connections(sock) == 0
    assert result.outcome == "blocked"
    assert "http" in checks(result)
    unmatched = next(f for f in result.failures if f.check == "http")
    assert unmatched.actual["url"] == f"http://127.0.0.1:{port}/data?x=1"
    assert result.workspace is not None
    audit = (result.workspace / ".proctor" / "audit.jsonl").read_text()
    assert "http_fixture_unmatched" in audit  # refused as a call, audited like any refusal


def test_a_declared_exchange_answers_and_never_connects(tmp_path: Path) -> None:
    with counting_listener() as (port, sock):
        providers = (
            "providers:\n  http:\n"
            f"    - request: {{method: GET, url: 'http://127.0.0.1:{port}/data?x=1'}}\n"
            "      response: {status: 200, body: from-the-fixture}\n"
        )
        folder = _loopback(tmp_path, port, providers)
        result = run_one(folder, "t")
        assert connections(sock) == 0
    assert result.status == "passed", [f.to_json() for f in result.failures]


def test_the_egress_guard_still_refuses_what_it_refuses_live(tmp_path: Path) -> None:
    with counting_listener() as (port, sock):
        providers = (
            "providers:\n  http:\n"
            f"    - request: {{method: GET, url: 'http://127.0.0.1:{port}/data?x=1'}}\n"
            "      response: {status: 200, body: never}\n"
        )
        folder = _loopback(tmp_path, port, providers, allow=False)
        result = run_one(folder, "t", keep=True)
        assert connections(sock) == 0
    # loopback is not allowed here: the guard refuses before any fixture is consulted, so the
    # declared exchange was never requested
    assert result.outcome == "blocked"
    assert set(checks(result)) == {"http"}
    assert result.workspace is not None
    assert "egress_refused" in (result.workspace / ".proctor" / "audit.jsonl").read_text()


def _fixtures(*specs: dict) -> HttpFixtures:
    return HttpFixtures.from_exchanges([HttpExchange.model_validate(s) for s in specs], "t.yaml")


def test_repeats_are_answered_in_declared_order_and_the_last_answers_later_ones() -> None:
    fx = _fixtures(
        {"request": {"method": "GET", "url": "https://a.example/r"}, "response": {"body": "one"}},
        {"request": {"method": "GET", "url": "https://a.example/r"}, "response": {"body": "two"}},
    )
    bodies = [fx.answer("GET", "https://a.example/r", b"")[2] for _ in range(4)]
    assert bodies == [b"one", b"two", b"two", b"two"]
    assert fx.counts == [1, 3]


def test_urls_match_canonically() -> None:
    fx = _fixtures({"request": {"method": "GET", "url": "HTTPS://A.Example:443/r?q=1"}})
    assert fx.answer("GET", "https://a.example/r?q=1", b"")[0] == 200
    with pytest.raises(RefusedCall) as refused:
        fx.answer("GET", "https://a.example/r?q=2", b"")
    assert refused.value.code == "http_fixture_unmatched"
    with pytest.raises(RefusedCall):
        fx.answer("POST", "https://a.example/r?q=1", b"")


def test_body_identity() -> None:
    fx = _fixtures(
        {"request": {"method": "POST", "url": "https://a.example/j", "body": {"json": {"n": 1}}}},
        {"request": {"method": "POST", "url": "https://a.example/t", "body": {"text": "a b"}}},
        {"request": {"method": "POST", "url": "https://a.example/z", "body": {"json": None}}},
    )
    assert fx.answer("POST", "https://a.example/j", b'{ "n" : 1.0 }')[0] == 200
    for url, body in [
        ("https://a.example/j", b'{"n": true}'),  # true is not 1
        ("https://a.example/j", b'{"n": 1, "m": 2}'),
        ("https://a.example/j", b""),  # none is not {json: ...}
        ("https://a.example/t", b"a  b"),
        ("https://a.example/z", b""),  # {json: null} is a body holding null, not no body
    ]:
        with pytest.raises(RefusedCall):
            fx.answer("POST", url, body)
    assert fx.answer("POST", "https://a.example/z", b"null")[0] == 200
    assert fx.answer("POST", "https://a.example/t", b"a b")[0] == 200


def test_an_exchange_url_proctor_never_requests_is_refused() -> None:
    from proctor.errors import UsageError

    with pytest.raises(UsageError) as refused:
        _fixtures({"request": {"method": "GET", "url": "https://user:pw@a.example/"}})
    assert refused.value.code == "test_exchange_invalid"
    assert "pw" not in refused.value.message


def test_same_json_keeps_types() -> None:
    assert same_json({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not same_json(True, 1)
    assert not same_json(0, False)
    assert not same_json("1", 1)
    assert not same_json(None, {})


def test_an_unused_exchange_fails_the_test(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    text = """
method: fetch
inputs: {url: "https://svc.example.com/a"}
setup: {credentials: {svc: fixture-svc-token-123456}}
providers:
  http:
    - request: {method: GET, url: "https://svc.example.com/a"}
    - request: {method: DELETE, url: "https://svc.example.com/a"}
expect: {status: sealed, outcome: completed}
"""
    folder = package(root, "fetcher", FETCH.format(audience="https://svc.example.com"), {"t": text})
    result = run_one(folder, "t")
    assert checks(result) == ["http"]
    assert "providers.http[1] (DELETE https://svc.example.com/a) was never requested" in (
        result.failures[0].message
    )


def test_the_fixture_response_carries_exactly_the_declared_headers() -> None:
    fx = _fixtures({"request": {"method": "GET", "url": "https://a.example/"},
                    "response": {"headers": {"etag": "x"}, "body": "abc"}})  # fmt: skip
    transport = FixtureTransport(fx.answer)
    response = transport.handle_request(httpx.Request("GET", "https://a.example/"))
    assert dict(response.headers) == {"etag": "x"}
    assert response.read() == b"abc"


def test_the_credential_is_delivered_at_the_boundary_as_in_a_live_run(tmp_path: Path) -> None:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.testing.keys import fixed_clock, fixture_signer

    root = workspace(tmp_path / "ws")
    package(root, "fetcher", FETCH.format(audience="https://svc.example.com"), {})
    fx = _fixtures({"request": {"method": "GET", "url": "https://svc.example.com/a"}})
    other = _fixtures({"request": {"method": "GET", "url": "https://evil.example.net/a"}})
    for fixtures, url, outcome in [
        (fx, "https://svc.example.com/a", "completed"),
        (other, "https://evil.example.net/a", "failed"),  # another audience: never sent
    ]:
        session = Session(
            Workspace(root),
            environ={"PROCTOR_HOME": str(tmp_path / "h"), "SVC_TOKEN": "delivered-token-42"},
            clock=fixed_clock(), signer=fixture_signer(), egress_route=fixtures.route(),
        )  # fmt: skip
        try:
            env = session.run("skills/fetcher#fetch", inputs={"url": url}, cwd=root)
        finally:
            session.close()
        assert env.outcome == outcome, env.refusal
        assert "delivered-token-42" not in env.model_dump_json()
    assert fx.authorizations == ["Bearer delivered-token-42"]
    assert other.authorizations == [] and other.counts == [0]

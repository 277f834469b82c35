"""``http.request``: credential delivery by name only, bounded bodies and redirects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proctor.errors import CredentialError, EgressRefused, RefusedCall, ToolFailed
from proctor.runtime.boundary.egress import EgressAllow, EgressLimits, StaticResolver
from proctor.runtime.boundary.sanitize import TaintSet
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.home.credentials import ResolvedCredential, Secret
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.http import HTTP_REQUEST, NETWORK_EXTRA, NetworkContext, http_tools
from tests.runtime.boundary.test_egress_helpers import Seen, echo, serve

CANARY = "canary-0b5e2a7d9c14f3e8"


def _cred(audience: str | None = None) -> ResolvedCredential:
    return ResolvedCredential("tracker", "tracker", "api_key", "TRACKER_TOKEN", "env", None,
                              audience, Secret(CANARY))  # fmt: skip


def _call(tmp_path: Path, args: dict[str, Any], net: NetworkContext) -> dict[str, Any]:
    ctx = ToolContext(workspace=Workspace(tmp_path), store=SQLiteRunStore(tmp_path / "r.sqlite"),
                      run_id="run", call_id="call", extras={NETWORK_EXTRA: net})  # fmt: skip
    return HTTP_REQUEST.handler(ctx, args)


def _net(port_names: dict[str, list[str]], **kw: Any) -> NetworkContext:
    return NetworkContext(allow=EgressAllow.parse(list(port_names)),
                          resolver=StaticResolver(port_names), **kw)  # fmt: skip


def test_registry_entry() -> None:
    assert http_tools() == {"http.request": HTTP_REQUEST}
    assert HTTP_REQUEST.effect == "network"


def test_credential_is_delivered_in_authorization_and_scrubbed_from_the_result(
    tmp_path: Path,
) -> None:
    taint = TaintSet()
    with serve(echo) as server:
        net = _net({"api.test": ["127.0.0.1"]}, credentials={"tracker": _cred()}, taint=taint)
        args = {"method": "POST", "url": f"http://api.test:{server.port}/c", "json": {"a": 1},
                "auth": {"credential": "tracker"}}  # fmt: skip
        result = _call(tmp_path, args, net)
        assert server.requests[0].authorization == f"Bearer {CANARY}"
        assert server.requests[0].host == f"api.test:{server.port}"
    assert result["status"] == 200
    assert CANARY not in repr(result)
    assert "[REDACTED" in result["body"]
    assert CANARY in taint


def test_step_credential_is_delivered_without_auth_argument(tmp_path: Path) -> None:
    with serve(echo) as server:
        net = _net({"api.test": ["127.0.0.1"]}, credentials={"tracker": _cred()},
                   default_credential="tracker", taint=TaintSet())  # fmt: skip
        _call(tmp_path, {"method": "GET", "url": f"http://api.test:{server.port}/"}, net)
        assert server.requests[0].authorization == f"Bearer {CANARY}"


@pytest.mark.parametrize("header", ["Authorization", "proxy-authorization"])
def test_raw_authorization_header_is_refused_before_sending(tmp_path: Path, header: str) -> None:
    with serve(echo) as server:
        net = _net({"api.test": ["127.0.0.1"]})
        with pytest.raises(RefusedCall) as caught:
            _call(tmp_path, {"method": "GET", "url": f"http://api.test:{server.port}/",
                             "headers": {header: f"Bearer {CANARY}"}}, net)  # fmt: skip
        assert caught.value.code == "raw_credential"
        assert CANARY not in caught.value.message
        assert server.connections == 0


def test_undeclared_credential_is_refused(tmp_path: Path) -> None:
    with serve(echo) as server:
        net = _net({"api.test": ["127.0.0.1"]})
        with pytest.raises(CredentialError) as caught:
            _call(tmp_path, {"method": "GET", "url": f"http://api.test:{server.port}/",
                             "auth": {"credential": "tracker"}}, net)  # fmt: skip
        assert caught.value.code == "credential_not_delivered"
        assert server.connections == 0


def test_audience_bound_credential_is_not_sent_elsewhere(tmp_path: Path) -> None:
    with serve(echo) as server:
        net = _net({"api.test": ["127.0.0.1"]},
                   credentials={"tracker": _cred("https://tracker.example.com")})  # fmt: skip
        with pytest.raises(CredentialError) as caught:
            _call(tmp_path, {"method": "GET", "url": f"http://api.test:{server.port}/",
                             "auth": {"credential": "tracker"}}, net)  # fmt: skip
        assert caught.value.code == "credential_audience_mismatch"
        assert server.connections == 0


def test_cross_origin_redirect_drops_the_credential_and_is_checked(tmp_path: Path) -> None:
    with serve(echo) as other:

        def hop(_seen: Seen) -> tuple[int, dict[str, str], bytes]:
            return 307, {"Location": f"http://other.test:{other.port}/landed"}, b""

        with serve(hop) as first:
            names = {"api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}
            net = _net(names, credentials={"tracker": _cred()}, taint=TaintSet())
            result = _call(tmp_path, {"method": "GET", "url": f"http://api.test:{first.port}/",
                                      "auth": {"credential": "tracker"}}, net)  # fmt: skip
            assert first.requests[0].authorization == f"Bearer {CANARY}"
        assert other.requests[0].authorization is None
        assert result["redirects"] == 1


def test_redirect_to_denied_address_through_the_tool(tmp_path: Path) -> None:
    with serve(echo) as victim:

        def hop(_seen: Seen) -> tuple[int, dict[str, str], bytes]:
            return 302, {"Location": f"http://127.0.0.1:{victim.port}/"}, b""

        with serve(hop) as first:
            net = _net({"api.test": ["127.0.0.1"]})
            with pytest.raises(EgressRefused):
                _call(tmp_path, {"method": "GET", "url": f"http://api.test:{first.port}/"}, net)
        assert victim.connections == 0


def test_redirect_bound(tmp_path: Path) -> None:
    def loop(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        return 302, {"Location": "/again"}, b""

    with serve(loop) as server:
        net = _net({"api.test": ["127.0.0.1"]}, limits=EgressLimits(max_redirects=3))
        with pytest.raises(ToolFailed) as caught:
            _call(tmp_path, {"method": "GET", "url": f"http://api.test:{server.port}/"}, net)
        assert caught.value.code == "http_too_many_redirects"
        assert len(server.requests) == 4


def test_body_is_bounded_and_result_headers_filtered(tmp_path: Path) -> None:
    def big(_seen: Seen) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/plain", "Set-Cookie": "sid=abc"}, b"x" * 5000

    with serve(big) as server:
        net = _net({"api.test": ["127.0.0.1"]}, limits=EgressLimits(max_response_bytes=1000))
        result = _call(tmp_path, {"method": "GET", "url": f"http://api.test:{server.port}/"}, net)
    assert result["truncated"] is True and len(result["body"]) == 1000
    assert "set-cookie" not in {k.lower() for k in result["headers"]}
    assert result["body_digest"].startswith("sha256:")


def test_public_default_refuses_loopback_without_allow(tmp_path: Path) -> None:
    with serve(echo) as server:
        with pytest.raises(EgressRefused):
            _call(tmp_path, {"method": "GET", "url": f"http://127.0.0.1:{server.port}/"},
                  NetworkContext(resolver=StaticResolver({})))  # fmt: skip
        assert server.connections == 0

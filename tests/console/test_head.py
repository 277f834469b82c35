"""HEAD on the console: every page answers it as its GET does (status and headers), with no
body and nothing recorded; a route that changes state refuses it (405)."""

from __future__ import annotations

import re

import httpx

from tests.console.conftest import Console

# headers a response carries per request, not per page
_PER_RESPONSE = {"date", "set-cookie"}


def _client(console: Console) -> httpx.Client:
    return httpx.Client(base_url=console.url, follow_redirects=False, timeout=30)


def _sign_in(client: httpx.Client, token: str) -> None:
    form = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    done = client.post("/login", data={"csrf": csrf.group(1), "token": token, "next": "/pending"})
    assert done.status_code == 303


def _pages(run_id: str) -> list[str]:
    return [
        "/",
        "/login",
        "/login?next=/runs",
        "/pending",
        "/runs",
        "/runs?status=needs_approval&skill=pages",
        "/runs?after=abc",  # refused cursor_invalid: HEAD is refused as GET is
        f"/runs/{run_id}",
        f"/runs/{run_id}/requests/put",
        "/runs/nope",
        "/static/console.css",
    ]


def _same_as_get(client: httpx.Client, path: str) -> None:
    got, head = client.get(path), client.head(path)
    assert head.status_code == got.status_code, path
    assert head.content == b"", path
    shown = {k: v for k, v in got.headers.items() if k not in _PER_RESPONSE}
    assert {k: v for k, v in head.headers.items() if k not in _PER_RESPONSE} == shown, path


def test_head_answers_as_get_signed_out(console: Console) -> None:
    run = console.paused()
    with _client(console) as client:
        before = console.state_bytes()
        assert client.head("/pending").status_code == 303
        assert client.head("/pending").headers["location"] == "/login?next=/pending"
        for path in _pages(run["run_id"]):
            _same_as_get(client, path)
        assert console.state_bytes() == before


def test_head_answers_as_get_signed_in_and_records_nothing(console: Console) -> None:
    run = console.paused()
    with _client(console) as client:
        _sign_in(client, console.token)
        before = console.state_bytes()
        for path in _pages(run["run_id"]):
            _same_as_get(client, path)
        assert console.state_bytes() == before


def test_head_on_a_route_that_changes_state_is_not_allowed(console: Console) -> None:
    run = console.paused()
    with _client(console) as client:
        before = console.state_bytes()
        for signed_in in (False, True):
            if signed_in:
                _sign_in(client, console.token)
            for path in (f"/runs/{run['run_id']}/decide", "/logout"):
                refused = client.head(path)
                assert refused.status_code == 405, (path, signed_in)
                assert refused.content == b""
                assert "HEAD" not in refused.headers.get("allow", "")
        assert console.state_bytes() == before
        assert client.get("/pending").status_code == 200  # still signed in: no sign-out ran


def test_every_response_carries_the_security_headers(console: Console) -> None:
    # Starlette's own answers (a 405 of a POST-only route, a 404 of an unknown path) are not
    # built by the console's pages, and went out without them.
    run = console.paused()
    with _client(console) as client:
        answers = [
            client.get(f"/runs/{run['run_id']}/decide"),  # 405
            client.get("/logout"),  # 405
            client.get("/no/such/page"),  # 404
            client.get("/pending"),  # 303 to the sign-in page
        ]
        assert [a.status_code for a in answers] == [405, 405, 404, 303]
        for answer in answers:
            assert answer.headers["cache-control"] == "no-store", answer.status_code
            assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["x-content-type-options"] == "nosniff"

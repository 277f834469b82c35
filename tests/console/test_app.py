"""The console over plain HTTP (httpx on loopback): sign-in, sessions that expire, CSRF,
no state change on GET, Host checks, and binding refusals. Each refusal proves that nothing
was recorded."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.console.serve import check_binding
from proctor.console.sessions import SessionBook
from proctor.console.users import UserBook
from proctor.errors import UsageError
from tests.console.conftest import Console


def _client(console: Console) -> httpx.Client:
    return httpx.Client(base_url=console.url, follow_redirects=False, timeout=30)


def _sign_in(client: httpx.Client, token: str) -> httpx.Response:
    form = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    return client.post("/login", data={"csrf": csrf.group(1), "token": token, "next": "/pending"})


def _csrf(client: httpx.Client) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get("/pending").text)
    assert found is not None
    return found.group(1)


def test_every_get_leaves_the_store_as_it_was(console: Console) -> None:
    run = console.paused()
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        before = console.state_bytes()
        for path in (
            "/pending",
            "/runs",
            "/runs?status=needs_approval&skill=pages",
            f"/runs/{run['run_id']}",
            f"/runs/{run['run_id']}/requests/put",
            f"/runs/{run['run_id']}/decide",  # a GET on the POST route is not allowed
        ):
            response = client.get(path)
            assert response.status_code in (200, 405), path
        assert console.state_bytes() == before


def test_signed_out_people_are_sent_to_sign_in_and_cannot_post(console: Console) -> None:
    run = console.paused()
    with _client(console) as client:
        assert client.get("/pending").headers["location"] == "/login?next=/pending"
        before = console.state_bytes()
        posted = client.post(
            f"/runs/{run['run_id']}/decide",
            data={"address": "put", "request_digest": run["requests"][0]["request_digest"],
                  "decision": "approve"},
        )  # fmt: skip
        assert posted.status_code == 400 and "signed_out" in posted.text
        assert console.state_bytes() == before


def test_commands_and_http_requests_show_exactly_what_executes(console: Console) -> None:
    command = console.paused_on("tools")
    post = console.paused_on("post")
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        page = client.get(f"/runs/{command['run_id']}/requests/run").text
        assert (
            "argv: [&#34;ls&#34;, &#34;-la&#34;, &#34;&lt;b&gt;not markup&lt;/b&gt;&#34;]" in page
        )
        assert "&lt;b&gt;not markup&lt;/b&gt;" in page and "<b>not markup</b>" not in page
        assert '<span class="key">cwd: .</span>' in page
        sent = client.get(f"/runs/{post['run_id']}/requests/send").text
        assert '<span class="head">POST http://127.0.0.1:9/notes</span>' in sent
        assert "&lt;script&gt;" in sent or "\\u003cscript\\u003e" in sent
        assert "<script>" not in sent


def test_questions_are_answered_or_declined_in_the_console(console: Console) -> None:
    answered, declined = console.question(), console.question()
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        csrf = _csrf(client)
        for run, form, outcome in (
            (answered, {"decision": "approve", "option.colour": "blue"}, "completed"),
            (declined, {"decision": "decline"}, "declined"),
        ):
            digest = run["requests"][0]["request_digest"]
            out = client.post(
                f"/runs/{run['run_id']}/decide",
                data={"csrf": csrf, "address": "colour", "request_digest": digest, **form},
            )
            assert out.status_code == 303, out.text
            page = client.get(f"/runs/{run['run_id']}").text
            assert f'id="run-outcome" class="outcome {outcome}"' in page
    audit = (console.root / ".proctor" / "audit.jsonl").read_text()
    assert '"event":"close_decided"' in audit and '"decided_by":"console:alice"' in audit


def test_a_wrong_token_or_a_missing_login_csrf_signs_nobody_in(console: Console) -> None:
    with _client(console) as client:
        assert _sign_in(client, "pct_not-a-real-token").status_code == 401
        assert client.get("/pending").status_code == 303
        forged = client.post("/login", data={"token": console.token, "next": "/pending"})
        assert forged.status_code == 403 and "csrf_invalid" in forged.text
        assert client.get("/pending").status_code == 303


def test_sign_in_never_redirects_off_the_console(console: Console) -> None:
    for target in ("//evil.example", "https://evil.example/", "/\\evil"):
        with _client(console) as client:
            csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text)
            assert csrf is not None
            out = client.post(
                "/login", data={"csrf": csrf.group(1), "token": console.token, "next": target}
            )
            assert out.headers["location"] == "/pending"


def test_a_session_ends_at_its_expiry(console: Console) -> None:
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        assert client.get("/pending").status_code == 200
        console.now[0] += console.config.sessions.seconds
        assert client.get("/pending").status_code == 303


def test_the_session_book_expires_and_closes() -> None:
    now = [0.0]
    book = SessionBook(seconds=60, clock=lambda: now[0])
    person = book.open("alice")
    assert book.get(person.sid) == person
    assert person.csrf_ok(person.csrf) and not person.csrf_ok("x") and not person.csrf_ok(None)
    now[0] = 59.9
    assert book.get(person.sid) is not None
    now[0] = 60.0
    assert book.get(person.sid) is None
    other = book.open("bob")
    book.close(other.sid)
    assert book.get(other.sid) is None


def test_removing_a_user_ends_their_session(console: Console) -> None:
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        UserBook(console.home).remove("alice")
        assert client.get("/pending").status_code == 303


def test_sign_out_needs_the_csrf_token(console: Console) -> None:
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        assert client.post("/logout").status_code == 403
        assert client.get("/pending").status_code == 200
        assert client.post("/logout", data={"csrf": _csrf(client)}).status_code == 303
        assert client.get("/pending").status_code == 303


def test_a_foreign_host_header_is_refused(console: Console) -> None:
    with _client(console) as client:
        out = client.get("/login", headers={"host": "rebound.example"})
        assert out.status_code == 400


def test_responses_allow_no_script_and_are_not_cached(console: Console) -> None:
    with _client(console) as client:
        out = client.get("/login")
        assert "default-src 'none'" in out.headers["content-security-policy"]
        assert "script-src" not in out.headers["content-security-policy"]
        assert out.headers["cache-control"] == "no-store"
        cookie = out.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie


def test_tokens_are_kept_hashed_and_shown_once(tmp_path: Path) -> None:
    book = UserBook(tmp_path)
    token = book.add("carol")
    kept = (tmp_path / "console_users.json").read_text()
    assert token not in kept
    assert (tmp_path / "console_users.json").stat().st_mode & 0o077 == 0
    assert book.who(token) == "carol" and book.who(token + "x") is None
    with pytest.raises(UsageError) as exists:
        book.add("carol")
    assert exists.value.code == "user_exists"
    rotated = book.add("carol", rotate=True)
    assert book.who(token) is None and book.who(rotated) == "carol"
    with pytest.raises(UsageError) as bad:
        book.add("../x")
    assert bad.value.code == "user_name_invalid"


@pytest.mark.parametrize(
    ("host", "kwargs", "code"),
    [
        ("0.0.0.0", {}, "console_public_refused"),
        ("192.0.2.1", {}, "console_public_refused"),
        ("0.0.0.0", {"public_url": "http://console.example"}, "public_url_invalid"),
        ("0.0.0.0", {"public_url": "https://console.example"}, "console_public_refused"),
        ("127.0.0.1", {"tls_cert": Path("c.pem")}, "tls_incomplete"),
    ],
)
def test_the_console_stays_on_loopback_unless_public_https_and_tls(
    host: str, kwargs: dict[str, object], code: str
) -> None:
    with pytest.raises(UsageError) as refused:
        check_binding(host, 8765, **kwargs)  # type: ignore[arg-type]
    assert refused.value.code == code


def test_public_binding_accepts_only_the_public_host() -> None:
    bound = check_binding(
        "0.0.0.0",
        443,
        public_url="https://console.example/",
        tls_cert=Path("c.pem"),
        tls_key=Path("k.pem"),
    )
    assert bound.allowed_hosts == ["console.example"]
    assert bound.public_url == "https://console.example"
    assert check_binding("::1", 0).allowed_hosts == ["127.0.0.1", "localhost", "::1"]


FIELDS = st.sampled_from(["csrf", "address", "request_digest", "decision", "reason",
                          "option.colour", "text.colour", "answer", ""])  # fmt: skip
VALUES = st.one_of(st.text(max_size=80), st.sampled_from(["approve", "decline", "put", "colour"]))


def test_fuzz_any_decide_form_is_refused_cleanly_or_decides(console: Console) -> None:
    run = console.question()
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        csrf = _csrf(client)

        @settings(max_examples=40, deadline=None)
        @given(form=st.dictionaries(FIELDS, VALUES, max_size=6), with_csrf=st.booleans())
        def post(form: dict[str, str], with_csrf: bool) -> None:
            if with_csrf:
                form = {**form, "csrf": csrf}
            before = console.state_bytes()
            out = client.post(f"/runs/{run['run_id']}/decide", data=form)
            assert out.status_code in (303, 400, 403, 404, 409), out.text
            assert "Traceback" not in out.text
            if out.status_code != 303:
                assert console.state_bytes() == before

        post()


@pytest.mark.parametrize("after", ["abc", "²", "٣", "-1", "99999999999999999999", "9" * 5000])
def test_a_history_cursor_that_is_not_a_stored_cursor_is_refused(
    console: Console, after: str
) -> None:
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        out = client.get("/runs", params={"after": after})
        assert out.status_code == 400 and "cursor_invalid" in out.text
        assert "Traceback" not in out.text
        assert client.get("/runs", params={"after": "5"}).status_code == 200


def test_pending_pages_follow_the_cursor_oldest_first_each_request_once(
    console: Console,
) -> None:
    console.config.pending_page = 2
    runs = [console.paused(f"line {n}\n")["run_id"] for n in range(5)]
    seen: list[str] = []
    path = "/pending"
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        for _ in range(10):
            page = client.get(path)
            assert page.status_code == 200
            shown = re.findall(r'<section class="request" data-run="([^"]+)"', page.text)
            assert 1 <= len(shown) <= 2
            seen += shown
            following = re.search(r'id="next-page" href="([^"]+)"', page.text)
            if following is None:
                break
            path = following.group(1)
        assert seen == runs
        past = client.get("/pending", params={"after": "9999999"})
        assert past.status_code == 200 and 'id="nothing-more"' in past.text
        bad = client.get("/pending", params={"after": "-1"})
        assert bad.status_code == 400 and "cursor_invalid" in bad.text


def test_a_form_over_the_limit_is_refused_before_it_is_read(console: Console) -> None:
    def endless() -> Iterator[bytes]:
        yield b"csrf=x&token="
        for _ in range(64):
            yield b"x" * 65536

    with _client(console) as client:
        before = console.state_bytes()
        for body in (endless(), b"token=" + b"x" * 70000):
            out = client.post(
                "/login",
                content=body,
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            assert out.status_code == 413 and "form_too_large" in out.text
        assert console.state_bytes() == before
        assert client.get("/login").status_code == 200


def test_a_form_that_is_not_one_urlencoded_utf8_value_per_field_is_refused(
    console: Console,
) -> None:
    run = console.paused()
    digest = run["requests"][0]["request_digest"]
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        csrf = _csrf(client)
        fields = f"csrf={csrf}&address=put&request_digest={digest}"
        urlencoded = {"content-type": "application/x-www-form-urlencoded"}
        before = console.state_bytes()
        for body, headers in (
            # which of two decisions counts would be a guess: the last one used to win
            (f"{fields}&decision=decline&decision=approve", urlencoded),
            (f"{fields}&decision=approve&reason=%ff%fe", urlencoded),
            (f"{fields}&decision=approve&reason=\xff".encode("latin-1"), urlencoded),
            (f"{fields}&decision=approve", {"content-type": "application/json"}),
            (f"{fields}&decision=approve", {"content-type": "multipart/form-data; boundary=z"}),
        ):
            out = client.post(f"/runs/{run['run_id']}/decide", content=body, headers=headers)
            assert out.status_code == 400 and "form_invalid" in out.text, body
            assert "Traceback" not in out.text
        assert console.state_bytes() == before
        approved = client.post(
            f"/runs/{run['run_id']}/decide",
            content=f"{fields}&decision=approve",
            headers=urlencoded,
        )
        assert approved.status_code == 303


def test_a_decline_that_another_driver_beat_audits_no_author(console: Console) -> None:
    run = console.question()
    session = console.session()
    try:
        assert session.store.acquire_lease(run["run_id"], "another-driver", 600) is None
    finally:
        session.close()
    with _client(console) as client:
        assert _sign_in(client, console.token).status_code == 303
        before = console.state_bytes()
        out = client.post(
            f"/runs/{run['run_id']}/decide",
            data={"csrf": _csrf(client), "address": "colour", "decision": "decline",
                  "request_digest": run["requests"][0]["request_digest"]},
        )  # fmt: skip
        assert out.status_code == 409 and "run_busy" in out.text
        assert console.state_bytes() == before

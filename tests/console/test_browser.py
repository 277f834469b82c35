"""A person in a real browser (Playwright driving Debian's chromium) against a real console.

Required where ``PROCTOR_REQUIRE_BROWSER=1`` (CI); elsewhere they skip, saying why.
``PROCTOR_CONSOLE_SCREENSHOTS=DIR`` saves the pending page and a run page there (the
screenshots in docs/ are made this way).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.engine.approvals import decide
from tests.console.conftest import Console
from tests.e2e.test_structured_questions import SKILL as SURVEY_SKILL
from tests.e2e.test_structured_questions import SURVEY

CHROMIUM = os.environ.get("PROCTOR_CHROMIUM", "/usr/bin/chromium")


def _browser_missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    if shutil.which(CHROMIUM) is None:
        return f"no chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture
def browser() -> Iterator[Any]:
    missing = _browser_missing()
    if missing is not None:
        if os.environ.get("PROCTOR_REQUIRE_BROWSER") == "1":
            pytest.fail(f"PROCTOR_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if os.getuid() == 0 else []
    with sync_playwright() as play:
        launched = play.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    try:
        yield context.new_page()
    finally:
        context.close()


def _sign_in(page: Any, console: Console, then: str = "/pending") -> None:
    page.goto(console.url + then)
    assert "/login" in page.url  # not signed in: sent to sign in first
    page.fill("#token", console.token)
    page.click("#sign-in")
    page.wait_for_url(console.url + then)
    assert page.inner_text("#who") == "alice"


def _shot(page: Any, name: str) -> None:
    folder = os.environ.get("PROCTOR_CONSOLE_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def test_a_person_signs_in_sees_the_diff_approves_and_the_run_completes(
    console: Console, page: Any
) -> None:
    run = console.paused()
    _sign_in(page, console)
    section = page.locator(f"section[data-run='{run['run_id']}']")
    assert section.locator(".diff .del").inner_text() == "-old line"
    assert section.locator(".diff .add").inner_text() == "+new line"
    # the diff is coloured: added and removed lines carry different colours
    add = section.locator(".diff .add").evaluate("e => getComputedStyle(e).backgroundColor")
    gone = section.locator(".diff .del").evaluate("e => getComputedStyle(e).backgroundColor")
    assert add != gone
    _shot(page, "console-pending.png")
    section.locator("button.approve").click()
    page.wait_for_url(console.url + f"/runs/{run['run_id']}")
    assert page.inner_text("#run-outcome") == "completed"
    assert page.inner_text("#verified").startswith("verified")
    assert "console:alice" in page.inner_text(".decided-by")
    _shot(page, "console-run.png")
    assert (console.root / "page.txt").read_text() == "new line\n"
    audit = (console.root / ".proctor" / "audit.jsonl").read_text()
    assert '"decided_by":"console:alice"' in audit


def test_decline_seals_declined_and_the_file_is_unchanged(console: Console, page: Any) -> None:
    run = console.paused()
    _sign_in(page, console)
    page.locator(f"section[data-run='{run['run_id']}'] button.decline").click()
    page.wait_for_url(console.url + f"/runs/{run['run_id']}")
    assert page.inner_text("#run-outcome") == "declined"
    assert (console.root / "page.txt").read_text() == "old line\n"


def test_forged_posts_are_refused_and_change_nothing(console: Console, page: Any) -> None:
    first, second = console.paused("one\n"), console.paused("two\n")
    _sign_in(page, console)
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    before = console.state_bytes()
    form = {
        "address": "put",
        "request_digest": first["requests"][0]["request_digest"],
        "decision": "approve",
    }
    url = console.url + f"/runs/{first['run_id']}/decide"
    # a cross-site form would carry the cookie but cannot know the CSRF token
    no_token = page.context.request.post(url, form=form, max_redirects=0)
    assert no_token.status == 403 and "csrf_invalid" in no_token.text()
    # the token, but the digest of another run's request
    other = {**form, "csrf": csrf, "request_digest": second["requests"][0]["request_digest"]}
    wrong = page.context.request.post(url, form=other, max_redirects=0)
    assert wrong.status == 409 and "digest_mismatch" in wrong.text()
    assert console.state_bytes() == before
    assert (console.root / "page.txt").read_text() == "old line\n"


def test_a_request_decided_in_the_terminal_shows_as_decided(console: Console, page: Any) -> None:
    run = console.paused()
    session = console.session()
    try:
        decide(
            session,
            run["run_id"],
            "put",
            request_digest=run["requests"][0]["request_digest"],
            approve=True,
            decided_by="os:bob",
        )
    finally:
        session.close()
    _sign_in(page, console, f"/runs/{run['run_id']}/requests/put")
    assert "decided by os:bob; approved" in page.inner_text("#state")
    assert page.locator("form.decide").count() == 0
    page.goto(console.url + "/pending")
    assert page.locator(f"section[data-run='{run['run_id']}']").count() == 0


def test_the_request_page_shows_the_real_command_with_every_escape_marked(
    console: Console, page: Any
) -> None:
    from proctor.core.inert_text import is_hostile
    from tests.console.test_hostile_pages import REAL, hostile_run

    run = hostile_run(console)
    _sign_in(page, console, f"/runs/{run['run_id']}/requests/run")
    shown = page.inner_text("pre.payload")
    # what the browser renders: the real command, each hostile character as its escape
    assert REAL in shown and "\\x1b]52;c;" in shown and "\\u202e" in shown
    assert not [c for c in page.inner_text("main") if is_hostile(c)]
    marks = page.locator("pre.payload .inert")
    assert marks.count() > 20 and marks.first.is_visible()
    mark = marks.first.evaluate("e => getComputedStyle(e).backgroundColor")
    plain = page.locator("pre.payload .key").first.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    assert mark != plain  # the mark is visible as a mark, not only as text
    _shot(page, "console-hostile.png")


def test_a_connector_write_shows_method_url_body_and_key(
    console: Console, page: Any, tmp_path: Path
) -> None:
    from proctor.core.authority import parse_authority
    from tests.runtime.connectors.support import CONNECTOR, LABEL, RUN_YAML
    from tests.runtime.connectors.tracker import TrackerServer

    server = TrackerServer()
    try:
        (console.root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
        pkg = console.root / "skills" / "triage"
        (pkg / "connectors" / "tracker").mkdir(parents=True)
        (pkg / "SKILL.md").write_text("---\nname: triage\ndescription: Label issues.\n---\n")
        (pkg / "run.yaml").write_text(RUN_YAML.format(steps=LABEL))
        (pkg / "connectors" / "tracker" / "connector.yaml").write_text(
            CONNECTOR.format(url=server.tracker.url)
        )
        session = console.session()
        try:
            env = session.run(
                str(pkg), inputs={"issue": "7", "label": "bug"},
                authority=parse_authority({"effects": "ask"}),
                request_secrets={"tracker": "canary-console-op"},
            )  # fmt: skip
        finally:
            session.close()
        assert env.status == "needs_approval", env.refusal
        _sign_in(page, console, f"/runs/{env.run_id}/requests/label")
        shown = page.inner_text("pre.payload")
        url = server.tracker.url.rstrip("/") + "/api/issues/7/labels"
        for expected in (
            "connector: tracker",
            f"origin: {server.tracker.url.rstrip('/')}",
            f"POST {url}",
            '"label": "bug"',
            "idempotency key: 7",
            "Idempotency-Key: op:sha256:",
            "credential tracker, added when sent; not shown",
            "operation:tracker/issue.read",
        ):
            assert expected in shown, (expected, shown)
        assert "canary-console-op" not in page.content()
        _shot(page, "console-operation.png")
        assert server.tracker.hits == {}  # shown, not sent
    finally:
        server.stop()


# -- structured questions and notification links (issue: approvals that reach people) --


def _survey(console: Console) -> dict[str, Any]:
    pkg = console.root / "skills" / "survey"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text(SURVEY_SKILL)
    (pkg / "run.yaml").write_text(SURVEY)
    session = console.session()
    try:
        doc = session.run(str(pkg) + "#survey").to_json()
    finally:
        session.close()
    assert doc["status"] == "needs_approval", doc
    return dict(doc)


def test_a_person_picks_a_structured_option_in_the_console(console: Console, page: Any) -> None:
    run = _survey(console)
    run_id = run["run_id"]
    _sign_in(page, console, f"/runs/{run_id}/requests/where")
    form = page.locator("form.decide")
    labels = form.locator("fieldset").first.locator("label.option")
    assert labels.count() == 3
    first = labels.nth(0).inner_text()
    assert "eu" in first and "(recommended)" in first and "Frankfurt" in first
    assert "recommended" not in labels.nth(1).inner_text()
    form.locator("input[name='option.region'][value='us']").check()
    form.locator("input[name='text.note']").fill("ship in May")
    form.locator("button.approve").click()
    page.wait_for_url(console.url + f"/runs/{run_id}")
    assert page.inner_text("#run-outcome") == "completed"
    session = console.session()
    try:
        (request, *_) = session.store.requests(run_id)
    finally:
        session.close()
    assert request.decision is not None
    assert request.decision["value"] == {
        "region": {"option": "us"},
        "note": {"text": "ship in May"},
    }
    assert request.decision["decided_by"] == "console:alice"


def test_a_notification_link_opens_that_request_after_sign_in(console: Console, page: Any) -> None:
    from proctor.runtime.notify.message import console_link

    run = _survey(console)
    link = console_link(console.url, run["run_id"], "where")
    assert link is not None
    page.goto(link)
    assert "/login" in page.url  # the link alone shows and decides nothing
    assert page.locator("form.decide").count() == 0
    page.fill("#token", console.token)
    page.click("#sign-in")
    page.wait_for_url(link)
    assert page.locator("form.decide input[name='address']").get_attribute("value") == "where"

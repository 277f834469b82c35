"""Structured questions and notification links in a real browser: the console shows each
option with its detail and the recommended one marked, a person picks one and adds words, and
the run goes on with the answer; a notification's link opens exactly that request, after
signing in."""

from __future__ import annotations

from typing import Any

from tests.console.conftest import Console
from tests.console.test_browser import _sign_in, browser, page  # noqa: F401 - fixtures
from tests.e2e.test_structured_questions import SKILL, SURVEY


def _survey(console: Console) -> dict[str, Any]:
    pkg = console.root / "skills" / "survey"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text(SKILL)
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

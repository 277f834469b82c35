"""A serving console settles deadlines by itself: a request that expires while nobody opens
a page is decided by its default, as ``deadline``, from the console's own process."""

from __future__ import annotations

import json
import sqlite3
import time

from tests.console.conftest import Console

EXPIRING = """minimum_proctor: 0.1.0
methods:
  ship:
    description: Ship once approved.
    steps:
      - id: confirm
        ask: {reason: Ship it?, expires_in: 1}
"""


def _state(console: Console, run_id: str) -> tuple[str, str | None, str | None]:
    conn = sqlite3.connect(f"file:{console.root / '.proctor' / 'runs.sqlite'}?mode=ro", uri=True)
    try:
        status, outcome = conn.execute(
            "SELECT status, outcome FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        (decision,) = conn.execute(
            "SELECT decision FROM requests WHERE run_id = ?", (run_id,)
        ).fetchone()
    finally:
        conn.close()
    who = json.loads(decision)["decided_by"] if decision else None
    return status, outcome, who


def test_the_console_process_declines_an_expired_request(console: Console) -> None:
    pkg = console.root / "skills" / "expiring"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: expiring\ndescription: Expires.\n---\n")
    (pkg / "run.yaml").write_text(EXPIRING)
    session = console.session()
    try:
        run_id = session.run(str(pkg) + "#ship").run_id
    finally:
        session.close()  # closing settles too, but the deadline has not passed yet
    assert run_id is not None
    assert _state(console, run_id) == ("needs_approval", None, None)
    deadline = time.monotonic() + 60
    while _state(console, run_id)[0] != "sealed":  # nobody opens a page meanwhile
        assert time.monotonic() < deadline, "the console never settled the deadline"
        time.sleep(0.1)
    assert _state(console, run_id) == ("sealed", "declined", "deadline")

"""``proctor history RUN_ID --after SEQ``: only the run's events after SEQ, and the cursor to
pass next; a cursor past the end gives none and keeps the cursor."""

from __future__ import annotations

from tests.e2e.conftest import Ws


def test_history_of_one_run_pages_its_events_by_cursor(ws: Ws) -> None:
    ws.add_example("hello-world")
    ran = ws.proctor("run", "hello-world", "-i", "message=hi", "--json")
    assert ran.code == 0, ran.stderr
    run_id = ran.json()["run_id"]
    whole = ws.proctor("history", run_id, "--json").json()
    seqs = [e["seq"] for e in whole["events"]]
    assert len(seqs) >= 2 and whole["events_cursor"] == seqs[-1]
    after = ws.proctor("history", run_id, "--after", str(seqs[0]), "--json").json()
    assert [e["seq"] for e in after["events"]] == seqs[1:]
    assert after["events_cursor"] == seqs[-1]
    past = ws.proctor("history", run_id, "--after", str(seqs[-1]), "--json").json()
    assert past["events"] == [] and past["events_cursor"] == seqs[-1]
    bad = ws.proctor("history", run_id, "--after", "-1")
    assert bad.code == 2 and "Traceback" not in bad.stderr

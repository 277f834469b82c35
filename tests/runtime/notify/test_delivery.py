"""Delivery from the outbox on real stores and a real loopback receiver: escalation tells a
second channel only while the request still waits, a failing receiver is retried with backoff
until the attempts run out (each attempt audited), a command channel gets the document on
stdin, and the PostgreSQL outbox keeps ids and times as SQLite's does."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.engine.approvals import decide
from proctor.runtime.engine.upkeep import settle
from proctor.runtime.notify.deliver import MAX_ATTEMPTS, backoff
from proctor.runtime.records.outbox import Outbox, OutboxEntry, notification_id
from tests.pg import fresh_schema
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.notify.receiver import Receiver

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  ship:
    description: Ship once approved.
    steps:
      - id: confirm
        ask: {reason: Ship it?, expires_in: 600}
      - id: say
        tool: echo
        inputs: {text: shipped}
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    try:
        yield running
    finally:
        running.stop()


def _workspace(tmp_path: Path, toml: str) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "gate", RUN_YAML)
    (root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n\n' + toml)
    return root


def _events(root: Path, name: str) -> list[dict[str, Any]]:
    lines = (root / ".proctor" / "audit.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def _settle(s: Any, at: float) -> None:
    settle(s, now=at)


def test_escalation_tells_the_second_channel_only_while_the_request_waits(
    tmp_path: Path, receiver: Receiver
) -> None:
    root = _workspace(
        tmp_path,
        f'[notify.team]\nwebhook = "{receiver.url("/team")}"\nformat = "slack"\n\n'
        f'[notify.oncall]\nwebhook = "{receiver.url("/oncall")}"\nformat = "slack"\n'
        "after = 300\n",
    )
    s = session(root)
    first = s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    second = s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    now = time.time()
    _settle(s, now)
    assert len(receiver.bodies("/team")) == 2 and receiver.bodies("/oncall") == []
    # the first is decided before its escalation is due; the second still waits
    decide(
        s, first.run_id or "", "confirm", request_digest=first.requests[0]["request_digest"],
        approve=True, decided_by="os:alice",
    )  # fmt: skip
    _settle(s, now + 301)
    (escalated,) = receiver.bodies("/oncall")
    assert second.run_id in json.dumps(escalated) and first.run_id not in json.dumps(escalated)
    assert escalated["text"].startswith("Still waiting")
    skipped = [e for e in Outbox(s.store).entries() if e.note == "skipped: decided"]
    assert [e.run_id for e in skipped] == [first.run_id]


def test_an_escalation_after_the_deadline_is_not_queued(tmp_path: Path, receiver: Receiver) -> None:
    root = _workspace(
        tmp_path,
        f'[notify.late]\nwebhook = "{receiver.url("/late")}"\nformat = "slack"\nafter = 900\n',
    )
    s = session(root)
    s.run("gate#ship", authority=authority(effects="ask"), cwd=root)  # expires in 600 s
    assert [e.channel for e in Outbox(s.store).entries()] == ["@deadline"]


def test_a_failing_receiver_is_retried_with_backoff_then_given_up(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.status = 503
    root = _workspace(
        tmp_path, f'[notify.team]\nwebhook = "{receiver.url("/t")}"\nsecret = "team"\n'
    )
    from proctor.runtime.home.credentials import CredentialStore

    CredentialStore(root / ".home").set("notify", "team", "hmac-key-material")
    s = session(root)
    s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    at = time.time()
    for attempt in range(1, MAX_ATTEMPTS + 1):
        _settle(s, at)
        (entry,) = [e for e in Outbox(s.store).entries() if e.channel == "team"]
        assert entry.attempts == attempt
        if attempt < MAX_ATTEMPTS:
            assert entry.state == "pending" and entry.due_at == pytest.approx(at + backoff(attempt))
            _settle(s, entry.due_at - 1)  # not due yet: nothing is sent
            assert len(receiver.got) == attempt
        at = entry.due_at
    assert entry.state == "failed" and entry.note == "HTTP 503"
    assert len(receiver.got) == MAX_ATTEMPTS
    ids = {json.loads(body)["id"] for _, _, body in receiver.got}
    assert ids == {entry.id}  # every attempt carries the same id
    assert len(_events(root, "notification_attempt_failed")) == MAX_ATTEMPTS - 1
    assert len(_events(root, "notification_failed")) == 1


def test_a_command_channel_gets_the_document_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    script = f"import sys; open({str(out)!r}, 'wb').write(sys.stdin.buffer.read())"
    root = _workspace(
        tmp_path,
        f'[notify.local]\ncommand = [{json.dumps(sys.executable)}, "-c", {json.dumps(script)}]\n',
    )
    s = session(root)
    env = s.run("gate#ship", authority=authority(effects="ask"), cwd=root)
    _settle(s, time.time())
    doc = json.loads(out.read_bytes())
    assert doc["schema"] == "proctor.notification.v1" and doc["run_id"] == env.run_id
    assert doc["expires_at"] is not None and doc["console_url"] is None
    assert _events(root, "notification_delivered")[0]["note"] == "exit 0"


def test_the_postgresql_outbox_keeps_ids_and_takes_once() -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    with fresh_schema() as url:
        store = PostgresRunStore(url)
        outbox = Outbox(store)
        entry_id = notification_id("r1", "confirm", "sha256:" + "0" * 64, "team", "opened")
        entry = OutboxEntry(
            id=entry_id, run_id="r1", address="confirm", request_digest="sha256:" + "0" * 64,
            channel="team", stage="opened", body={"id": entry_id}, due_at=100.0,
        )  # fmt: skip
        assert outbox.put([entry]) == 1
        assert outbox.put([entry]) == 0  # the same notification again keeps the first
        (due,) = outbox.due(100.0)
        assert due.body == {"id": entry_id}
        assert outbox.take(due, 160.0) is True
        stale = OutboxEntry(**{**due.__dict__, "due_at": 100.0})
        assert outbox.take(stale, 170.0) is False  # another sender took it: not twice
        assert outbox.due(150.0) == []
        outbox.settle(entry_id, "delivered", due_at=150.0, note="HTTP 200")
        (done,) = outbox.entries()
        assert (done.state, done.attempts, done.note) == ("delivered", 1, "HTTP 200")

"""Notifications through the real CLI: a paused run tells a loopback webhook once per request
and channel, signed, with no secret in the body, also when the sender is killed between
sending and recording it (the resend carries the same id); a Slack body has Slack's shape."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from tests.e2e.conftest import Ws
from tests.runtime.notify.receiver import Receiver

SIGNING = "sign-key-canary-71f3"
TOKEN = "tok-canary-payload-9d2e"

SKILL = "---\nname: gate\ndescription: Ask before shipping.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  ship:
    description: Ship once a person says so.
    inputs:
      type: object
      properties: {note: {type: string}}
    steps:
      - id: confirm
        ask: {reason: "Ship release 1.2 to production?"}
      - id: say
        tool: echo
        inputs: {text: shipped}
"""

# Slack's documented incoming-webhook body (api.slack.com/messaging/webhooks and the Block
# Kit reference): a ``text`` string and/or ``blocks``, each block of a known type with its
# documented limits.
_TEXT_OBJ = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {
        "type": {"enum": ["plain_text", "mrkdwn"]},
        "text": {"type": "string", "minLength": 1, "maxLength": 3000},
        "emoji": {"type": "boolean"},
        "verbatim": {"type": "boolean"},
    },
    "additionalProperties": False,
}
SLACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "anyOf": [{"required": ["text"]}, {"required": ["blocks"]}],
    "properties": {
        "text": {"type": "string"},
        "blocks": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["type", "text"],
                        "properties": {
                            "type": {"const": "header"},
                            "text": {
                                "type": "object",
                                "properties": {
                                    "type": {"const": "plain_text"},
                                    "text": {"type": "string", "maxLength": 150},
                                },
                            },
                            "block_id": {"type": "string"},
                        },
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "required": ["type", "text"],
                        "properties": {
                            "type": {"const": "section"},
                            "text": _TEXT_OBJ,
                            "block_id": {"type": "string"},
                        },
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "required": ["type", "elements"],
                        "properties": {
                            "type": {"const": "context"},
                            "elements": {"type": "array", "maxItems": 10, "items": _TEXT_OBJ},
                        },
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "required": ["type", "elements"],
                        "properties": {
                            "type": {"const": "actions"},
                            "elements": {
                                "type": "array",
                                "maxItems": 25,
                                "items": {
                                    "type": "object",
                                    "required": ["type", "text"],
                                    "properties": {
                                        "type": {"const": "button"},
                                        "text": {
                                            "type": "object",
                                            "properties": {
                                                "type": {"const": "plain_text"},
                                                "text": {"type": "string", "maxLength": 75},
                                            },
                                        },
                                        "url": {"type": "string", "maxLength": 3000},
                                        "action_id": {"type": "string", "maxLength": 255},
                                    },
                                    "additionalProperties": False,
                                },
                            },
                        },
                        "additionalProperties": False,
                    },
                ]
            },
        },
        "username": {"type": "string"},
        "icon_emoji": {"type": "string"},
        "unfurl_links": {"type": "boolean"},
        "mrkdwn": {"type": "boolean"},
    },
    "additionalProperties": False,
}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    try:
        yield running
    finally:
        running.stop()


def _setup(ws: Ws, receiver: Receiver) -> None:
    pkg = ws.root / "skills" / "gate"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text(SKILL)
    (pkg / "run.yaml").write_text(RUN_YAML)
    (ws.root / "proctor.toml").write_text(
        '[egress]\nallow = ["127.0.0.1"]\n\n'
        '[notify]\nconsole_url = "https://console.example.com"\n\n'
        f'[notify.team]\nwebhook = "{receiver.url("/hook")}"\nsecret = "notify-team"\n\n'
        '[notify.chat]\nwebhook_profile = "team-slack"\nformat = "slack"\n'
    )
    stored = ws.proctor(
        "credential", "set", "notify", "--profile", "notify-team", "--from-stdin", stdin=SIGNING
    )
    assert stored.code == 0, stored.stderr
    # a Slack URL is itself a secret: it is kept in a profile, never in proctor.toml
    hook = ws.proctor(
        "credential", "set", "slack", "--profile", "team-slack", "--from-stdin",
        stdin=receiver.url("/slack"),
    )  # fmt: skip
    assert hook.code == 0, hook.stderr


def _run(ws: Ws, env: dict[str, str] | None = None) -> str:
    run = ws.proctor(
        "run", "skills/gate", "-i", f"note={TOKEN}", "--run-authority", '{"effects": "ask"}',
        "--json", env=env,
    )  # fmt: skip
    if env and env.get("PROCTOR_TEST_KILL_AT"):
        assert run.code == -9, (run.code, run.stderr)
        return ""
    assert run.code == 10, run.stderr
    return str(run.json()["run_id"])


def _check_signed(headers: dict[str, str], body: bytes) -> None:
    lower = {k.lower(): v for k, v in headers.items()}
    stamp = lower["x-proctor-timestamp"]
    want = hmac.new(SIGNING.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert lower["x-proctor-signature"] == "v1=" + want


def test_a_paused_run_tells_each_channel_once_signed_and_without_secrets(
    ws: Ws, receiver: Receiver
) -> None:
    _setup(ws, receiver)
    run_id = _run(ws)
    (doc,) = receiver.bodies("/hook")
    (slack,) = receiver.bodies("/slack")
    assert doc["schema"] == "proctor.notification.v1"
    assert (doc["run_id"], doc["address"], doc["kind"]) == (run_id, "confirm", "approval")
    assert doc["summary"] == "ask: Ship release 1.2 to production?"
    assert doc["console_url"] == f"https://console.example.com/runs/{run_id}/requests/confirm"
    assert doc["request_digest"].startswith("sha256:") and "payload" not in doc
    ((_, headers, raw),) = [g for g in receiver.got if g[0] == "/hook"]
    _check_signed(headers, raw)
    assert headers.get("X-Proctor-Id", headers.get("x-proctor-id")) == doc["id"]
    jsonschema.validate(slack, SLACK_SCHEMA)
    assert any(
        e.get("url") == doc["console_url"]
        for b in slack["blocks"]
        for e in b.get("elements", [])
        if b["type"] == "actions"
    )
    for _, _, body in receiver.got:
        assert SIGNING.encode() not in body and TOKEN.encode() not in body
    listed = ws.proctor("notify", "list", "--json").json()
    assert listed["schema"] == "proctor.notify.list.v1"
    assert {e["state"] for e in listed["outbox"]} == {"delivered"}
    assert "127.0.0.1:" not in json.dumps(listed["channels"])  # a webhook's path is never shown
    assert listed["channels"][1]["target"] == "(credential profile team-slack)"
    audit = (ws.root / ".proctor" / "audit.jsonl").read_text()
    assert audit.count('"event":"notification_delivered"') == 2
    assert SIGNING not in audit
    # the next command sends nothing again
    ws.proctor("pending", "--json")
    assert len(receiver.got) == 2


def test_a_sender_killed_mid_delivery_loses_nothing_and_a_resend_has_the_same_id(
    ws: Ws, receiver: Receiver
) -> None:
    _setup(ws, receiver)
    kill = {
        "PROCTOR_TEST_HOOKS": "1",
        "PROCTOR_TEST_KILL_AT": "notify.sent:1",
        "PROCTOR_NOTIFY_ATTEMPT_SECONDS": "1",
    }
    _run(ws, kill)  # killed after the first body left, before it was recorded as delivered
    assert len(receiver.got) == 1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        sent = ws.proctor("notify", "send", "--json", env={"PROCTOR_NOTIFY_ATTEMPT_SECONDS": "1"})
        assert sent.code == 0, sent.stderr
        if sent.json()["outbox"] == {"delivered": 2}:
            break
    assert sent.json()["outbox"] == {"delivered": 2}
    ids: dict[str, set[str]] = {}
    for path, _, body in receiver.got:
        doc = json.loads(body)
        ids.setdefault(path, set()).add(doc["id"] if path == "/hook" else _slack_id(body))
    assert set(ids) == {"/hook", "/slack"}
    assert all(len(v) == 1 for v in ids.values()), ids  # duplicates share their id
    assert len(receiver.got) == 3  # one resend of the one the kill interrupted


def _slack_id(body: bytes) -> str:
    return str(json.loads(body)["blocks"][0]["block_id"])  # Slack's body keeps the id here


def test_notify_test_and_unknown_channel(ws: Ws, receiver: Receiver) -> None:
    _setup(ws, receiver)
    ok = ws.proctor("notify", "test", "chat", "--json")
    assert ok.code == 0
    assert ok.json() == {
        "schema": "proctor.notify.test.v1", "channel": "chat",
        "delivered": True, "note": "HTTP 200",
    }  # fmt: skip
    jsonschema.validate(receiver.bodies("/slack")[0], SLACK_SCHEMA)
    missing = ws.proctor("notify", "test", "nope")
    assert missing.code == 2 and "notify_channel_unknown" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_loopback_webhook_the_workspace_did_not_allow_is_refused(
    ws: Ws, receiver: Receiver
) -> None:
    _setup(ws, receiver)
    text = (ws.root / "proctor.toml").read_text().replace('allow = ["127.0.0.1"]', "allow = []")
    (ws.root / "proctor.toml").write_text(text)
    _run(ws)
    assert receiver.got == []  # the egress guard refused the address: nothing was sent
    listed = ws.proctor("notify", "list", "--json").json()
    assert {e["state"] for e in listed["outbox"]} == {"pending"}
    assert all("egress refused" in (e["note"] or "") for e in listed["outbox"])


def test_a_broken_notify_table_refuses_the_run_before_any_step(ws: Ws, receiver: Receiver) -> None:
    _setup(ws, receiver)
    (ws.root / "proctor.toml").write_text('[notify.team]\nwebhook = "ftp://x.example.com"\n')
    run = ws.proctor("run", "skills/gate", "--run-authority", '{"effects": "ask"}', "--json")
    assert run.code != 0 and run.code != 10
    assert "notify_config_invalid" in run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert receiver.got == []

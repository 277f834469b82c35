"""What a notification says: the ``proctor.notification.v1`` document, its Slack form, and the
signature a receiver checks.

The document names the request (run, address, kind, digest), says in one line what it asks
(made inert: control, escape and bidirectional characters shown as escapes), and links to the
console page of exactly that request, which asks the person to sign in: a notification never
approves anything by itself. It never carries a secret (the summary comes from the sanitized
view) and carries the payload only when the channel says ``payload = true`` (sanitized too).

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from proctor.core.inert_text import visible
from proctor.receipts.jsontext import compact_encoder

__all__ = [
    "NOTIFICATION_SCHEMA",
    "SIGNATURE_HEADER",
    "console_link",
    "notification",
    "sign",
    "slack_body",
    "wire_body",
]

NOTIFICATION_SCHEMA = "proctor.notification.v1"
SIGNATURE_HEADER = "X-Proctor-Signature"
SUMMARY_MAX = 300
_DUMPS = compact_encoder(sort_keys=True)
_TITLES = {
    "approval": "Approval needed",
    "question": "Question for you",
    "retry": "Send again?",
}


def console_link(console_url: str | None, run_id: str, address: str) -> str | None:
    """The console page of exactly one request (``None`` when no console URL is set)."""
    if not console_url:
        return None
    return f"{console_url}/runs/{quote(run_id, safe='')}/requests/{quote(address, safe='/')}"


def _inert(text: Any, limit: int = SUMMARY_MAX) -> str:
    shown, _ = visible(str(text))
    shown = " ".join(shown.split())
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def notification(
    *,
    entry_id: str,
    channel: str,
    stage: str,
    run_id: str,
    skill: str,
    method: str,
    address: str,
    kind: str,
    request_digest: str,
    summary: str,
    console_url: str | None,
    opened_at: str,
    expires_at: str | None = None,
    payload: Any = None,
) -> dict[str, Any]:
    """The ``proctor.notification.v1`` document for one request on one channel."""
    doc: dict[str, Any] = {
        "schema": NOTIFICATION_SCHEMA,
        "id": entry_id,
        "event": "request_escalated" if stage == "escalated" else "request_opened",
        "channel": channel,
        "run_id": run_id,
        "skill": _inert(skill, 200),
        "method": _inert(method, 200),
        "address": _inert(address, 500),
        "kind": kind,
        "request_digest": request_digest,
        "summary": _inert(summary),
        "console_url": console_link(console_url, run_id, address),
        "opened_at": opened_at,
        "expires_at": expires_at,
    }
    if payload is not None:
        doc["payload"] = payload
    return doc


def _mrkdwn(text: str) -> str:
    """Text for Slack's ``mrkdwn``: its three control characters escaped as Slack documents."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The document as a Slack incoming-webhook body: ``text`` (the fallback a notification
    shows) and ``blocks`` (a header, the summary, the request's context and a link button)."""
    title = _TITLES.get(str(doc.get("kind")), "Request waiting")
    if doc.get("event") == "request_escalated":
        title = f"Still waiting: {title.lower()}"
    who = f"{doc.get('skill')}#{doc.get('method')}"
    text = f"{title}: {who} — {doc.get('summary')}"
    blocks: list[dict[str, Any]] = [
        {
            "type": "header",
            "block_id": str(doc.get("id"))[:255],  # every delivery of it carries the same id
            "text": {"type": "plain_text", "text": _inert(f"{title}: {who}", 150)},
        },
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _mrkdwn(_inert(doc.get("summary"), 2900))},
        },
    ]
    context = f"run {doc.get('run_id')} · {doc.get('address')} · {doc.get('request_digest')}"
    if doc.get("expires_at"):
        context += f" · expires {doc.get('expires_at')}"
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(context[:2900])}]}
    )
    link = doc.get("console_url")
    if isinstance(link, str) and link:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open in the console"},
                        "url": link[:3000],
                        "action_id": "open_console",
                    }
                ],
            }
        )
    return {"text": _mrkdwn(_inert(text, 3000)), "blocks": blocks}


def wire_body(doc: Mapping[str, Any], fmt: str) -> bytes:
    """The bytes a webhook of format ``fmt`` sends (compact JSON, sorted keys, UTF-8)."""
    body = slack_body(doc) if fmt == "slack" else dict(doc)
    return _DUMPS(body).encode("utf-8")


def sign(key: bytes, timestamp: str, body: bytes) -> str:
    """The signature header's value: ``v1=`` and the hex HMAC-SHA256 of
    ``<timestamp>.<body>`` under ``key`` (the timestamp is sent as ``X-Proctor-Timestamp``,
    so a receiver can refuse an old body replayed)."""
    mac = hmac.new(key, timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()

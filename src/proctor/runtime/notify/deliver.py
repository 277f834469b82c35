"""Delivering the outbox: at least once, with retries and backoff, every attempt audited.

:func:`deliver_due` takes each due entry of the outbox (:mod:`proctor.runtime.records.outbox`)
for one attempt, sends it on its channel, and records how it ended: ``delivered``; ``pending``
again after a backoff (5 s, doubling, at most an hour) when it failed; ``failed`` once
:data:`MAX_ATTEMPTS` attempts failed. Each attempt writes one audit line
(``notification_delivered`` / ``notification_attempt_failed`` / ``notification_failed``) naming
the entry's id, channel, run and address, never its body.

A webhook goes through the egress guard (:func:`proctor.runtime.boundary.transport.egress_client`
with the workspace's ``[egress] allow``): a private or loopback destination the workspace did
not allow is refused like any other connection. A ``json`` body is signed with the HMAC key of
the channel's credential profile, read at the moment of sending and never written anywhere.
A command channel gets the document on stdin, with no shell, a clean environment and a time-out.

Entries whose channel is not (or no longer) declared are put back with backoff, never dropped.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.errors import CredentialError, EgressRefused, NotifyFailed
from proctor.runtime.notify.config import Channel, NotifyConfig
from proctor.runtime.notify.message import SIGNATURE_HEADER, sign, wire_body
from proctor.runtime.records.outbox import Outbox, OutboxEntry
from proctor.runtime.testhooks import kill_point

if TYPE_CHECKING:
    import httpx

    from proctor.runtime.records.audit import AuditLog

__all__ = [
    "MAX_ATTEMPTS",
    "Sent",
    "attempt_seconds",
    "backoff",
    "deliver_due",
    "profile_keys",
    "send",
]

MAX_ATTEMPTS = 10
TIMEOUT_SECONDS = 10.0
_ATTEMPT_ENV = "PROCTOR_NOTIFY_ATTEMPT_SECONDS"

SecretLookup = Callable[[str], bytes]
"""The HMAC key of a credential profile (raises ``CredentialError``)."""


def attempt_seconds(environ: dict[str, str] | os._Environ[str] | None = None) -> float:
    """How long one attempt holds an entry before another sender may take it again (a sender
    killed mid-delivery leaves it due after this): ``PROCTOR_NOTIFY_ATTEMPT_SECONDS``, 1 to
    3600, default 60."""
    raw = (environ if environ is not None else os.environ).get(_ATTEMPT_ENV, "")
    try:
        value = float(raw) if raw else 60.0
    except ValueError:
        value = 60.0
    return min(max(value, 1.0), 3600.0)


def backoff(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: 5, 10, 20 … ≤ 3600."""
    return float(min(3600, 5 * 2 ** max(0, attempts - 1)))


class Sent:
    """What one attempt did: ``ok``, and a short note (an HTTP status, an exit code)."""

    def __init__(self, ok: bool, note: str) -> None:
        self.ok, self.note = ok, note


def profile_keys(home: Path | None = None) -> SecretLookup:
    """The HMAC keys of the credential profiles in ``home`` (default: ``PROCTOR_HOME`` or
    ``~/.proctor``), read when a body is signed and never kept."""

    def lookup(profile: str) -> bytes:
        from proctor.runtime.home.credentials import CredentialStore

        return CredentialStore(home).material(profile).reveal().encode("utf-8")

    return lookup


def _webhook(
    channel: Channel,
    doc: dict[str, Any],
    root: Path,
    secret_lookup: SecretLookup,
    client: httpx.Client | None,
) -> Sent:
    import httpx

    url = channel.webhook
    if url is None:  # kept in a credential profile (read now, never written anywhere)
        assert channel.webhook_profile is not None
        url = secret_lookup(channel.webhook_profile).decode("utf-8", "replace").strip()
        if not url.lower().startswith(("https://", "http://")):
            return Sent(False, "the webhook profile does not hold an http(s) URL")
    body = wire_body(doc, channel.format)
    headers = {
        "content-type": "application/json",
        "user-agent": "proctor-notify",
        "x-proctor-id": str(doc.get("id")),
    }
    if channel.format == "json":
        assert channel.secret is not None
        timestamp = str(int(time.time()))
        headers["x-proctor-timestamp"] = timestamp
        headers[SIGNATURE_HEADER.lower()] = sign(secret_lookup(channel.secret), timestamp, body)
    own = client is None
    if client is None:
        from proctor.runtime.boundary.egress import EgressLimits, load_egress_allow
        from proctor.runtime.boundary.transport import egress_client

        limits = EgressLimits(connect_s=TIMEOUT_SECONDS, read_s=TIMEOUT_SECONDS)
        client = egress_client(load_egress_allow(root), limits=limits)
    try:
        response = client.post(url, content=body, headers=headers)
    except EgressRefused as exc:
        return Sent(False, f"egress refused: {exc.code}")
    except (httpx.HTTPError, ValueError) as exc:  # never the URL: it may be a secret
        return Sent(False, f"not delivered: {type(exc).__name__}")
    finally:
        if own:
            client.close()
    if 200 <= response.status_code < 300:
        return Sent(True, f"HTTP {response.status_code}")
    return Sent(False, f"HTTP {response.status_code}")


def _command(channel: Channel, doc: dict[str, Any], root: Path) -> Sent:
    body = wire_body(doc, "json")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    try:
        done = subprocess.run(
            list(channel.command),
            input=body,
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TIMEOUT_SECONDS * 3,
            check=False,
        )
    except FileNotFoundError:
        return Sent(False, "command not found")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Sent(False, f"command failed: {type(exc).__name__}")
    return Sent(done.returncode == 0, f"exit {done.returncode}")


def send(
    channel: Channel,
    doc: dict[str, Any],
    root: Path,
    *,
    secret_lookup: SecretLookup | None = None,
    client: httpx.Client | None = None,
) -> Sent:
    """Send ``doc`` once on ``channel`` (no retry here); what happened.

    Raises:
        NotifyFailed: ``notify_secret_unavailable``: the signing profile cannot be read (the
            credential store's code and message are kept in the message; nothing was sent).
    """
    lookup = secret_lookup or profile_keys()
    if not channel.is_webhook:
        return _command(channel, doc, root)
    try:
        return _webhook(channel, doc, root, lookup, client)
    except CredentialError as exc:
        raise NotifyFailed(
            f"channel {channel.name}: a credential profile it names cannot be read"
            f" ({exc.code}); nothing was sent",
            code="notify_secret_unavailable",
        ) from exc


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def deliver_due(
    outbox: Outbox,
    config: NotifyConfig,
    root: Path,
    audit: AuditLog,
    *,
    now: float | None = None,
    limit: int = 50,
    secret_lookup: SecretLookup | None = None,
    still_open: Callable[[OutboxEntry], bool] | None = None,
    client: httpx.Client | None = None,
) -> list[tuple[OutboxEntry, Sent]]:
    """Attempt every notification due now (at most ``limit``); each attempt and its end.

    ``still_open`` (when given) is asked before an escalation is sent: an entry about a
    request decided meanwhile is settled ``delivered`` with the note ``skipped``, unsent.
    """
    at = time.time() if now is None else now
    hold = attempt_seconds()
    done: list[tuple[OutboxEntry, Sent]] = []
    for entry in outbox.due(at, limit=limit):
        if entry.channel.startswith("@"):
            continue  # a timer of the engine's (a deadline), not a notification
        if not outbox.take(entry, at + hold):
            continue
        channel = config.channel(entry.channel)
        if entry.stage == "escalated" and still_open is not None and not still_open(entry):
            outbox.settle(entry.id, "delivered", due_at=at, note="skipped: decided")
            continue
        if channel is None:
            sent = Sent(False, "channel not declared in proctor.toml")
        else:
            try:
                sent = send(channel, entry.body, root, secret_lookup=secret_lookup, client=client)
            except NotifyFailed as exc:
                sent = Sent(False, exc.code)
        kill_point("notify.sent")
        fields: dict[str, Any] = {
            "notification_id": entry.id,
            "channel": entry.channel,
            "stage": entry.stage,
            "address": entry.address,
            "request_digest": entry.request_digest,
            "attempt": entry.attempts,
            "note": sent.note,
        }
        if sent.ok:
            outbox.settle(entry.id, "delivered", due_at=at, note=sent.note)
            audit.emit("notification_delivered", run_id=entry.run_id, step_index=None, **fields)
        elif entry.attempts >= MAX_ATTEMPTS:
            outbox.settle(entry.id, "failed", due_at=at, note=sent.note)
            audit.emit("notification_failed", run_id=entry.run_id, step_index=None, **fields)
        else:
            retry_at = at + backoff(entry.attempts)
            outbox.settle(entry.id, "pending", due_at=retry_at, note=sent.note)
            fields["retry_at"] = _iso(retry_at)
            audit.emit(
                "notification_attempt_failed", run_id=entry.run_id, step_index=None, **fields
            )
        done.append((entry, sent))
    return done

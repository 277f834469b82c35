"""The outbox entries a request needs when its run pauses on it: one notification per channel
that is told of its kind (at once, or ``after`` seconds for an escalation), and the timer of
its deadline.

Written every time the run pauses on the request, idempotently (the entry ids are digests of
what they are about, see :func:`proctor.runtime.records.outbox.notification_id`), so a crash
between recording the request and writing its entries is mended by the next pause, and the
first write fixes the times: a deadline does not move when the run pauses again.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from proctor.runtime.notify.config import NotifyConfig
from proctor.runtime.notify.message import notification
from proctor.runtime.records.outbox import OutboxEntry, notification_id

__all__ = ["DEADLINE_CHANNEL", "RequestFacts", "deadline_entry", "entries_for"]

DEADLINE_CHANNEL = "@deadline"
"""The pseudo-channel of a request's deadline timer (settled by the engine, never sent)."""


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


class RequestFacts:
    """What a notification says of a request (the run's names, the sanitized view's summary)."""

    def __init__(
        self,
        *,
        run_id: str,
        skill: str,
        method: str,
        address: str,
        kind: str,
        request_digest: str,
        summary: str,
        payload: Any = None,
        expires_at: float | None = None,
    ) -> None:
        self.run_id, self.skill, self.method = run_id, skill, method
        self.address, self.kind, self.request_digest = address, kind, request_digest
        self.summary, self.payload, self.expires_at = summary, payload, expires_at


def entries_for(
    config: NotifyConfig, facts: RequestFacts, *, opened_at: float | None = None
) -> list[OutboxEntry]:
    """One entry per channel told of ``facts.kind``, due at ``opened_at + after``."""
    at = time.time() if opened_at is None else opened_at
    out: list[OutboxEntry] = []
    for channel in config.channels:
        if facts.kind not in channel.kinds:
            continue
        if (
            facts.expires_at is not None
            and channel.after
            and at + channel.after >= facts.expires_at
        ):
            continue  # an escalation after the deadline would tell of a closed request
        entry_id = notification_id(
            facts.run_id, facts.address, facts.request_digest, channel.name, channel.stage
        )
        body = notification(
            entry_id=entry_id,
            channel=channel.name,
            stage=channel.stage,
            run_id=facts.run_id,
            skill=facts.skill,
            method=facts.method,
            address=facts.address,
            kind=facts.kind,
            request_digest=facts.request_digest,
            summary=facts.summary,
            console_url=config.console_url,
            opened_at=_iso(at),
            expires_at=_iso(facts.expires_at) if facts.expires_at is not None else None,
            payload=facts.payload if channel.payload else None,
        )
        out.append(
            OutboxEntry(
                id=entry_id,
                run_id=facts.run_id,
                address=facts.address,
                request_digest=facts.request_digest,
                channel=channel.name,
                stage=channel.stage,
                body=body,
                due_at=at + channel.after,
            )
        )
    return out


def deadline_entry(facts: RequestFacts, on_expiry: str) -> OutboxEntry:
    """The timer that decides ``facts``' request by ``on_expiry`` at ``facts.expires_at``."""
    assert facts.expires_at is not None
    entry_id = notification_id(
        facts.run_id, facts.address, facts.request_digest, DEADLINE_CHANNEL, "expiry"
    )
    return OutboxEntry(
        id=entry_id,
        run_id=facts.run_id,
        address=facts.address,
        request_digest=facts.request_digest,
        channel=DEADLINE_CHANNEL,
        stage="expiry",
        body={"on_expiry": on_expiry, "expires_at": _iso(facts.expires_at)},
        due_at=facts.expires_at,
    )

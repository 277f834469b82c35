"""``proctor notify``: the channels ``proctor.toml`` declares, a test message, the outbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from proctor.errors import UsageError

LIST_SCHEMA = "proctor.notify.list.v1"
TEST_SCHEMA = "proctor.notify.test.v1"
SEND_SCHEMA = "proctor.notify.send.v1"


def _session() -> Any:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    return Session(Workspace.discover(Path.cwd()))


@click.group("notify")
def notify() -> None:
    """Tell people when a run waits on them: chat webhooks, signed JSON, local commands.

    Channels are declared in proctor.toml as [notify.NAME]; see docs/approvals.md.

    Example: proctor notify list
    """


@notify.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.notify.list.v1 document.")
def list_channels(as_json: bool) -> None:
    """List the declared channels and the newest notifications in the outbox.

    Example: proctor notify list --json
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.engine.upkeep import notify_config
    from proctor.runtime.records.outbox import Outbox

    session = _session()
    try:
        config = notify_config(session.workspace.root)
        entries = Outbox(session.store).entries(limit=50)
    finally:
        session.close()
    shown = [
        {
            "id": e.id,
            "run_id": e.run_id,
            "address": e.address,
            "channel": e.channel,
            "stage": e.stage,
            "state": e.state,
            "attempts": e.attempts,
            "note": e.note,
        }
        for e in entries
    ]
    if as_json:
        channels = [c.describe() for c in config.channels]
        dump_json(
            {
                "schema": LIST_SCHEMA,
                "console_url": config.console_url,
                "channels": channels,
                "outbox": shown,
            }
        )
        return
    from proctor.cli.paint import inert

    if not config.channels:
        click.echo("no channels: declare one as [notify.NAME] in proctor.toml")
    for c in config.channels:
        d = c.describe()
        where = d["target"] or " ".join(d["command"] or [])
        after = f", after {c.after}s" if c.after else ""
        click.echo(inert(f"{c.name}  {d['type']} {d['format'] or ''} {where}{after}"))
    for e in shown:
        click.echo(
            inert(
                f"{e['id']}  {e['channel']}  {e['state']} ({e['attempts']} attempts)"
                f"  {e['run_id']} {e['address']}  {e['note'] or ''}"
            )
        )


@notify.command("test")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.notify.test.v1 document.")
def test_channel(name: str, as_json: bool) -> None:
    """Send one test notification on channel NAME, now, and say whether it arrived.

    Nothing is written to the outbox; the attempt is audited.

    Example: proctor notify test team
    """
    import time

    from proctor.cli.render import dump_json
    from proctor.errors import NotifyFailed
    from proctor.runtime.engine.upkeep import notify_config
    from proctor.runtime.notify.deliver import send
    from proctor.runtime.notify.message import notification

    session = _session()
    try:
        config = notify_config(session.workspace.root)
        channel = config.channel(name)
        if channel is None:
            raise UsageError(
                f"no channel {name!r}: declare it as [notify.{name}] in proctor.toml",
                code="notify_channel_unknown",
            )
        entry_id = f"ntf_test{int(time.time())}"
        doc = notification(
            entry_id=entry_id,
            channel=name,
            stage="opened",
            run_id="test",
            skill="proctor",
            method="notify-test",
            address="test",
            kind="approval",
            request_digest="sha256:" + "0" * 64,
            summary="a test notification from proctor notify test; nothing waits on it",
            console_url=config.console_url,
            opened_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        )
        sent = send(channel, doc, session.workspace.root)
        session.audit.emit(
            "notification_test",
            run_id=None,
            step_index=None,
            channel=name,
            delivered=sent.ok,
            note=sent.note,
        )
    finally:
        session.close()
    if as_json:
        dump_json({"schema": TEST_SCHEMA, "channel": name, "delivered": sent.ok, "note": sent.note})
    else:
        click.echo(f"{name}: {'delivered' if sent.ok else 'not delivered'} ({sent.note})")
    if not sent.ok:
        raise NotifyFailed(f"channel {name}: the test was not delivered ({sent.note})")


@notify.command("send")
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.notify.send.v1 document.")
def send_due(as_json: bool) -> None:
    """Send the notifications that are due now and settle passed deadlines.

    Every proctor command does this when it ends; run it from cron in a workspace with no
    worker and no console.

    Example: proctor notify send
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.records.outbox import Outbox

    session = _session()
    try:
        session.settle_due()
        entries = Outbox(session.store).entries(limit=1000)
    finally:
        session.close()
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.state] = counts.get(e.state, 0) + 1
    if as_json:
        dump_json({"schema": SEND_SCHEMA, "outbox": counts})
    else:
        click.echo(
            ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "the outbox is empty"
        )

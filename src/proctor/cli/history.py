"""``proctor history``: recent runs, or one run's record, events, calls and receipts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from proctor.errors import UsageError


def run_receipts(session: Any, root_id: str | None) -> list[dict[str, Any]]:
    """The receipts of a run's tree, parents before children: ``{receipt_id, kind, outcome}``."""
    from proctor.receipts.model import parse_envelope

    if root_id is None:
        return []
    out: list[dict[str, Any]] = []
    stack = [root_id]
    while stack:
        rid = stack.pop()
        data = session.receipts.get(rid)
        if data is None:
            out.append({"receipt_id": rid, "kind": None, "outcome": None, "missing": True})
            continue
        env = parse_envelope(data)
        body = env.body
        out.append(
            {
                "receipt_id": rid,
                "kind": body["kind"],
                "outcome": body["outcome"],
                "step_id": body["subject"].get("step_id"),
                "tool": body["subject"].get("tool"),
            }
        )
        stack.extend(child["receipt_id"] for child in reversed(body["children"]))
    return out


@click.command("history")
@click.argument("run_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--after",
    "after",
    type=click.IntRange(0, 2**63 - 1),
    default=None,
    metavar="CURSOR",
    help="List only runs older than this cursor (from a previous page's next_cursor); with"
    " RUN_ID, only that run's events after this one (its seq).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="Runs on one page (newest first).",
)
def history(run_id: str | None, as_json: bool, after: int | None, limit: int) -> None:
    """Show recent runs with outcome and receipt id, or one RUN_ID's full record.

    With RUN_ID, --after SEQ shows only the events that followed event SEQ (the record's
    events_cursor is the value to pass next time).

    \b
    Example:
      proctor history --limit 5
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    session = Session(Workspace.discover(Path.cwd()))
    try:
        if run_id is None:
            runs = session.store.list_runs(after=after, limit=limit + 1, data=False)
            more, runs = len(runs) > limit, runs[:limit]
            rows = [
                {
                    "run_id": r.run_id,
                    "cursor": r.cursor,
                    "skill": r.skill,
                    "identity": r.identity,
                    "method": r.method,
                    "status": r.status,
                    "outcome": r.outcome,
                    "receipt_id": r.receipt_id,
                    "created_at": r.created_at,
                }
                for r in runs
            ]
            next_cursor = runs[-1].cursor if more else None
            if as_json:
                dump_json(
                    {"schema": "proctor.history.v1", "runs": rows, "next_cursor": next_cursor}
                )
                return
            _print_runs(rows, next_cursor)
            return
        from proctor.runtime.engine.stored_envelope import envelope_doc

        record = session.store.get_run(run_id)
        if record is None:
            raise UsageError(f"no run with id {run_id!r} in this workspace", code="run_not_found")
        events = session.store.events(record.run_id, after=after or 0)
        doc: dict[str, Any] = {
            "schema": "proctor.history.run.v1",
            "run_id": record.run_id,
            "skill": record.skill,
            "identity": record.identity,
            "method": record.method,
            "status": record.status,
            "outcome": record.outcome,
            "receipt_id": record.receipt_id,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "envelope": envelope_doc(session.store, record),
            "events": events,
            "calls": [
                {
                    "call_id": c.call_id,
                    "step": c.step_id,
                    "tool": c.tool,
                    "state": c.state,
                    "outcome": c.outcome,
                    "args_digest": c.args_digest,
                }
                for c in session.store.calls(record.run_id)
            ],
            "receipts": run_receipts(session, record.receipt_id),
            "requests": _requests(session, record.run_id),
        }
        seqs = [int(e["seq"]) for e in events]
        doc["events_cursor"] = max(seqs) if seqs else after
        if as_json:
            dump_json(doc)
            return
        _print_run(doc)
    finally:
        session.close()


def _requests(session: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's requests as ``proctor pending --json`` lists them (any state)."""
    from proctor.runtime.engine.approvals import run_requests

    return [shown.to_json() for shown in run_requests(session, run_id)]


def _print_runs(rows: list[dict[str, Any]], next_cursor: int | None) -> None:
    from proctor.cli.paint import inert as t

    if not rows:
        click.echo("no runs yet in this workspace")
        return
    for r in rows:
        click.echo(
            t(
                f"{r['created_at'][:19]}  {r['run_id']}  {r['skill']}#{r['method']}  "
                f"{r['identity'] or '-'}  {r['outcome'] or r['status']}  {r['receipt_id'] or '-'}"
            )
        )
    if next_cursor is not None:
        click.echo(f"more: proctor history --after {next_cursor}")


def _print_run(doc: dict[str, Any]) -> None:
    """One run's record, every text from the run through the terminal's boundary; each
    decided request says who decided, approved or declined, the answers and the reason."""
    from proctor.cli.paint import inert as t

    click.echo(
        t(f"run {doc['run_id']}  {doc['skill']}#{doc['method']}  {doc['outcome'] or doc['status']}")
    )
    click.echo(t(f"package: {doc['identity'] or '- (recorded before package identities)'}"))
    click.echo(t(f"receipt: {doc['receipt_id'] or '-'}"))
    for call in doc["calls"]:
        click.echo(t(f"  {call['call_id']}  {call['tool']}  {call['outcome'] or call['state']}"))
    for req in doc["requests"]:
        if req["state"] == "open" and doc["status"] != "sealed":
            click.echo(
                t(f"  waiting {req['kind']} at {req['address']}: {req['summary']}")
                + f"  ({t(req['request_digest'])})"
            )
        elif req.get("decision"):
            words = req["decision"].get("words")
            click.echo(t(f"  {req['kind']} at {req['address']}: {words}"))
    if any(r["state"] == "open" for r in doc["requests"]) and doc["status"] != "sealed":
        run = t(doc["run_id"])
        click.echo(f"  decide: proctor approve {run}  |  proctor decline {run}")
    for rec in doc["receipts"]:
        click.echo(t(f"  receipt {rec['kind']}: {rec['receipt_id']} ({rec['outcome']})"))
    sys.stdout.flush()

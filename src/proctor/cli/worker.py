"""``proctor worker``: drive submitted runs from the shared PostgreSQL run store; ``list`` them.

Also the submission side of ``proctor run --submit`` and ``proctor resume --submit``: both
need ``PROCTOR_DATABASE_URL`` (the queue lives in that database) and print what they queued.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import click

from proctor.errors import UsageError

DEFAULT_SLOTS = 4
"""Runs a worker drives at once unless told. A worker's Python runs on one core at a time, and a
run spends about four fifths of its driver's time waiting (on PostgreSQL round trips and commit
flushes, on its command), so one slot leaves that core idle most of the time and about four keep
it busy; more add threads, connections and contention without more CPU to give."""

WORKER_LEASE_TTL = "15"
"""The lease a worker's drivers take (seconds), renewed every heartbeat: a dead worker's runs
are taken over this long after its last heartbeat at the latest."""


def _queue(session: Any) -> Any:
    """The work queue of ``session``'s run store; refused when the store is not PostgreSQL."""
    from proctor.runtime.fleet.queue import WorkQueue
    from proctor.runtime.records.postgres import PostgresRunStore

    store = session.store
    if not isinstance(store, PostgresRunStore):
        raise UsageError(
            "submitting work needs a shared run store: set PROCTOR_DATABASE_URL to a"
            " postgresql:// database that workers (proctor worker) drive from",
            code="submit_needs_database",
        )
    return WorkQueue(store)


def submit_start(session: Any, ref: str, body: dict[str, Any], as_json: bool) -> None:
    """Queue a start of ``ref`` under a new run id, and print it.

    Raises:
        SubmissionRefused: the body does not fit the contract a worker reads it by
            (:mod:`proctor.contracts.submission`), or names a folder outside the workspace
            (``submission_outside_workspace``); nothing is queued.
    """
    from proctor.contracts.submission import make_body
    from proctor.runtime.fleet.daemon import confined_cwd

    run_id = uuid.uuid4().hex
    cwd = os.path.relpath(Path.cwd(), session.workspace.root)
    if cwd.startswith(".."):
        cwd = "."
    start = {"ref": ref, "cwd": cwd, **body}
    make_body("start", start)  # the shape first: a path check of a malformed ref is moot
    confined_cwd(session.workspace.root, cwd, ref)
    sid = _queue(session).submit("start", run_id, start)
    _print_submitted(run_id, sid, as_json)


def submit_resume(session: Any, run_id: str, data: bytes, as_json: bool) -> None:
    """Queue a resume document for ``run_id`` once it parses and the run exists."""
    from proctor.contracts.resume import parse_resume_document

    parse_resume_document(data)  # a document that cannot parse is refused here, not queued
    if session.store.get_run(run_id) is None:
        raise UsageError(f"no run with id {run_id!r} in this workspace", code="run_not_found")
    from proctor.contracts import json_strict

    # read as it parsed (a byte-order mark allowed), to be queued as one object
    document = json_strict.loads(data, source="the resume document")
    sid = _queue(session).submit("resume", run_id, {"document": document})
    _print_submitted(run_id, sid, as_json)


def _print_submitted(run_id: str, sid: int, as_json: bool) -> None:
    if as_json:
        from proctor.cli.render import dump_json

        dump_json({"schema": "proctor.submitted.v1", "run_id": run_id, "submission": sid})
        return
    click.echo(f"submitted: run {run_id} (submission {sid}); a proctor worker will drive it")


@click.group("worker", invoke_without_command=True)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 16),
    default=DEFAULT_SLOTS,
    show_default=True,
    help="How many runs this worker drives at once (a few keep its core busy while runs wait).",
)
@click.pass_context
def worker(ctx: click.Context, concurrency: int) -> None:
    """Drive submitted runs from the shared run store (PROCTOR_DATABASE_URL) until SIGTERM.

    SIGTERM or SIGINT lets each run finish its current call; the runs then wait, and any
    worker continues them.

    \b
    Example:
      PROCTOR_DATABASE_URL=postgresql://... proctor worker --concurrency 2
    """
    if ctx.invoked_subcommand is not None:
        return
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.fleet.daemon import Worker

    os.environ.setdefault("PROCTOR_LEASE_TTL", WORKER_LEASE_TTL)
    daemon = Worker(
        Workspace.discover(Path.cwd()),
        os.environ,
        concurrency=concurrency,
        log=lambda line: click.echo(f"worker: {line}", err=True),
    )

    def stop(signum: int, frame: Any) -> None:
        daemon.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    click.echo(f"worker {daemon.id}: driving up to {concurrency} run(s)", err=True)
    forwarding = _forwarding()
    try:
        daemon.serve()
    finally:
        if forwarding is not None:
            forwarding()
    click.echo(f"worker {daemon.id}: stopped", err=True)
    sys.exit(0)


@worker.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_workers(as_json: bool) -> None:
    """Show live workers (heartbeat within 5 s) and the runs each holds.

    \b
    Example:
      proctor worker list --json
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    session = Session(Workspace.discover(Path.cwd()))
    try:
        queue = _queue(session)
        rows = queue.workers()
        counts = queue.counts()
    finally:
        session.close()
    if as_json:
        from proctor.cli.render import dump_json

        dump_json({"schema": "proctor.workers.v1", "workers": rows, "submissions": counts})
        return
    if not rows:
        click.echo("no live workers")
    for row in rows:
        holds = ", ".join(row["holds"]) or "-"
        click.echo(
            f"{row['worker_id']}  {row['state']}  x{row['concurrency']}"
            f"  heartbeat {row['heartbeat_age_seconds']:.1f}s ago  holds: {holds}"
        )
    click.echo("submissions: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "0"))


def _forwarding() -> Any:
    """The audit forwarder's stop function when PROCTOR_AUDIT_FORWARD_TO is set."""
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.audit import audit_path
    from proctor.runtime.records.forward import background_forwarder

    workspace = Workspace.discover(Path.cwd())
    return background_forwarder(
        audit_path(workspace.root, os.environ),
        workspace.state_dir,
        os.environ,
        report=lambda line: click.echo(f"worker: {line}", err=True),
    )

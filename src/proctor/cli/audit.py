"""``proctor audit``: verify and read the audit log."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from proctor.errors import ParseError, UsageError

VERIFY_SCHEMA = "proctor.audit_verify.v1"


def _log_path(path: str | None) -> Path:
    from proctor.runtime.records.audit import audit_path

    if path is not None:
        return Path(path)
    from proctor.runtime.boundary.workspace import Workspace

    return audit_path(Workspace.discover(Path.cwd()).root, os.environ)


def _shown(path: str | None, log: Path) -> str:
    """The log as a message names it: PATH as given (its last part alone is empty for '.'),
    the workspace's own log by its file name."""
    return path if path is not None else log.name


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


@click.group()
def audit() -> None:
    """Inspect and verify the audit log.

    \b
    Example:
      proctor audit verify
    """


@audit.command()
@click.argument("path", required=False)
@click.option(
    "--receipts-dir",
    "receipts_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Also check the log against the run receipts in this folder (an auditor's copy).",
)
@click.option(
    "--witnesses",
    "witnesses",
    is_flag=True,
    help="Also check the log and the receipts against the seals the witnesses hold.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.audit_verify.v1 report.")
def verify(path: str | None, receipts_dir: Path | None, witnesses: bool, as_json: bool) -> None:
    """Check the audit log's hash chain and its anchors; exit 1 naming the first bad line.

    Every sealed run's receipt, and the run store, commit the log's head (an anchor), so a
    cut tail, an emptied log or a history chained again without some lines is named by the
    anchor it breaks. PATH checks another log, against --receipts-dir only.

    Example: proctor audit verify --json
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.anchors import check_log, folder_anchors, workspace_log_check
    from proctor.runtime.records.audit import audit_path

    workspace = Workspace.discover(Path.cwd())
    own = audit_path(workspace.root, os.environ)
    log = Path(path) if path is not None else own
    seals = _witnessed(workspace.root) if witnesses else []
    try:
        if path is None or _same_file(log, own):
            check = workspace_log_check(
                log,
                workspace.state_dir,
                os.environ,
                receipts_dir=receipts_dir,
                extra=[seal.anchor for seal in seals],
            )
        else:
            anchors, notes = folder_anchors(receipts_dir) if receipts_dir else ([], [])
            check = check_log(log, anchors, notes)
    except OSError as exc:
        raise UsageError(
            f"cannot read {_shown(path, log)!r}: {exc.strerror or exc}", code="audit_unreadable"
        ) from exc
    if not check.exists and check.report.anchors == 0:
        raise UsageError(f"no audit log at {_shown(path, log)!r}", code="audit_log_missing")
    if seals:
        _check_witnessed_receipts(workspace.state_dir, seals, check)
    report = check.report
    if as_json:
        dump_json({"schema": VERIFY_SCHEMA, **check.to_dict()})
    else:
        if report.ok:
            click.echo(
                f"audit log ok: {report.lines} lines, chain intact, {report.anchors} anchors hold"
            )
            for kept in report.recorded_breaks:
                click.echo(
                    f"  recorded break at line {kept['line']}: lines"
                    f" {kept['last_good_line'] + 1} to {kept['line'] - 1} set aside,"
                    f" {kept['excused_anchors']} anchors excused"
                )
        else:
            from proctor.cli.paint import inert

            at = "" if report.first_bad_line is None else f" at line {report.first_bad_line}"
            click.echo(inert(f"audit log broken{at}: {report.reason}"))
            for broken in report.broken_anchors[1:6]:
                click.echo(inert(f"  also: {broken['message']}"))
        for note in check.notes[:5]:
            click.echo(f"  note: {note}")
    if not report.ok:
        raise SystemExit(1)


@audit.command()
@click.argument("path", required=False)
@click.option(
    "-n", "count", type=click.IntRange(0, 100_000), default=10, show_default=True,
    help="How many lines.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON document.")
def tail(path: str | None, count: int, as_json: bool) -> None:
    """Show the last N events of the audit log.

    \b
    Example:
      proctor audit tail -n 5 --json
    """
    from proctor.cli.render import dump_json
    from proctor.contracts import json_strict

    log = _log_path(path)
    if not log.is_file():
        raise UsageError(f"no audit log at {_shown(path, log)!r}")
    try:
        lines = _last_lines(log, count)
    except OSError as exc:
        raise UsageError(
            f"cannot read {_shown(path, log)!r}: {exc.strerror or exc}", code="audit_unreadable"
        ) from exc
    records = []
    for line in lines:
        # a tampered log may hold anything: the strict reader refuses nesting past its depth
        # (json.loads would recurse until the stack ran out), and a line must be an object
        try:
            record = json_strict.loads(line, source="audit line")
        except ParseError:
            record = None
        records.append(record if isinstance(record, dict) else {"event": "<unreadable line>"})
    if as_json:
        dump_json({"records": records}, schema="proctor.audit_tail.v1")
        return
    from proctor.cli.paint import inert

    for record in records:
        click.echo(
            inert(
                f"{record.get('timestamp', '?')}  {record.get('event', '?')}  "
                f"run={record.get('run_id')} seq={record.get('sequence')}"
            )
        )


_BLOCK = 64 * 1024


def _last_lines(log: Path, count: int) -> list[bytes]:
    """The last ``count`` lines of ``log``, read backwards from its end a block at a time:
    a log of any length costs what its last lines are, never the whole file in memory.

    Raises:
        OSError: the log cannot be opened or read.
    """
    if count <= 0:
        return []
    with open(log, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        at, data = end, b""
        # count + 1 line ends: the one closing the last line, and one before the first wanted
        while at > 0 and data.count(b"\n") <= count:
            step = min(_BLOCK, at)
            at -= step
            handle.seek(at)
            data = handle.read(step) + data
    return data.splitlines()[-count:] if at == 0 else data.splitlines()[1:][-count:]


@audit.command("accept-break")
@click.option("--note", default=None, help="Why the break is accepted (kept in the record).")
@click.option("--json", "as_json", is_flag=True, help="Print the record written as JSON.")
def accept_break(note: str | None, as_json: bool) -> None:
    """Record the audit log's break so runs may start again (audited).

    Runs refuse to start on a broken log (audit_broken). Restore the log from a backup if you
    can; otherwise this writes one audit_break_accepted line that starts a new chain segment
    from the last good line, freezes the lines it sets aside, and excuses the anchors broken
    now. `proctor audit verify` then passes across it, names it, and still catches any other
    damage.

    Example: proctor audit accept-break --note "disk restored from a snapshot"
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.anchors import receipt_anchors
    from proctor.runtime.records.audit import AuditLog, audit_path
    from proctor.runtime.records.audit_breaks import accept_break as record_break
    from proctor.runtime.records.audit_breaks import refuse_broken_log
    from proctor.runtime.records.receipts import receipt_dir

    workspace = Workspace.discover(Path.cwd())
    log = AuditLog(audit_path(workspace.root, os.environ))
    anchors, _notes = receipt_anchors(receipt_dir(workspace.state_dir, os.environ))
    newest = _store_anchor(workspace.state_dir)
    if newest is not None:
        from proctor.runtime.records.chain import Anchor

        anchors.append(
            Anchor(int(newest["lines"]), newest.get("last_digest"), "the run store's newest anchor")
        )
    try:
        record = record_break(log, anchors, note=note)
        refuse_broken_log(log.path, newest, log.path.name)  # and mark the log verified
    finally:
        log.close()
    if as_json:
        dump_json({"recorded": record}, schema="proctor.audit_break.v1")
        return
    if record is None:
        click.echo("the audit log verifies: there is no break to record")
        return
    click.echo(
        f"recorded the break: lines after {record['last_good_line']} are set aside"
        f" ({record['set_aside_lines']} lines), {len(record['excused_anchors'])} broken"
        " anchors excused; runs may start again"
    )


def _store_anchor(state_dir: Path) -> dict[str, Any] | None:
    """The run store's newest anchor (``None`` when there is no store: none is made)."""
    if os.environ.get("PROCTOR_DATABASE_URL"):
        from proctor.runtime.records.postgres import PostgresRunStore

        pg = PostgresRunStore(os.environ["PROCTOR_DATABASE_URL"])
        try:
            return pg.audit_anchor()
        finally:
            pg.close()
    from proctor.runtime.records.store_file import run_store_path

    path = run_store_path(state_dir, os.environ)
    if not path.is_file():
        return None
    from proctor.runtime.records.sqlite import SQLiteRunStore

    store = SQLiteRunStore(path)
    try:
        return store.audit_anchor()
    finally:
        store.close()


@audit.command("forward")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="URL",
    help="syslog+tcp://HOST:PORT (RFC 5424, octet counting) or http(s)://HOST/PATH (JSON Lines).",
)
@click.option("--once", is_flag=True, help="Ship every line not yet shipped, then exit.")
@click.option(
    "--batch-lines",
    type=click.IntRange(1, 100_000),
    default=500,
    show_default=True,
    help="At most this many lines a batch (the cursor moves once a batch is taken).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="With --once: print proctor.audit_forward.v1."
)
def forward(to: str, once: bool, batch_lines: int, as_json: bool) -> None:
    """Ship every audit line, in order, at least once, to syslog or an HTTP endpoint.

    A cursor in .proctor/forward/ records what was taken, so a restart goes on from there.
    Without --once it keeps shipping new lines until stopped (Ctrl-C or SIGTERM).

    \b
    Example:
      proctor audit forward --to syslog+tcp://127.0.0.1:6514 --once
    """
    import contextlib
    import signal
    import threading

    from proctor.cli.render import dump_json
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.audit import audit_path
    from proctor.runtime.records.forward import (
        Forwarder,
        HttpSender,
        Sender,
        SyslogSender,
        parse_destination,
    )

    destination = parse_destination(to)
    workspace = Workspace.discover(Path.cwd())
    sender: Sender = (
        SyslogSender(destination.host, destination.port)
        if destination.kind == "syslog"
        else HttpSender(destination.url)
    )
    forwarder = Forwarder(
        audit_path(workspace.root, os.environ),
        workspace.state_dir,
        destination,
        sender,
        batch_lines=batch_lines,
    )
    try:
        if once:
            shipped = forwarder.drain()
            lines = forwarder.cursor().lines
            if as_json:
                dump_json(
                    {"destination": destination.kind, "shipped": shipped, "lines": lines},
                    schema="proctor.audit_forward.v1",
                )
            else:
                click.echo(f"shipped {shipped} lines ({lines} in all) to {destination.kind}")
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        click.echo(f"forwarding the audit log to {destination.kind}; Ctrl-C stops", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            forwarder.follow(
                stop.is_set,
                wait=stop.wait,
                on_error=lambda exc: click.echo(f"error[{exc.code}]: {exc.message}", err=True),
            )
    finally:
        sender.close()


def _witnessed(root: Path) -> list[Any]:
    """The seals the configured witnesses hold of this workspace (countersignatures checked).

    Raises:
        UsageError: (``witness_not_configured``) no witness URL is configured.
    """
    from proctor.runtime.records.witness_check import witnessed_seals

    return witnessed_seals(root, os.environ)


def _check_witnessed_receipts(state_dir: Path, seals: list[Any], check: Any) -> None:
    """Every run receipt a witness holds is still in the receipt store."""
    from dataclasses import replace

    from proctor.runtime.records.receipts import ReceiptStore, receipt_dir

    store = ReceiptStore(receipt_dir(state_dir, os.environ))
    gone = [seal for seal in seals if store.get(seal.receipt_id) is None]
    for seal in gone[:5]:
        check.notes.append(f"receipt {seal.receipt_id} of run {seal.run_id} is gone ({seal.url})")
    if gone and check.report.ok:
        check.report = replace(
            check.report,
            ok=False,
            reason=f"{len(gone)} run receipts the witnesses hold are gone from the receipt store",
        )

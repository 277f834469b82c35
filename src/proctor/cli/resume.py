"""``proctor resume RUN_ID FILE|-``: answer a paused run and drive it on, or close it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from proctor.cli.driving import EXIT_HELP, drive_and_print
from proctor.errors import UsageError

DOCUMENT_CAP = 64 * 1024 * 1024


@click.command("resume", epilog=EXIT_HELP)
@click.argument("run_id")
@click.argument("source", metavar="FILE|-", default="-")
@click.option(
    "--submit",
    is_flag=True,
    help="Queue the document for a proctor worker (needs PROCTOR_DATABASE_URL).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.run.v1 envelope.")
def resume(run_id: str, source: str, as_json: bool, submit: bool = False) -> None:
    """Continue RUN_ID with a proctor.resume.v1 document from FILE or stdin.

    `{}` continues a run whose decisions are already recorded (or that was stopped);
    `{"close": {"outcome": "declined"}}` alone seals it. Works from any folder of the
    workspace.

    \b
    Example:
      proctor resume RUN_ID answers.json
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    try:
        if source == "-":
            data = sys.stdin.buffer.read(DOCUMENT_CAP + 1)
        else:
            data = Path(source).read_bytes()[: DOCUMENT_CAP + 1]
    except OSError as exc:
        raise UsageError(
            f"cannot read {Path(source).name}: {exc.strerror}", code="resume_unreadable"
        ) from exc
    if len(data) > DOCUMENT_CAP:
        raise UsageError("the resume document is over 64 MiB", code="resume_too_large")
    session = Session(Workspace.discover(Path.cwd()))
    if submit:
        from proctor.cli.worker import submit_resume

        try:
            return submit_resume(session, run_id, data, as_json)
        finally:
            session.close()
    drive_and_print(session, lambda: session.resume(run_id, data), as_json)

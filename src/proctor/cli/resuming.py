"""``proctor resume`` without click: its options, a plain command line read from them (see
:mod:`proctor.cli.plain_argv`), and the resume itself; ``--submit`` is left to click."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.cli.driving import drive_and_print, read_capped
from proctor.cli.plain_argv import Option, read_plain
from proctor.errors import UsageError

__all__ = ["RESUME_OPTIONS", "parse_resume_argv", "resume_command"]

DOCUMENT_CAP = 64 * 1024 * 1024

RESUME_OPTIONS: tuple[Option, ...] = (
    ("submit", ("--submit",), "flag", None,
     "Queue the document for a proctor worker (needs PROCTOR_DATABASE_URL)."),
    ("as_json", ("--json",), "flag", None, "Print the proctor.run.v1 envelope."),
    ("verbose", ("-v", "--verbose"), "flag", None,
     "Show every note, also those already shown once in this workspace."),
)  # fmt: skip


def parse_resume_argv(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of ``proctor resume ARGS`` as click would read them, or ``None``."""
    return read_plain(
        args, (("run_id", None), ("source", "-")), RESUME_OPTIONS, left_to_click={"submit"}
    )


def resume_command(
    run_id: str, source: str, as_json: bool, submit: bool = False, verbose: bool = False
) -> None:
    """``proctor resume``: admit the document, drive the run on, print it, exit with its code.

    Raises:
        UsageError: ``resume_unreadable`` (the file cannot be read), ``resume_too_large``.
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    if source == "-" and sys.stdin.isatty():  # say what is awaited rather than wait in silence
        print(
            "proctor resume: reading a proctor.resume.v1 document from this terminal (end it"
            f" with Ctrl-D), or give a file: proctor resume {run_id} FILE",
            file=sys.stderr,
        )
    try:
        data = read_capped(source, DOCUMENT_CAP)
    except OSError as exc:
        raise UsageError(
            f"cannot read {source!r}: {exc.strerror}", code="resume_unreadable"
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
    drive_and_print(session, lambda: session.resume(run_id, data), as_json, verbose=verbose)

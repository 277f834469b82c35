"""``proctor approve`` and ``proctor decline``: a person's decision in the terminal.

Both show every field the request digest covers (a unified diff for file changes, coloured
only on a terminal; argv and cwd for a command; method, URL, headers and body for HTTP; the
connector, origin, method, URL, headers, body, idempotency key and readback of a connector
operation; the prompt and choices of a question), through the terminal's rendering boundary
(:mod:`proctor.cli.paint`: control characters and escape sequences shown as escapes), ask,
write the ``proctor.resume.v1`` document bound to the request digest, and drive the run on.
``--yes`` (for scripts) is accepted only with ``--digest``: a script must name the exact request
it decides.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from proctor.cli.driving import EXIT_HELP
from proctor.errors import UsageError

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _digest_option(value: str | None) -> str | None:
    if value is not None and not DIGEST.match(value):
        raise UsageError("--digest is sha256: and 64 lowercase hex digits", code="digest_invalid")
    return value


_RICH = {"head": "bold", "file": "bold", "add": "green", "del": "red", "hunk": "cyan",
         "warn": "yellow"}  # fmt: skip


def render_request(out: Any, shown: Any) -> None:
    """Print everything a person needs to decide ``shown`` (an approvals ``Shown``: every
    field its digest covers) on the rich console ``out``; every value goes through the
    terminal's rendering boundary (:func:`proctor.cli.paint.markup`), so no escape sequence,
    bidirectional override or markup in it acts on the terminal."""
    from proctor.cli.paint import markup as m
    from proctor.core.resume import decision_words

    out.print(
        f"[bold]{m(shown.kind)}[/] at [bold]{m(shown.address)}[/] of run"
        f" {m(shown.run_id)} ({m(shown.skill)}#{m(shown.method)})"
    )
    out.print(f"request digest: {m(shown.request_digest)}")
    for style, line in shown.lines():
        rich = _RICH.get(style)
        out.print(f"[{rich}]{m(line)}[/]" if rich else m(line))
    words = decision_words(shown.decision)
    if words is not None:
        out.print(f"[yellow]{m(words)}[/]")


def _parse_answers(raw: tuple[str, ...], shown: Any) -> dict[str, Any]:
    """``--answer ID=VALUE`` pairs as question answers: a VALUE that is one of the options is
    the option, anything else free text."""
    from proctor.core.resume import option_labels

    questions = {q.get("id"): q for q in shown.view.get("questions") or []}
    out: dict[str, Any] = {}
    for item in raw:
        qid, sep, value = item.partition("=")
        if not sep or qid not in questions:
            raise UsageError(f"--answer {qid!r}: not one of this request's questions",
                             code="answer_invalid")  # fmt: skip
        options = option_labels(questions[qid])
        out[qid] = {"option": value} if value in options else {"text": value}
    return out


def _ask_answers(shown: Any) -> dict[str, Any]:
    """Ask each question on the terminal: a choice by number or name, or free text."""
    from proctor.core.resume import option_labels

    out: dict[str, Any] = {}
    for q in shown.view.get("questions") or []:
        options = option_labels(q)
        while True:
            raw = click.prompt(f"{q.get('id')}", default="", show_default=False).strip()
            if not raw and not q.get("required", True):
                break
            if raw.isdigit() and 1 <= int(raw) <= len(options):
                out[str(q["id"])] = {"option": options[int(raw) - 1]}
                break
            if raw in options:
                out[str(q["id"])] = {"option": raw}
                break
            if raw and q.get("free_text"):
                out[str(q["id"])] = {"text": raw}
                break
            click.echo("  choose one of the numbered options", err=True)
    return out


def _need_terminal(shown: Any, approve: bool) -> None:
    """Refuse to ask y/N where no one can answer (no terminal on standard input): the prompt
    would end as if Ctrl-C were pressed.

    Raises:
        UsageError: ``terminal_required``, naming the ``--yes --digest`` command that decides
            this exact request without asking.
    """
    if sys.stdin.isatty():
        return
    verb = "approve" if approve else "decline"
    answer = ""
    if shown.kind == "question" and approve:
        answer = "".join(
            f" --answer {q.get('id')}=VALUE" for q in shown.view.get("questions") or []
        )
    raise UsageError(
        f"no terminal to ask y/N on; to {verb} exactly the request shown above without asking:"
        f" proctor {verb} {shown.run_id} {shlex.quote(shown.address)} --yes"
        f" --digest {shown.request_digest}{answer}",
        code="terminal_required",
    )


def _decide(
    run_id: str,
    address: str | None,
    *,
    approve: bool,
    yes: bool,
    digest: str | None,
    reason: str | None,
    answers: tuple[str, ...],
    as_json: bool,
) -> None:
    from rich.console import Console

    from proctor.cli.driving import drive_and_print
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.approvals import decide, os_author, shown_request
    from proctor.runtime.engine.session import Session

    if yes and digest is None:
        raise UsageError(
            "--yes decides without showing the request: give --digest sha256:... of the exact"
            " request too (from proctor pending --json)",
            code="digest_required",
        )
    session = Session(Workspace.discover(Path.cwd()))
    try:
        shown = shown_request(session, run_id, address)
        if digest is not None and digest != shown.request_digest:
            raise UsageError(
                f"--digest is not the digest of the request at {shown.address!r}; nothing was"
                " recorded",
                code="digest_mismatch",
            )
        out = Console(
            highlight=False, emoji=False, soft_wrap=True, file=sys.stderr if as_json else None
        )
        render_request(out, shown)
        from proctor.cli.paint import note

        note()  # before the question: the person knows what they read was escaped
        if not yes:
            _need_terminal(shown, approve)
        filled: dict[str, Any] | None = None
        if shown.kind == "question" and approve:
            filled = _parse_answers(answers, shown) if answers else None
            if filled is None:
                if yes:
                    raise UsageError("--yes on questions needs --answer ID=VALUE",
                                     code="answer_invalid")  # fmt: skip
                filled = _ask_answers(shown)
        if not yes:
            verb = "Approve" if approve else "Decline"
            if shown.kind == "question":
                verb = "Send these answers" if approve else "Decline and close the run"
            if not click.confirm(f"{verb}?", default=False, err=True):
                click.echo("nothing was recorded", err=True)
                sys.exit(1)
    except BaseException:
        session.close()
        raise
    author = os_author()
    drive_and_print(
        session,
        lambda: decide(
            session,
            run_id,
            shown.address,
            request_digest=shown.request_digest,
            approve=approve,
            decided_by=author,
            reason=reason,
            answers=filled,
        ),
        as_json,
    )


_OPTIONS = [
    click.argument("run_id"),
    click.argument("address", required=False),
    click.option("--yes", is_flag=True, help="Do not ask (scripts); needs --digest."),
    click.option("--digest", callback=lambda _c, _p, v: _digest_option(v),
                 metavar="sha256:HEX", help="The request digest this decision is bound to."),
    click.option("--reason", default=None, help="Why (recorded with the decision)."),
    click.option("--json", "as_json", is_flag=True, help="Print the proctor.run.v1 envelope."),
]  # fmt: skip


def _with_options(func: Any) -> Any:
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


@click.command("approve", epilog=EXIT_HELP)
@_with_options
@click.option("--answer", "answers", multiple=True, metavar="ID=VALUE",
              help="Answer a question (repeatable): an option's name or free text.")  # fmt: skip
def approve(
    run_id: str,
    address: str | None,
    yes: bool,
    digest: str | None,
    reason: str | None,
    as_json: bool,
    answers: tuple[str, ...],
) -> None:
    """Show what RUN_ID waits on at ADDRESS, ask y/N, record the approval and drive on.

    ADDRESS may be left out when the run waits on one request. Who approved (the OS user)
    is recorded in the run store, the audit log and the receipt.

    Example: proctor approve 3f2a... edit
    """
    _decide(run_id, address, approve=True, yes=yes, digest=digest, reason=reason,
            answers=answers, as_json=as_json)  # fmt: skip


@click.command("decline", epilog=EXIT_HELP)
@_with_options
def decline(
    run_id: str,
    address: str | None,
    yes: bool,
    digest: str | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Show what RUN_ID waits on at ADDRESS, ask y/N, record the decline and drive on.

    A declined approval seals the run `declined`; declined questions close it `declined`.

    Example: proctor decline 3f2a... edit --reason "wrong file"
    """
    _decide(run_id, address, approve=False, yes=yes, digest=digest, reason=reason,
            answers=(), as_json=as_json)  # fmt: skip

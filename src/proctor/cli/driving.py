"""What every command that drives a run shares: the host's authority, signals, the envelope
printed for people or as JSON, and the exit code it maps to (``run``, ``resume``, ``ask`` and
directive runs).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from proctor.errors import UsageError

EXIT_PAUSED = 10
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
EXIT_CODES = {
    "completed": 0,
    "failed": 1,
    "blocked": 1,
    "declined": 1,
    "superseded": 1,
    "killed": 1,
}
EXIT_HELP = (
    "Exit codes: 0 completed; 1 failed, blocked, declined or superseded; 2 usage, parse or"
    " resume-document error; 3 configuration error; 10 paused (needs_approval or"
    " needs_agent: answer with proctor resume; needs_credential: set the credential up and"
    " run again); 130 stopped by SIGINT; 143 stopped by SIGTERM."
)


def exit_code_of(doc: dict[str, Any]) -> int:
    """The exit status of an envelope: sealed by outcome, paused 10."""
    if doc.get("status") != "sealed":
        return EXIT_PAUSED
    return EXIT_CODES.get(str(doc.get("outcome")), 1)


def read_capped(source: str, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of FILE, or of stdin for ``-``: a byte past ``cap`` tells the
    caller the document is too large, and a pipe or a device that never ends is read no
    further.

    Raises:
        OSError: the file cannot be opened or read (the caller names it).
    """
    if source == "-":
        return sys.stdin.buffer.read(cap + 1)
    with open(source, "rb") as handle:
        return handle.read(cap + 1)


def read_authority_json(data: bytes | str, *, source: str = "--run-authority") -> Any:
    """An authority document (``--run-authority JSON``, or ``source`` naming another) read by
    the strict boundary reader (a repeated key or nesting past 64 levels is refused, never
    half-read or a crash of the parser).

    Raises:
        UsageError: ``authority_invalid`` naming why the text is not one strict JSON value.
    """
    from proctor.contracts import json_strict
    from proctor.errors import ParseError

    try:
        return json_strict.loads(data, source=source)
    except ParseError as exc:
        raise UsageError(exc.message, code="authority_invalid") from None


def host_authority(run_authority: str | None, preset: str | None, *, managed: bool = False) -> Any:
    """The authority a host states with ``--run-authority JSON`` or ``--authority NAME``;
    ``None`` when it states none (the session's default applies). Under ``managed`` (a model
    drives the run) what ``--run-authority`` leaves unstated is ``effects: ask``.

    Raises:
        UsageError: both given, invalid JSON, or a preset that does not apply here.
    """
    if run_authority is not None and preset is not None:
        raise UsageError("give --run-authority or --authority, not both", code="authority_invalid")
    if run_authority is not None:
        from proctor.core.authority import default_authority, parse_authority

        return parse_authority(
            read_authority_json(run_authority), base=default_authority(managed=managed)
        )
    if preset is not None:
        from proctor.runtime.boundary.workspace import Workspace
        from proctor.runtime.home.presets import preset_authority

        return preset_authority(preset, Workspace.discover(Path.cwd()).root)
    return None


def drive_with_signals(session: Any, work: Any) -> Any:
    """Run ``work()`` with SIGTERM/SIGINT handled: the first asks the driver to stop before its
    next step (SIGINT also kills running commands and exits 130 within 2 s); a second signal
    exits at once. Exits 143 (SIGTERM) or 130 (SIGINT) when a signal stopped the run."""
    import os
    import signal
    import threading

    from proctor.runtime.engine.host import RunInterrupted

    got: list[int] = []

    def handler(signum: int, _frame: Any) -> None:
        code = EXIT_SIGINT if signum == signal.SIGINT else EXIT_SIGTERM
        if got:
            os._exit(code)
        got.append(signum)
        session.request_stop()
        if signum == signal.SIGINT:
            from proctor.runtime.tools.command import stop_running

            stop_running()
            timer = threading.Timer(2.0, os._exit, args=(EXIT_SIGINT,))
            timer.daemon = True
            timer.start()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        result = work()
    except RunInterrupted as exc:
        print(f"stopped: {exc.message}", file=sys.stderr, flush=True)
        sys.exit(EXIT_SIGINT if got and got[0] == signal.SIGINT else EXIT_SIGTERM)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    if got:
        sys.exit(EXIT_SIGINT if got[0] == signal.SIGINT else EXIT_SIGTERM)
    return result


def drive_and_print(session: Any, work: Any, as_json: bool, *, verbose: bool = False) -> None:
    """Drive ``work`` under signal handling (with live progress on a terminal, see
    :mod:`proctor.cli.progress`), close the session, print the envelope (JSON or a summary)
    and exit with its code. Shared by ``run``, ``resume`` and directive runs.

    The summary shows the note that no host set an authority once per workspace (remembered
    in ``.proctor/notes/``), or every time with ``verbose``; JSON always carries it."""
    from proctor.cli.progress import progress
    from proctor.cli.render import dump_json

    try:
        with progress(session, enabled=not as_json):
            envelope = drive_with_signals(session, work)
    finally:
        session.close()
    doc = envelope.to_json()
    if as_json:
        dump_json(doc)
    else:
        render_envelope(doc, hidden=_notes_shown_before(session, doc, verbose))
    sys.exit(exit_code_of(doc))


def _notes_shown_before(session: Any, doc: dict[str, Any], verbose: bool) -> frozenset[str]:
    """The notes of ``doc`` a person in this workspace has seen (the authority note, after its
    first showing), marking the note seen; none with ``verbose``, or when the mark cannot be
    kept (the note is then shown again rather than lost)."""
    from proctor.runtime.engine.sealing import DEFAULT_AUTHORITY_NOTE

    notes = [n for n in doc.get("notes") or [] if n.startswith(DEFAULT_AUTHORITY_NOTE)]
    if verbose or not notes:
        return frozenset()
    from proctor.errors import ProctorError

    try:
        mark = session.workspace.private_dir("notes") / "default-authority"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        os.close(os.open(mark, flags, 0o600))
    except FileExistsError:
        return frozenset(notes)
    except (OSError, ProctorError):
        return frozenset()
    doc["notes"] = [
        f"{n} (shown once in this workspace; --verbose shows it every time)" if n in notes else n
        for n in doc["notes"]
    ]
    return frozenset()


def render_envelope(doc: dict[str, Any], *, hidden: frozenset[str] = frozenset()) -> None:
    """A readable summary of a ``proctor.run.v1`` envelope, refusals explained; the notes in
    ``hidden`` are left out."""
    from proctor.cli.paint import Out
    from proctor.cli.paint import inert as t

    out = Out()
    outcome = str(doc.get("outcome") or doc.get("status"))
    mark = out.style(outcome, "green" if outcome == "completed" else "red")
    what = f"{doc.get('skill')}#{doc.get('method')}  run {doc.get('run_id')}"
    out.print(f"{mark}  {t(what)}")
    for entry in doc.get("trace") or []:
        line = f"  step {t(entry['step'])}: {t(entry['tool'])} {t(entry['outcome'])}"
        if entry.get("code"):
            line += f" [{t(entry['code'])}]"
        out.print(line)
        for warning in entry.get("warnings") or []:
            out.print("    ", out.style("warning", "yellow"), " ", t(warning))
    refusal = doc.get("refusal")
    if refusal:
        where = f" at step {refusal['step']}" if refusal.get("step") else ""
        rule = f" (rule {refusal['rule_id']})" if refusal.get("rule_id") else ""
        out.print(
            out.style(f"refused{where}", "red"),
            t(f": {refusal['message']} [{refusal['code']}]{rule}"),
        )
    if doc.get("result") is not None:
        out.print("result: " + t(json.dumps(doc["result"], ensure_ascii=False)))
    for note in doc.get("notes") or []:
        if note not in hidden:
            out.print(out.style(f"note: {note}", "dim"))
    for request in doc.get("requests") or []:
        if request.get("kind") == "credential":
            continue  # needs_credential: its setup commands are in the notes above
        out.print(
            out.style("waiting", "yellow"),
            t(f" {request.get('kind')} at {request.get('address')}"),
            f"  {t(str(request.get('request_digest')))}",
        )
        if request.get("kind") == "wait":
            from proctor.runtime.engine.request_lines import summary_of

            out.print("    " + t(summary_of("wait", request)))
            continue
        if request.get("kind") not in ("approval", "retry"):
            for key in ("reason", "tool", "question"):
                if request.get(key):
                    out.print(f"    {key}: {t(str(request[key]))}")
            for question in request.get("questions") or []:
                _print_question(out, question)
            continue
        from proctor.runtime.engine.request_lines import request_lines

        for _style, line in request_lines(str(request.get("kind")), request):
            out.print("    " + t(line))
    if doc.get("status") == "needs_approval":
        out.print(f"decide in this terminal: proctor approve {t(str(doc.get('run_id')))}")
    _agent_turn_hint(out, doc)
    if doc.get("answers_template"):
        out.print("answers template (fill it in, then pipe it to the command below):")
        out.print(t(json.dumps(doc["answers_template"], indent=2)))
    if doc.get("resume_command"):
        out.print(f"resume: {t(str(doc['resume_command']))}")
    if doc.get("receipt_id"):
        out.print(f"receipt: {t(str(doc['receipt_id']))}")
    from proctor.cli.paint import note

    note()


def _agent_turn_hint(out: Any, doc: dict[str, Any]) -> None:
    """How to go on from agent turns no model worked: each turn's output schema, then the three
    ways on (a model with ``--drive``, an MCP client with ``proctor mcp --run``, or the output
    by hand with ``proctor resume RUN_ID FILE|-``)."""
    from proctor.cli.paint import inert as t

    turns = [r for r in doc.get("requests") or [] if r.get("kind") == "agent_turn"]
    if not turns:
        return
    run_id = t(str(doc.get("run_id")))
    for turn in turns:
        schema = json.dumps(turn.get("output_schema") or {}, ensure_ascii=False)
        out.print(f"agent turn {t(str(turn.get('address')))} outputs: {t(schema)}")
    ref = t(f"{doc.get('skill')}#{doc.get('method')}")
    first = t(str(turns[0].get("address")))
    out.print("no model worked this agent turn; go on in one of three ways:")
    out.print(
        f"  a model: proctor run {ref} --drive with the same inputs (set one first:"
        " proctor config set agent.provider ..., agent.model ...; see proctor config show)"
    )
    out.print(
        f"  an MCP client (an agent host): proctor mcp --run {run_id}; it works the turn with"
        " turn_status, turn_call and turn_complete"
    )
    out.print(
        f"  by hand: put an output that fits the schema above in answers.{first}.value of"
        f" the template below, save it as answers.json, then: proctor resume {run_id}"
        " answers.json"
    )


def _print_question(out: Any, question: Any) -> None:
    """One question of a paused ask step: its id, prompt and what it takes."""
    from proctor.cli.paint import inert as t

    if not isinstance(question, dict):
        return
    optional = "" if question.get("required", True) else " (optional)"
    out.print(f"    question {t(str(question.get('id')))}{optional}: ", end="")
    out.print(t(str(question.get("prompt") or "")))
    choices = question.get("options") or question.get("choices") or []
    if choices:
        out.print("      choices: " + ", ".join(t(str(c)) for c in choices))
    if question.get("free_text") or not choices:
        out.print("      free text: answer with {text: ...}")

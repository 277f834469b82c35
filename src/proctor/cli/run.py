"""``proctor run``: run a skill method under governance and print its envelope."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from proctor.errors import UsageError

INPUTS_CAP = 64 * 1024 * 1024

EXIT_CODES = {"completed": 0, "failed": 1, "blocked": 1, "declined": 1, "superseded": 1}


def read_inputs_document(source: str) -> dict[str, Any]:
    """Read ``--inputs FILE|-``: one JSON object, at most 64 MiB, never echoed when refused.

    Raises:
        UsageError: the file cannot be read; ParseError: it is not one JSON object.
    """
    from proctor.parser.inputs import parse_inputs_document

    try:
        if source == "-":
            data = sys.stdin.buffer.read(INPUTS_CAP + 1)
        else:
            with open(source, "rb") as handle:
                data = handle.read(INPUTS_CAP + 1)
    except OSError as exc:
        raise UsageError(
            f"--inputs: cannot read {Path(source).name}: {exc.strerror}", code="inputs_unreadable"
        ) from exc
    return parse_inputs_document(data, source="--inputs" if source == "-" else Path(source).name)


@click.command("run")
@click.argument("ref")
@click.option("-i", "--input", "pairs", multiple=True, metavar="NAME=VALUE",
              help="An input, typed by the method's schema (repeatable).")
@click.option("--inputs", "inputs_file", metavar="FILE|-",
              help="All inputs as one JSON object from a file or stdin (64 MiB cap).")
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.run.v1 envelope.")
def run(ref: str, pairs: tuple[str, ...], inputs_file: str | None, as_json: bool) -> None:
    """Run REF (PATH[#METHOD] or a skills/ catalog name) under governance.

    Exit codes: 0 completed; 1 failed or blocked; 2 usage or parse error; 3 configuration
    error.
    """
    from proctor.cli.render import dump_json
    from proctor.runtime.driver import Session
    from proctor.runtime.workspace import Workspace

    inputs = read_inputs_document(inputs_file) if inputs_file is not None else None
    session = Session(Workspace.discover(Path.cwd()))
    try:
        envelope = session.run(ref, inputs=inputs, cli_inputs=list(pairs))
    finally:
        session.close()
    doc = envelope.to_json()
    if as_json:
        dump_json(doc)
    else:
        render_envelope(doc)
    sys.exit(EXIT_CODES.get(str(doc.get("outcome")), 1))


def render_envelope(doc: dict[str, Any]) -> None:
    """A readable summary of a ``proctor.run.v1`` envelope, refusals explained."""
    from rich.console import Console
    from rich.markup import escape

    out = Console(highlight=False, soft_wrap=True)
    outcome = str(doc.get("outcome") or doc.get("status"))
    mark = {"completed": "[green]completed[/]"}.get(outcome, f"[red]{outcome}[/]")
    out.print(f"{mark}  {escape(str(doc.get('skill')))}#{escape(str(doc.get('method')))}"
              f"  run {doc.get('run_id')}")
    for entry in doc.get("trace") or []:
        status = entry["outcome"]
        line = f"  step {escape(entry['step'])}: {escape(entry['tool'])} {status}"
        if entry.get("code"):
            line += " " + escape(f"[{entry['code']}]")
        out.print(line)
        for warning in entry.get("warnings") or []:
            out.print(f"    [yellow]warning[/] {escape(warning)}")
    refusal = doc.get("refusal")
    if refusal:
        where = f" at step {refusal['step']}" if refusal.get("step") else ""
        rule = f" (rule {refusal['rule_id']})" if refusal.get("rule_id") else ""
        out.print(f"[red]refused{escape(where)}[/]: {escape(refusal['message'])} "
                  + escape(f"[{refusal['code']}]{rule}"))
    if doc.get("result") is not None:
        out.print("result: " + escape(json.dumps(doc["result"], ensure_ascii=False)))
    for note in doc.get("notes") or []:
        out.print(f"[dim]note: {escape(note)}[/]")
    if doc.get("receipt_id"):
        out.print(f"receipt: {doc['receipt_id']}")

"""``proctor run``: run a skill method under governance and print its envelope."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from proctor.cli.driving import EXIT_HELP, drive_and_print, host_authority
from proctor.errors import UsageError

INPUTS_CAP = 64 * 1024 * 1024


def with_spend_limit(authority: Any, max_spend: str, *, managed: bool) -> Any:
    """The host's authority with ``--max-spend USD`` as its ``max_spend_micro_usd`` (the
    narrower of the two when the authority states one too).

    Raises:
        UsageError: ``max_spend_invalid`` (not an amount in dollars).
    """
    from dataclasses import replace

    from proctor.core.authority import default_authority
    from proctor.core.spend import parse_usd

    limit = parse_usd(max_spend)
    base = authority if authority is not None else default_authority(managed=managed)
    stated = base.max_spend_micro_usd
    narrowest = limit if stated is None else min(limit, stated)
    return replace(base, max_spend_micro_usd=narrowest, set_by="host")


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


@click.command("run", epilog=EXIT_HELP)
@click.argument("ref")
@click.option(
    "-i",
    "--input",
    "pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="An input, typed by the method's schema (repeatable).",
)
@click.option(
    "--inputs",
    "inputs_file",
    metavar="FILE|-",
    help="All inputs as one JSON object from a file or stdin (64 MiB cap).",
)
@click.option(
    "--run-authority",
    "run_authority",
    metavar="JSON",
    help='What the host grants, e.g. \'{"effects": "ask", "reach": "workspace"}\'.',
)
@click.option(
    "--authority",
    "preset",
    metavar="NAME",
    help="A saved authority preset (proctor authority save); only where it applies.",
)
@click.option(
    "--profile",
    "profile",
    metavar="NAME",
    help="The credential profile to use first (proctor credential list).",
)
@click.option(
    "--directive",
    "directive",
    metavar="ID",
    help='Run directive ID; REF is then the request: run --directive ID "request".',
)
@click.option(
    "--max-spend",
    "max_spend",
    metavar="USD",
    help="What the run and its children may spend on priced calls, in US dollars (e.g. 0.50).",
)
@click.option("--drive", is_flag=True, help="Drive agent turns with the configured model.")
@click.option(
    "--submit",
    is_flag=True,
    help="Queue the run for a proctor worker (needs PROCTOR_DATABASE_URL); print its id.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the proctor.run.v1 envelope.")
def run(
    ref: str,
    pairs: tuple[str, ...],
    inputs_file: str | None,
    run_authority: str | None,
    preset: str | None,
    profile: str | None,
    directive: str | None,
    max_spend: str | None,
    drive: bool,
    as_json: bool,
    submit: bool = False,
) -> None:
    """Run REF (PATH[#METHOD] or a skills/ catalog name) under governance.

    A run that waits on a person or an agent prints its requests, an answers template bound
    to their digests and the exact `proctor resume` command, and exits 10.

    \b
    Example:
      proctor run examples/hello-world -i message="hello, proctor"
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    if directive is not None:
        from proctor.cli.directives import run_directive_command

        return run_directive_command(
            directive,
            ref,
            drive=drive,
            as_json=as_json,
            max_steps=None,
            run_authority=run_authority,
        )
    from proctor.parser.inputs import check_cli_pairs

    check_cli_pairs(pairs, with_document=inputs_file is not None)
    inputs = read_inputs_document(inputs_file) if inputs_file is not None else None
    authority = host_authority(run_authority, preset, managed=drive)
    if max_spend is not None:
        authority = with_spend_limit(authority, max_spend, managed=drive)
    session = Session(Workspace.discover(Path.cwd()))
    if submit:
        return _submit(session, ref, inputs, pairs, run_authority, preset, profile, drive, as_json)
    if drive:
        from proctor.runtime.agents.loop import ManagedAgent
        from proctor.runtime.agents.sessions import AgentSession

        session = AgentSession(session.workspace, agent_driver=ManagedAgent.from_home())
    drive_and_print(
        session,
        lambda: session.run(
            ref, inputs=inputs, cli_inputs=list(pairs), authority=authority, profile=profile
        ),
        as_json,
    )


def _submit(
    session: Any,
    ref: str,
    inputs: dict[str, Any] | None,
    pairs: tuple[str, ...],
    run_authority: str | None,
    preset: str | None,
    profile: str | None,
    drive: bool,
    as_json: bool,
) -> None:
    """``--submit``: queue the start (checked as far as it can be here) for a worker.

    Raises:
        UsageError: with ``--authority`` or ``--drive`` (a worker has neither the preset's
            home nor the model), or without ``PROCTOR_DATABASE_URL``.
    """
    import json

    from proctor.cli.worker import submit_start

    if preset is not None or drive:
        raise UsageError(
            "--submit takes --run-authority JSON, not --authority or --drive",
            code="submit_invalid",
        )
    body = {
        "inputs": inputs,
        "cli_inputs": list(pairs),
        "authority": None if run_authority is None else json.loads(run_authority),
        "profile": profile,
    }
    try:
        submit_start(session, ref, body, as_json)
    finally:
        session.close()

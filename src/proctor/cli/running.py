"""``proctor run`` without click: its options declared once, a plain command line read from
them, and the run itself.

:mod:`proctor.cli.run` builds the click command from :data:`RUN_OPTIONS`. The entry point
(:func:`proctor.cli.main.main`) reads a plain ``proctor run`` command line here with
:func:`parse_run_argv` (see :mod:`proctor.cli.plain_argv`) and calls :func:`run_command`
without importing click, which cost more of a run's start-up than anything of the run but its
key; ``--directive`` and ``--submit`` are always left to click.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proctor.cli.driving import (
    drive_and_print,
    host_authority,
    read_authority_json,
    read_capped,
)
from proctor.cli.plain_argv import Option, read_plain
from proctor.errors import UsageError

#: run's options, in the order help lists them (see :data:`proctor.cli.plain_argv.Option`)
RUN_OPTIONS: tuple[Option, ...] = (
    ("pairs", ("-i", "--input"), "multiple", "NAME=VALUE",
     "An input, typed by the method's schema (repeatable)."),
    ("inputs_file", ("--inputs",), "value", "FILE|-",
     "All inputs as one JSON object from a file or stdin (64 MiB cap)."),
    ("run_authority", ("--run-authority",), "value", "JSON",
     'What the host grants, e.g. \'{"effects": "ask", "reach": "workspace"}\'.'),
    ("act", ("--act",), "value", "JSON",
     "The act the host states for the run (one JSON value), read by its steps as $run.act."),
    ("preset", ("--authority",), "value", "NAME",
     "A saved authority preset (proctor authority save); only where it applies."),
    ("profile", ("--profile",), "value", "NAME",
     "The credential profile to use first (proctor credential list)."),
    ("directive", ("--directive",), "value", "ID",
     'Run directive ID; REF is then the request: run --directive ID "request".'),
    ("max_spend", ("--max-spend",), "value", "USD",
     "What the run and its children may spend on priced calls, in US dollars (e.g. 0.50)."),
    ("drive", ("--drive",), "flag", None, "Drive agent turns with the configured model."),
    ("submit", ("--submit",), "flag", None,
     "Queue the run for a proctor worker (needs PROCTOR_DATABASE_URL); print its id."),
    ("as_json", ("--json",), "flag", None, "Print the proctor.run.v1 envelope."),
    ("verbose", ("-v", "--verbose"), "flag", None,
     "Show every note, also those already shown once in this workspace."),
)  # fmt: skip


def parse_run_argv(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of ``proctor run ARGS`` as click would read them, or ``None`` where this
    reader leaves the command line to click (see the module docstring)."""
    return read_plain(args, (("ref", None),), RUN_OPTIONS, left_to_click={"directive", "submit"})


INPUTS_CAP = 64 * 1024 * 1024


def with_spend_limit(authority: Any, max_spend: str, *, managed: bool) -> Any:
    """The host's authority with ``--max-spend USD`` as its ``max_spend_micro_usd`` (the
    narrower of the two when the authority states one too).

    Raises:
        UsageError: ``max_spend_invalid`` (not an amount in dollars).
    """
    from proctor.contracts.values import replace
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
        data = read_capped(source, INPUTS_CAP)
    except OSError as exc:
        # named as given: a name alone would be empty for '.' and misleading for /dev/zero
        raise UsageError(
            f"--inputs: cannot read {source!r}: {exc.strerror}", code="inputs_unreadable"
        ) from exc
    return parse_inputs_document(data, source="--inputs" if source == "-" else source)


def read_act(text: str) -> Any:
    """``--act JSON``: one JSON value (at most 64 KiB), never echoed when refused.

    Raises:
        UsageError: ``act_invalid``.
    """
    from proctor.contracts.json_strict import loads
    from proctor.errors import ProctorError
    from proctor.runtime.engine.session import check_act

    try:
        value = loads(text, source="--act")
    except ProctorError as exc:
        raise UsageError(f"--act is not one JSON value ({exc.code})", code="act_invalid") from None
    check_act(value)
    return value


def run_command(
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
    verbose: bool = False,
    act: str | None = None,
) -> None:
    """``proctor run``: run ``ref`` under governance, print its envelope, exit with its code."""
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
    stated = None if act is None else read_act(act)
    if max_spend is not None:
        authority = with_spend_limit(authority, max_spend, managed=drive)
    session = Session(Workspace.discover(Path.cwd()))
    if submit and stated is not None:  # a worker would start it without the act
        raise UsageError("--submit does not take --act", code="submit_invalid")
    if submit:
        return _submit(session, ref, inputs, pairs, run_authority, preset, profile, drive, as_json)
    if drive:
        from proctor.runtime.agents.loop import ManagedAgent
        from proctor.runtime.agents.sessions import AgentSession

        session = AgentSession(session.workspace, agent_driver=ManagedAgent.from_home())
    drive_and_print(
        session,
        lambda: session.run(
            ref,
            inputs=inputs,
            cli_inputs=list(pairs),
            authority=authority,
            profile=profile,
            act=stated,
        ),
        as_json,
        verbose=verbose,
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
    from proctor.cli.worker import submit_start

    if preset is not None or drive:
        raise UsageError(
            "--submit takes --run-authority JSON, not --authority or --drive",
            code="submit_invalid",
        )
    body = {
        "inputs": inputs,
        "cli_inputs": list(pairs),
        "authority": None if run_authority is None else read_authority_json(run_authority),
        "profile": profile,
    }
    try:
        submit_start(session, ref, body, as_json)
    finally:
        session.close()

"""``proctor ask "request"``: route a request to a directive with one model call, then run it.

The router sees the allowed directives' ids, categories and descriptions, and nothing else;
its decision is recorded in the audit log before anything runs. Only a ``single`` decision
runs a directive (managed by the same configured model); ``multiple`` and ``none`` print the
choices and exit 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from proctor.cli.paint import inert
from proctor.cli.render import dump_json


@click.command("ask")
@click.argument("request")
@click.option(
    "--allow",
    "allowed",
    multiple=True,
    metavar="ID",
    help="A directive the router may pick (repeatable; default: all).",
)
@click.option("--route-only", is_flag=True, help="Print the routing decision; run nothing.")
@click.option("--max-steps", type=click.IntRange(1, 200), help="Model requests per turn.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def ask(
    request: str, allowed: tuple[str, ...], route_only: bool, max_steps: int | None, as_json: bool
) -> None:
    """Route REQUEST to a directive with the configured model and run it.

    Needs a complete managed-agent configuration (proctor config show); a router that fails
    or answers no decision is an error.

    \b
    Example:
      proctor ask "summarise notes.txt" --route-only
    """
    from proctor.cli.driving import drive_with_signals, exit_code_of, render_envelope
    from proctor.runtime.agents.loop import DEFAULT_MAX_STEPS, ManagedAgent
    from proctor.runtime.agents.sessions import DirectiveSession
    from proctor.runtime.boundary.workspace import Workspace

    agent = ManagedAgent.from_home(view="reference", max_steps=max_steps or DEFAULT_MAX_STEPS)
    session = DirectiveSession(Workspace.discover(Path.cwd()), agent_driver=agent)
    try:
        route = session.route(request, agent, list(allowed) or None)
        envelope = None
        if route.decision == "single" and not route_only:
            assert route.directive_id is not None
            chosen = route.directive_id
            envelope = drive_with_signals(session, lambda: session.run_directive(chosen, request))
    finally:
        session.close()
        agent.close()
    doc = envelope.to_json() if envelope is not None else None
    if as_json:
        dump_json({"route": route.to_dict(), "run": doc}, schema="proctor.ask.v1")
    else:
        if route.decision == "single":
            click.echo(inert(f"routed to {route.directive_id}: {route.reason}"))
        elif route.decision == "multiple":
            click.echo(
                inert(f"several directives fit: {', '.join(route.candidates)} ({route.reason})")
            )
            click.echo('run one with: proctor run --directive ID "request"')
        else:
            click.echo(inert(f"no directive fits: {route.reason}"))
        if doc is not None:
            render_envelope(doc)
    if doc is not None:
        sys.exit(exit_code_of(doc))
    sys.exit(0 if route.decision == "single" else 1)

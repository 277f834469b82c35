"""``proctor replay RUN_ID``: re-run a recorded run offline against its package as it is now.

Exit status: 0 the replay did what the run did, call for call, and ended the same; 5 it
diverged (the first divergence is printed); 2 usage; other codes as any refusal.
``--json`` prints ``proctor.replay.v1``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

EXIT_DIVERGED = 5


@click.command("replay")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.replay.v1 document.")
def replay(run_id: str, as_json: bool) -> None:
    """Re-run a sealed run of this workspace offline and show its first divergence.

    The run must have retained its calls ([replay] retain = true in proctor.toml when it
    ran). Its HTTP exchanges, upstream MCP answers, model answers and the decisions people
    made stand in for the world; nothing reaches the network. The package is the one in this
    workspace now, so an edit shows as the first call that differs.

    \b
    Example:
      proctor replay 3f2a9c0e5b7d41e8a6c2b9d0f1e3a5c7
    """
    from proctor.testing.replay import describe, replay_run

    outcome = replay_run(Path.cwd(), run_id)
    if as_json:
        from proctor.cli.render import dump_json

        dump_json(outcome.to_json())
    else:
        from rich.console import Console

        from proctor.cli.paint import markup as escape

        out = Console(highlight=False, emoji=False, soft_wrap=True)
        for note in outcome.notes:
            out.print(f"[dim]note: {escape(note)}[/]")
        if outcome.divergence is None:
            out.print(f"[green]same[/] the replay of {escape(run_id)} did what the run did")
        else:
            out.print(f"[red]diverged[/] the replay of {escape(run_id)} differs:")
            for line in describe(outcome.divergence):
                out.print("  " + escape(line))
    if outcome.diverged:
        sys.exit(EXIT_DIVERGED)

"""``proctor process list|read|stop``: the long-lived processes runs started in this workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from proctor.cli.render import dump_json


def _processes() -> Path:
    from proctor.runtime.boundary.workspace import Workspace

    return Workspace.discover(Path.cwd()).state_dir / "processes"


def _folder(process_id: str) -> Path:
    from proctor.runtime.tools.procs_log import folder_of

    return folder_of(_processes(), process_id, run_id=None)


@click.group("process")
def process() -> None:
    """List, read and stop the processes runs started (process.start).

    \b
    Example:
      proctor process list --json
    """


@process.command("list")
@click.option("--run", "run_id", default=None, help="Only the processes of this run.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def list_processes(run_id: str | None, as_json: bool) -> None:
    """List every process of this workspace, running or ended.

    Example: proctor process list --json
    """
    from proctor.runtime.tools.procs_log import list_processes as found

    rows = found(_processes(), run_id=run_id)
    if as_json:
        dump_json({"schema": "proctor.process_list.v1", "processes": rows})
        return
    if not rows:
        click.echo("no processes")
    from proctor.cli.paint import inert

    for row in rows:
        state = "running" if row["running"] else f"{row['state']} ({row['exit_code']})"
        argv = inert(" ".join(str(a) for a in row["argv"]))[:80]
        click.echo(inert(f"{row['process_id']}  {state:<14}  run {row['run_id']}  ") + argv)


@process.command("read")
@click.argument("process_id")
@click.option("--after", type=click.IntRange(min=0), default=0, help="Start at this cursor.")
@click.option(
    "--max-bytes", type=click.IntRange(1, 4 * 1024 * 1024), default=256 * 1024,
    help="Read at most this many bytes.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
@click.option(
    "--raw", is_flag=True,
    help="Print the output as the process wrote it: control and escape sequences reach"
    " the terminal (says so on stderr).",
)  # fmt: skip
def read_process(process_id: str, after: int, max_bytes: int, as_json: bool, raw: bool) -> None:
    """Print a process's output after a cursor (secrets scrubbed).

    Control characters and escape sequences are shown as escapes (\\x1b); --raw prints
    them as they are.

    Example: proctor process read proc_0123456789abcdef --after 0
    """
    from proctor.cli.paint import RAW_NOTE, inert
    from proctor.runtime.boundary.sanitize import scrub_text
    from proctor.runtime.tools.procs_log import read_output

    out: dict[str, Any] = read_output(_folder(process_id), after=after, max_bytes=max_bytes)
    for entry in out["entries"]:
        entry["text"] = scrub_text(entry["text"])
    if as_json:
        dump_json(out)
        return
    if raw:
        click.echo(RAW_NOTE, err=True)
    for entry in out["entries"]:
        prefix = "" if entry["stream"] != "stderr" else "[stderr] "
        for line in entry["text"].split("\n"):
            click.echo(prefix + (line if raw else inert(line)))
    state = "running" if out["running"] else f"ended ({out['exit_code']})"
    click.echo(f"-- next cursor {out['next_cursor']}, {state}", err=True)


@process.command("stop")
@click.argument("process_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document for programs.")
def stop_process(process_id: str, as_json: bool) -> None:
    """Stop a process: terminate its whole tree, then kill what is left.

    Example: proctor process stop proc_0123456789abcdef
    """
    from proctor.runtime.tools.procs_log import stop

    out = stop(_folder(process_id))
    if as_json:
        dump_json(out)
        return
    click.echo(f"{process_id} stopped (exit {out['exit_code']})")

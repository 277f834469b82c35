"""``proctor witness serve``: the append-only, countersigning witness service."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

__all__ = ["witness"]


@click.group("witness")
def witness() -> None:
    """Keep countersigned copies of other workspaces' seals (audit heads, receipt roots).

    \b
    Example:
      proctor witness serve --dir /var/lib/proctor-witness --port 8750
    """


@witness.command("serve")
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="The witness's folder: its key and its append-only entries.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8750, show_default=True)
def serve(folder: Path, host: str, port: int) -> None:
    """Serve the witness; prints its URL and public key (give both to the workspaces).

    \b
    Example:
      proctor witness serve --dir ./witness --port 8750
    """
    from proctor.runtime.records.witness_server import serve_witness

    def ready(url: str, key: Any) -> None:
        click.echo(f"witness listening on {url}", err=True)
        click.echo(f"{url} {key.raw.hex()}")  # for PROCTOR_WITNESS_URLS / PROCTOR_WITNESS_KEYS

    with contextlib.suppress(KeyboardInterrupt):
        serve_witness(folder, host, port, ready)

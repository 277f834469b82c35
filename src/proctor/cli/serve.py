"""``proctor serve``: the web console for this workspace (see docs/console.md)."""

from __future__ import annotations

import os
from pathlib import Path

import click


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port (0: a free one, printed at start).")  # fmt: skip
@click.option("--public-url", default=None, metavar="https://HOST[:PORT]",
              help="The https origin people open; needed to listen beyond loopback.")  # fmt: skip
@click.option("--tls-cert", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--tls-key", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--session-minutes", type=click.IntRange(1, 7 * 24 * 60), default=480,
              show_default=True, help="How long a sign-in lasts.")  # fmt: skip
def serve(
    host: str,
    port: int,
    public_url: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    session_minutes: int,
) -> None:
    """Serve the approval console: pending requests with their exact payload, approve or
    decline bound to the request digest, and run history with verified receipts.

    People sign in with a token from `proctor console user add NAME`. Listens on loopback
    only, unless --public-url https://... and --tls-cert/--tls-key are given.

    Example: proctor serve --port 8765
    """
    from proctor.cli.extras import require_extra

    require_extra("console", "proctor serve")
    from proctor.console.app import ConsoleConfig, build_app
    from proctor.console.serve import bind_socket, check_binding, run_server
    from proctor.console.sessions import SessionBook
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.home.files import home_dir

    binding = check_binding(host, port, public_url=public_url, tls_cert=tls_cert, tls_key=tls_key)
    workspace = Workspace.discover(Path.cwd())
    home, _ = home_dir()
    config = ConsoleConfig(
        root=workspace.root,
        home=home,
        environ=dict(os.environ),
        allowed_hosts=binding.allowed_hosts,
        secure_cookies=binding.tls is not None,
        sessions=SessionBook(seconds=session_minutes * 60.0),
    )
    sock = bind_socket(binding.host, binding.port)
    bound = sock.getsockname()[1]
    scheme = "https" if binding.tls else "http"
    shown = binding.public_url or f"{scheme}://{binding.host}:{bound}"

    def started() -> None:
        click.echo(f"console: {shown}/pending  (Ctrl-C stops)", err=True)

    from proctor.runtime.records.audit import audit_path
    from proctor.runtime.records.forward import background_forwarder

    forwarding = background_forwarder(
        audit_path(workspace.root, os.environ),
        workspace.state_dir,
        os.environ,
        report=lambda line: click.echo(f"console: {line}", err=True),
    )
    try:
        run_server(build_app(config), sock, binding, started=started)
    finally:
        if forwarding is not None:
            forwarding()

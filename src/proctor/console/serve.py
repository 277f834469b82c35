"""Where the console listens: loopback only, unless a public https URL and TLS are given.

A console on any other address would let anyone who reaches it try tokens and read what runs
wait on, so :func:`check_binding` refuses it unless the operator names the public URL people
use (``https://...``, whose host becomes the only Host header accepted) and a TLS certificate
and key, so tokens and session cookies never cross a network in clear text.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from proctor.contracts.values import dataclass
from proctor.errors import UsageError
from proctor.runtime.listen import listen_tcp

__all__ = ["Binding", "bind_socket", "check_binding", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Binding:
    """A checked binding: where to listen, which Host headers to accept, whether https."""

    host: str
    port: int
    allowed_hosts: list[str]
    tls: tuple[Path, Path] | None
    public_url: str | None


def check_binding(
    host: str,
    port: int,
    *,
    public_url: str | None = None,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
) -> Binding:
    """Check where the console would listen.

    Raises:
        UsageError: ``console_public_refused`` (a non-loopback host without ``--public-url``
            https and ``--tls-cert``/``--tls-key``); ``public_url_invalid``;
            ``tls_incomplete`` (a certificate without its key or the reverse).
    """
    if (tls_cert is None) != (tls_key is None):
        raise UsageError("--tls-cert and --tls-key come together", code="tls_incomplete")
    tls = (tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    allowed = ["127.0.0.1", "localhost", "::1"]
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/"):
            raise UsageError(
                "--public-url is the https origin people open (https://host[:port])",
                code="public_url_invalid",
            )
        if tls is None:
            raise UsageError(
                "--public-url needs --tls-cert and --tls-key: tokens and cookies must not cross"
                " a network in clear text",
                code="console_public_refused",
            )
        allowed = [parts.hostname]
    elif not is_loopback(host):
        raise UsageError(
            f"the console listens on loopback only; to serve {host!r} give --public-url"
            " https://... with --tls-cert and --tls-key",
            code="console_public_refused",
        )
    return Binding(host, port, allowed, tls, public_url.rstrip("/") if public_url else None)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one).

    Raises:
        UsageError: ``console_bind_failed`` (the address is taken or not this machine's).
    """
    try:
        sock = listen_tcp(host, port)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}", code="console_bind_failed"
        ) from exc
    sock.set_inheritable(True)
    return sock


def run_server(
    app: object,
    sock: socket.socket,
    binding: Binding,
    *,
    started: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` on ``sock`` with uvicorn until stopped (SIGINT/SIGTERM)."""
    import uvicorn

    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        log_level="warning",
        ssl_certfile=str(binding.tls[0]) if binding.tls else None,
        ssl_keyfile=str(binding.tls[1]) if binding.tls else None,
        server_header=False,
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    if started is not None:
        started()
    server.run(sockets=[sock])

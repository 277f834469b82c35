"""Listening TCP sockets for proctor's own servers (the console, MCP over HTTP).

A socket made as ``socket(family, SOCK_STREAM)`` carries protocol number 0, and asyncio sets
``TCP_NODELAY`` only on accepted sockets whose protocol is ``IPPROTO_TCP``: every small reply
of such a server then waits in Nagle's algorithm for the client's delayed ACK (~40 ms a
response on Linux). :func:`listen_tcp` names the protocol and sets the option on the listening
socket too (Linux copies it to every accepted one), so replies leave when they are written.
"""

from __future__ import annotations

import socket

__all__ = ["listen_tcp"]


def listen_tcp(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one), replies unbuffered.

    ``host`` may be an IPv6 address, bracketed or not.

    Raises:
        OSError: the address cannot be bound (taken, or not this machine's); callers turn it
            into their own refusal.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock

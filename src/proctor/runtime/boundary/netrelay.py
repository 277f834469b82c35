"""The crossings of a sandbox's network boundary: where they are and how bytes move over them.

Split from :mod:`proctor.runtime.boundary.egress_proxy` along one seam: this module moves bytes
and decides nothing (which folder, which unix sockets in it, the relay's command line, the
host's side of a published port, copying both ways); the proxy decides, per connection,
whether a destination may be dialled.

A sandboxed process has a network namespace of its own. Its only crossings are unix sockets in
one private host folder, bound into the sandbox at :data:`SANDBOX_FOLDER`, served inside by the
relay program (:mod:`proctor.runtime.boundary.egress_forwarder`):

- ``proxy.sock``: the egress proxy (a run with an egress grant);
- ``in-PORT.sock``: a port the process publishes (``process.start``'s ``ports``): the host's
  side, :class:`PublishedPorts`, listens on the host's ``127.0.0.1:PORT`` and hands each
  connection to the relay, which connects to ``127.0.0.1:PORT`` inside the sandbox.
  Refused: a port outside 1024-65535, or one already in use on the host.

The folder is writable from inside (the relay makes its sockets there), so the host never
follows a name in it: a program could put a link there pointing at a host socket (a D-Bus or
agent socket) for the host's side to connect to. The host's side opens the socket's name
without following links (``O_PATH | O_NOFOLLOW``), checks that it is a socket, and connects
through that descriptor.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from proctor.contracts.values import dataclass
from proctor.errors import RefusedCall

__all__ = [
    "SANDBOX_FOLDER",
    "SOCKET_NAME",
    "PublishedPorts",
    "Relay",
    "check_ports",
    "make_folder",
    "pipe_both",
]

SANDBOX_FOLDER = "/tmp/.proctor-egress"
"""Where the crossings' folder appears inside the sandbox (on its fresh, private ``/tmp``)."""
SOCKET_NAME = "proxy.sock"
"""The egress proxy's socket in the folder."""

_FORWARDER = Path(__file__).with_name("egress_forwarder.py")
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Relay:
    """The crossings of one sandbox: the host folder, whether the egress proxy listens in it,
    and the ports published from inside."""

    folder: Path
    egress: bool = False
    publish: tuple[int, ...] = ()

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run under the relay (the interpreter proctor runs on, which the sandbox
        shows): the relay sets up the crossings, then becomes the command."""
        options = ["--egress"] if self.egress else []
        for port in self.publish:
            options += ["--publish", str(port)]
        return [sys.executable, "-I", "-S", str(_FORWARDER), SANDBOX_FOLDER, *options,
                "--", *argv]  # fmt: skip


def make_folder() -> Path:
    """A new private (0700) folder for a sandbox's crossings, in the host's temporary folder
    (a unix socket's path is short; a workspace's may not be)."""
    return Path(tempfile.mkdtemp(prefix="proctor-egress-"))


def check_ports(ports: Sequence[int]) -> tuple[int, ...]:
    """The ports to publish, each once.

    Raises:
        RefusedCall: ``port_invalid``: a port outside 1024-65535.
    """
    for port in ports:
        if not 1024 <= port <= 65535:
            raise RefusedCall(
                f"port {port} cannot be published: choose one from 1024 to 65535",
                code="port_invalid",
                details={"port": port},
            )
    return tuple(sorted(set(ports)))


class PublishedPorts:
    """The host's side of a sandbox's published ports (see the module docstring).

    :meth:`start` binds every port before anything else happens, so a port in use is refused
    before the process starts; :meth:`stop` closes the listeners and every open connection.
    """

    def __init__(self, folder: Path, ports: Sequence[int]) -> None:
        self.folder = folder
        self.ports = tuple(ports)
        self._listeners: list[tuple[socket.socket, int]] = []
        self._wake = os.pipe()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._stopped = False
        self._folder_fd = -1

    def start(self) -> PublishedPorts:
        """Listen on each port of the host's loopback.

        Raises:
            RefusedCall: ``port_in_use`` (nothing is left listening).
        """
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        self._folder_fd = os.open(self.folder, flags)
        for port in self.ports:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                listener.bind(("127.0.0.1", port))
                listener.listen(64)
            except OSError as exc:
                listener.close()
                self.stop()
                raise RefusedCall(
                    f"port {port} cannot be published: it is in use on this host",
                    code="port_in_use",
                    details={"port": port},
                ) from exc
            self._listeners.append((listener, port))
        thread = threading.Thread(target=self._accept, name="published-ports", daemon=True)
        self._threads.add(thread)
        thread.start()
        return self

    def stop(self) -> None:
        """Close every listener and connection; wait for the threads. Safe to repeat."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            live = list(self._open)
            threads = list(self._threads)
        os.write(self._wake[1], b"x")
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join()
        for listener, _port in self._listeners:
            listener.close()
        for fd in self._wake:
            os.close(fd)
        if self._folder_fd >= 0:
            os.close(self._folder_fd)

    def _accept(self) -> None:
        by_fd = {listener.fileno(): (listener, port) for listener, port in self._listeners}
        while True:
            ready, _, _ = select.select([*by_fd, self._wake[0]], [], [])
            if self._wake[0] in ready:
                return
            for fd in ready:
                listener, port = by_fd[fd]
                try:
                    client, _ = listener.accept()
                except OSError:
                    continue
                with self._lock:
                    if self._stopped:
                        client.close()
                        return
                    self._open.add(client)
                    thread = threading.Thread(target=self._one, args=(client, port), daemon=True)
                    self._threads.add(thread)
                thread.start()

    def _one(self, client: socket.socket, port: int) -> None:
        inside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self._lock:
                if self._stopped:
                    return
                self._open.add(inside)
            connect_no_follow(inside, self._folder_fd, f"in-{port}.sock")
            pipe_both(client, inside)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(client)
                self._open.discard(inside)
                self._threads.discard(threading.current_thread())
            client.close()
            inside.close()


def connect_no_follow(sock: socket.socket, folder_fd: int, name: str) -> None:
    """Connect ``sock`` to the unix socket ``name`` in the folder ``folder_fd`` (a descriptor
    of it), never through a link.

    Raises:
        OSError: the name is missing, a link, or not a socket (``ELOOP``, ``ENOTSOCK``).
    """
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise OSError(88, "not a socket")  # ENOTSOCK
        # the descriptor names the very inode checked: no name is looked up again
        sock.connect(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def pipe_both(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides have closed (a half-close is passed on)."""
    open_ends = {a: b, b: a}
    while open_ends:
        ready, _, _ = select.select(list(open_ends), [], [])
        for sock in ready:
            try:
                data = sock.recv(_CHUNK)
            except OSError:
                data = b""
            other = open_ends[sock]
            if data:
                try:
                    other.sendall(data)
                except OSError:
                    return
                continue
            del open_ends[sock]
            with contextlib.suppress(OSError):
                other.shutdown(socket.SHUT_WR)

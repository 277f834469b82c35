"""The relay inside a sandbox with egress (started by :func:`proctor.runtime.boundary.sandbox.bwrap_argv`).

Standard library only, run as ``python -I -S egress_forwarder.py <socket> -- <argv...>`` as the
sandbox's program. The sandbox has a network namespace of its own, with nothing but its own
loopback; the one way out is the egress proxy's unix socket, bound into the sandbox. This
program listens on ``127.0.0.1`` (a port the kernel picks), points ``HTTP_PROXY``,
``HTTPS_PROXY`` and ``ALL_PROXY`` (and their lower-case spellings) at it, leaves a detached
relay behind that hands every connection to the proxy's socket unchanged, and becomes the
command (``exec``), so the command's pid, exit status and signals are its own. The relay holds
no open descriptor of the command's and dies with the sandbox's PID namespace when the
command ends.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading

_CHUNK = 64 * 1024
_PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
_SOCKS_NAMES = ("ALL_PROXY", "all_proxy")


def _pipe(a: socket.socket, b: socket.socket) -> None:
    open_ends = {a: b, b: a}
    try:
        while open_ends:
            ready, _, _ = select.select(list(open_ends), [], [])
            for sock in ready:
                try:
                    data = sock.recv(_CHUNK)
                except OSError:
                    data = b""
                other = open_ends[sock]
                if data:
                    other.sendall(data)
                    continue
                del open_ends[sock]
                try:
                    other.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def _one(client: socket.socket, path: str) -> None:
    proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proxy.connect(path)
    except OSError:
        proxy.close()
        client.close()
        return
    _pipe(client, proxy)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_one, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: egress_forwarder.py SOCKET -- ARGV...\n")
        return 2
    path, command = argv[0], argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    for name in _PROXY_NAMES:
        os.environ[name] = f"http://127.0.0.1:{port}"
    for name in _SOCKS_NAMES:
        os.environ[name] = f"socks5h://127.0.0.1:{port}"
    # a double fork: the relay is the child of the sandbox's init, never of the command, so a
    # command that waits for all its children never waits for it
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            try:
                _serve(listener, path)
            finally:
                os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        # the same words bubblewrap writes, so the tool reports a program it could not start
        sys.stderr.write(f"bwrap: execvp {command[0]}: {exc.strerror}\n")
        return 1
    return 1  # not reached: execvp either replaces this program or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The relay inside a sandbox (started by :func:`proctor.runtime.boundary.sandbox.bwrap_argv`).

Standard library only, run as the sandbox's program:
``python -I -S egress_forwarder.py <folder> [--egress] [--publish PORT]... -- <argv...>``.
The sandbox has a network namespace of its own, with nothing but its own loopback; the folder
(bound from the host) holds the only ways across:

- ``--egress``: the egress proxy listens on ``<folder>/proxy.sock``. This program listens on
  ``127.0.0.1`` (a port the kernel picks), points ``HTTP_PROXY``, ``HTTPS_PROXY`` and
  ``ALL_PROXY`` (and their lower-case spellings) at it, and hands every connection to the
  proxy's socket unchanged; ``NODE_OPTIONS`` gains ``--require node_egress.cjs``, which makes
  Node's ``fetch`` and ``http``/``https`` clients (deaf to those variables) tunnel through it;
- ``--publish PORT``: it listens on ``<folder>/in-PORT.sock`` and hands every connection
  (from the host's side of a published port) to ``127.0.0.1:PORT`` inside the sandbox.

It leaves the relay behind, detached, and becomes the command (``exec``), so the command's
pid, exit status and signals are its own. The relay holds no open descriptor of the command's
and dies with the sandbox's PID namespace when the command ends.
"""

from __future__ import annotations

# Only built-in modules: this program starts before every sandboxed command with a grant, and
# ``socket``, ``threading`` and ``typing`` would triple its start-up (their imports, not
# Python's own start, are most of it).
import _socket
import _thread
import os
import select
import sys

_CHUNK = 64 * 1024
_PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
_SOCKS_NAMES = ("ALL_PROXY", "all_proxy")
_NODE_PRELOAD = "node_egress.cjs"
_Address = tuple[str, int] | str


def _pipe(a: _socket.socket, b: _socket.socket) -> None:
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
                try:  # noqa: SIM105 - contextlib would be one more import to start
                    other.shutdown(_socket.SHUT_WR)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def _one(client: _socket.socket, family: int, address: _Address) -> None:
    other = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        other.connect(address)
    except OSError:
        other.close()
        client.close()
        return
    _pipe(client, other)


def _serve(listener: _socket.socket, family: int, address: _Address) -> None:
    while True:
        # the built-in socket's accept (``socket.socket.accept`` wraps it)
        fd, _ = listener._accept()  # type: ignore[attr-defined]
        client = _socket.socket(fileno=fd)
        _thread.start_new_thread(_one, (client, family, address))


def _listeners(
    folder: str, egress: bool, publish: list[int]
) -> list[tuple[_socket.socket, int, _Address]]:
    found: list[tuple[_socket.socket, int, _Address]] = []
    if egress:
        listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        for name in _PROXY_NAMES:
            os.environ[name] = f"http://127.0.0.1:{port}"
        for name in _SOCKS_NAMES:
            os.environ[name] = f"socks5h://127.0.0.1:{port}"
        # Node's fetch and http clients ignore the variables above (before Node 24): this
        # preload makes them tunnel through the proxy, so a Node program with a grant reaches
        # what the grant allows (and, as any program, nothing else)
        preload = os.path.join(os.path.dirname(os.path.abspath(__file__)), _NODE_PRELOAD)
        if os.path.isfile(preload) and '"' not in preload:
            given = os.environ.get("NODE_OPTIONS", "")
            os.environ["NODE_OPTIONS"] = f'--require "{preload}" {given}'.strip()
        found.append((listener, _socket.AF_UNIX, os.path.join(folder, "proxy.sock")))
    for port in publish:
        listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        listener.bind(os.path.join(folder, f"in-{port}.sock"))
        listener.listen(128)
        found.append((listener, _socket.AF_INET, ("127.0.0.1", port)))
    return found


def main(argv: list[str]) -> int:
    try:
        end = argv.index("--")
    except ValueError:
        end = -1
    options, command = argv[1:end], argv[end + 1 :]
    if end < 1 or not command:
        sys.stderr.write(
            "usage: egress_forwarder.py FOLDER [--egress] [--publish PORT]... -- ARGV\n"
        )
        return 2
    egress = "--egress" in options
    publish = [int(options[i + 1]) for i, o in enumerate(options) if o == "--publish"]
    listeners = _listeners(argv[0], egress, publish)
    # a double fork: the relay is the child of the sandbox's init, never of the command, so a
    # command that waits for all its children never waits for it
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            try:
                for listener, family, address in listeners[1:]:
                    _thread.start_new_thread(_serve, (listener, family, address))
                if listeners:
                    _serve(*listeners[0])
            finally:
                os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    for listener, _family, _address in listeners:
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

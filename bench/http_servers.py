"""The console's reply latency over loopback: ``GET /login`` on proctor's listening socket,
beside the same app on a socket made the old way (Nagle's algorithm left on) and beside a bare
starlette app that answers ``ok`` (the yardstick), all in one run.

    .venv/bin/python bench/http_servers.py [--rounds 300]

Each server runs in this process under uvicorn on a free loopback port; one keep-alive httpx
client times each request. Prints median/p95 per server and the ratio to the yardstick.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from proctor.console.app import ConsoleConfig, build_app
from proctor.console.sessions import SessionBook
from proctor.runtime.listen import listen_tcp


def _nagle_socket() -> socket.socket:
    """A listening socket as the console made it before: protocol 0, so asyncio leaves
    TCP_NODELAY off on what it accepts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextmanager
def _serving(app: Any, sock: socket.socket) -> Iterator[str]:
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("a server did not start")
        thread.join(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _time(url: str, path: str, rounds: int) -> list[float]:
    with httpx.Client(base_url=url) as client:
        for _ in range(20):
            client.get(path).raise_for_status()
        samples = []
        for _ in range(rounds):
            start = time.perf_counter_ns()
            client.get(path).raise_for_status()
            samples.append((time.perf_counter_ns() - start) / 1e6)
    return sorted(samples)


def _line(label: str, samples: list[float], yardstick: list[float]) -> None:
    median = statistics.median(samples)
    p95 = samples[int(len(samples) * 0.95)]
    ratio = median / statistics.median(yardstick)
    print(f"{label:<44} median {median:8.3f} ms   p95 {p95:8.3f} ms   {ratio:6.2f}x yardstick")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root, home = Path(tmp) / "ws", Path(tmp) / "home"
        (root / ".proctor").mkdir(parents=True)
        config = ConsoleConfig(
            root=root, home=home, environ={"PROCTOR_HOME": str(home)}, sessions=SessionBook()
        )
        bare = Starlette(routes=[Route("/ok", lambda _r: PlainTextResponse("ok"))])
        with _serving(bare, listen_tcp("127.0.0.1", 0)) as url:
            yardstick = _time(url, "/ok", options.rounds)
        with _serving(build_app(config), listen_tcp("127.0.0.1", 0)) as url:
            console = _time(url, "/login", options.rounds)
        with _serving(build_app(config), _nagle_socket()) as url:
            nagle = _time(url, "/login", max(options.rounds // 6, 20))
    _line("yardstick: bare starlette GET /ok", yardstick, yardstick)
    _line("console GET /login (listen_tcp)", console, yardstick)
    _line("console GET /login (old socket, Nagle on)", nagle, yardstick)


if __name__ == "__main__":
    main()

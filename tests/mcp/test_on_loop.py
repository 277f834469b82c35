"""A call made on the event loop's thread (``ProctorServer.run_on_loop``) is never cut off by
the signal that ends the server: the signal sets the call's stop, as for a worker's call, and
its interrupt comes once the call has returned."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tests.mcp.conftest import Ws


def test_a_signal_during_a_call_on_the_loop_is_raised_once_it_returns(ws: Ws) -> None:
    from proctor.mcp.app import _end_calls_on_signals, open_server
    from proctor.runtime.boundary.workspace import Workspace

    server = open_server([], workspace=Workspace(ws.root), tools=("fs.read",), environ=dict(ws.env))
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    steps: list[str] = []

    def call(stop: threading.Event) -> str:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, between two lines
        steps.append("stopped" if stop.is_set() else "running")
        steps.append("returned")
        return "answer"

    try:
        _end_calls_on_signals(server)
        with pytest.raises(KeyboardInterrupt):
            server.run_on_loop(call)
        assert steps == ["stopped", "returned"]
        assert server.hold_interrupt() is False  # no call on the loop: raised at once
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        server.close()

"""A call's worker: it always runs once submitted, a cancellation stops it like SIGTERM and
waits for it, and a long one reports progress while it works."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from proctor.mcp.server import ProctorServer
from proctor.mcp.shared import ServerConfig
from proctor.runtime.boundary.workspace import Workspace


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ProctorServer]:
    from proctor.mcp.catalog import Catalog

    (tmp_path / ".proctor").mkdir()
    environ = {"PROCTOR_HOME": str(tmp_path / "home")}
    config = ServerConfig(workspace=Workspace(tmp_path), catalog=Catalog(), environ=environ)
    proctor = ProctorServer(config)
    yield proctor
    proctor.close()


def test_a_call_cancelled_at_once_still_runs_its_worker_once_and_waits_for_it(
    server: ProctorServer,
) -> None:
    ran: list[str] = []

    def fn(stop: threading.Event) -> str:
        ran.append("ran")
        return "ran"

    async def go() -> list[str]:
        with anyio.fail_after(10):
            with anyio.CancelScope() as scope:
                scope.cancel()  # cancelled before the call even began waiting
                await server.run_in_worker(fn)
            return list(ran)  # what had run when the cancelled call returned

    assert anyio.run(go) == ["ran"]
    assert ran == ["ran"]


def test_a_cancelled_call_waits_for_its_worker_to_stop(server: ProctorServer) -> None:
    started, released = threading.Event(), threading.Event()
    ended: list[str] = []

    def fn(stop: threading.Event) -> str:
        started.set()
        stop.wait(10)  # the run's graceful stop: it ends once asked to
        ended.append("stopped" if stop.is_set() else "timed out")
        released.set()
        return "done"

    async def go() -> None:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await server.run_in_worker(fn)
                    ended.append("returned")  # never: the call was cancelled

                group.start_soon(call)
                await anyio.to_thread.run_sync(started.wait)
                group.cancel_scope.cancel()
            # the task group ended only after the worker did
            assert released.is_set()

    anyio.run(go)
    assert ended == ["stopped"]


def test_a_long_call_reports_progress_and_returns_its_result(server: ProctorServer) -> None:
    enough = threading.Event()
    reports: list[int] = []

    async def report(count: int) -> None:
        reports.append(count)
        if count == 3:
            enough.set()

    def fn(stop: threading.Event) -> str:
        enough.wait(10)
        return "done"

    async def go() -> str:
        with anyio.fail_after(10):
            return await server.run_in_worker(fn, report=report, every=0.01)

    assert anyio.run(go) == "done"
    assert reports[:3] == [1, 2, 3]


def test_an_error_in_the_worker_reaches_the_caller(server: ProctorServer) -> None:
    def fn(stop: threading.Event) -> str:
        raise LookupError("nothing here")

    async def go() -> str:
        with anyio.fail_after(10):
            return await server.run_in_worker(fn)

    with pytest.raises(LookupError, match="nothing here"):
        anyio.run(go)


def test_a_worker_is_back_in_its_pool_before_the_loop_wakes(server: ProctorServer) -> None:
    """The worker schedules the wake-up and returns: it never waits for the loop (which may be
    busy answering other requests) to run it."""
    from concurrent.futures import Future, ThreadPoolExecutor

    pool = ThreadPoolExecutor(1)
    submitted: list[Future[None]] = []
    real_submit = pool.submit

    def submit(fn: Any, *args: Any) -> Future[None]:
        future = real_submit(fn, *args)
        submitted.append(future)
        return future

    pool.submit = submit  # type: ignore[method-assign]
    server._executor = pool

    started, go_on = threading.Event(), threading.Event()

    def fn(stop: threading.Event) -> str:
        started.set()
        go_on.wait(10)
        return "done"

    async def go() -> str:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                results: list[str] = []

                async def call() -> None:
                    results.append(await server.run_in_worker(fn))

                group.start_soon(call)
                await anyio.to_thread.run_sync(started.wait)
                go_on.set()
                # The loop is blocked from here: the worker must finish all the same.
                submitted[0].result(timeout=5)
            return results[0]

    assert anyio.run(go) == "done"

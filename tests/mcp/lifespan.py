"""An ASGI app's lifespan, started and stopped around a block, for tests that drive the MCP
endpoint in process (its sessions' and exchange's task groups run only inside it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio


@contextlib.asynccontextmanager
async def running(app: Any) -> AsyncIterator[None]:
    """``app``'s lifespan started (``lifespan.startup.complete`` seen) for the block, shut down
    after it."""
    started, stop = anyio.Event(), anyio.Event()
    lifespan = [{"type": "lifespan.startup"}]

    async def receive() -> dict[str, Any]:
        if lifespan:
            return lifespan.pop()
        await stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    async with anyio.create_task_group() as group:
        group.start_soon(app, {"type": "lifespan"}, receive, send)
        await started.wait()
        yield
        stop.set()

"""Long calls report progress while they work, and stop reporting when the work ends."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel

from proctor.mcp.approvals import with_progress


class _Session:
    """The one method of the SDK's ServerSession that with_progress uses."""

    def __init__(self, enough: anyio.Event) -> None:
        self.sent: list[tuple[float, str | None]] = []
        self.enough = enough

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self.sent.append((progress, message))
        if len(self.sent) == 3:
            self.enough.set()


class _Ctx:
    def __init__(self, session: _Session) -> None:
        self.session = session


def test_progress_is_reported_until_the_work_is_done() -> None:
    async def go() -> tuple[str, list[tuple[float, str | None]]]:
        enough = anyio.Event()
        session = _Session(enough)

        async def work() -> str:
            await enough.wait()  # the work ends once three notifications went out
            return "done"

        with anyio.fail_after(10):
            result = await with_progress(_Ctx(session), work(), "waiting", every=0.01)  # type: ignore[arg-type]
        sent = list(session.sent)
        return result, sent

    result, sent = anyio.run(go)
    assert result == "done"
    assert [p for p, _ in sent[:3]] == [1.0, 2.0, 3.0]
    assert all(m == "waiting" for _, m in sent)
    assert len(sent) <= 4  # the ticker stops with the work


def test_a_failing_channel_stops_the_reports_not_the_work() -> None:
    async def go() -> tuple[str, int]:
        tried = anyio.Event()
        calls = [0]

        class Broken:
            async def report_progress(self, *args: Any) -> None:
                calls[0] += 1
                tried.set()
                raise anyio.BrokenResourceError

        async def work() -> str:
            await tried.wait()
            await anyio.lowlevel.checkpoint()
            return "done"

        with anyio.fail_after(10):
            result = await with_progress(_Ctx(Broken()), work(), every=0.001)  # type: ignore[arg-type]
        return result, calls[0]

    result, calls = anyio.run(go)
    assert result == "done" and calls == 1

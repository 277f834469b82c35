"""Rate limits of upstream MCP tools: calls per window, per tool and per upstream.

``[mcp.<server>] rate`` limits every call to the server, ``[mcp.<server>.tools.<tool>] rate``
one tool's. A call is counted when it is about to be sent; one that would exceed any of its
limits is refused ``rate_limited`` with the seconds to wait, and nothing is sent. The windows
slide (the last ``window_seconds`` seconds) and are kept in the workspace's state folder, so
every process serving the workspace (a gateway, a run, another gateway) shares them.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from proctor.contracts import json_strict
from proctor.errors import ParseError, RefusedCall

__all__ = ["RATE_FILE", "RateWindows"]

RATE_FILE = "mcp-rate.json"


class RateWindows:
    """The sliding windows of one workspace (``.proctor/mcp-rate.json``)."""

    def __init__(self, state_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = state_dir / RATE_FILE
        self.clock = clock

    def take(self, limits: Sequence[tuple[str, int, int]]) -> None:
        """Count one call against each ``(key, calls, window_seconds)``, or refuse it.

        Raises:
            RefusedCall: ``rate_limited`` (details: ``limit``, ``retry_after_seconds``); no
                window counts the refused call.
        """
        if not limits:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with os.fdopen(os.dup(fd), "r+", encoding="utf-8") as f:
                try:
                    # strict: an Infinity stamp would hold a window shut for ever, and a key
                    # twice is no record this wrote; either reads as no record, as text that
                    # is not JSON always did
                    data = json_strict.loads(f.read() or "{}", source="rate.json")
                except ParseError:
                    data = {}
                if not isinstance(data, dict):
                    data = {}
                now = self.clock()
                kept: dict[str, list[float]] = {}
                for key, calls, window in limits:
                    stamps = [
                        float(t)
                        for t in data.get(key, [])
                        if isinstance(t, int | float) and now - float(t) < window
                    ]
                    kept[key] = stamps
                    if len(stamps) >= calls:
                        wait = window - (now - min(stamps))
                        raise RefusedCall(
                            f"rate limit of {key} reached ({calls} calls per {window} s);"
                            f" try again in {math.ceil(wait)} s; nothing was sent",
                            code="rate_limited",
                            details={
                                "limit": key,
                                "calls": calls,
                                "window_seconds": window,
                                "retry_after_seconds": math.ceil(wait),
                            },
                        )
                for key, stamps in kept.items():
                    data[key] = [*stamps, now]
                f.seek(0)
                f.truncate()
                f.write(json.dumps(data, sort_keys=True))
        finally:
            os.close(fd)

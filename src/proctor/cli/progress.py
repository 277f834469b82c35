"""Live progress of a run on a terminal: the run, its current step and call, elapsed time.

Shown on stderr only when stderr is a terminal (and never under ``--json``), redrawn in place
about four times a second and erased when the run returns; a pipe sees nothing extra. What it
shows comes from what the run already records: the audit log's new lines (read from where they
start, so each poll costs what was appended since the last) name the run and each settled
call's step and tool, and the run store's counts tell whether a call is still in flight.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from proctor.errors import ProctorError

_PERIOD_S = 0.25
_MAX_READ = 1 << 20


class _Tail:
    """New complete lines of the audit log since it was opened."""

    def __init__(self, path: Any) -> None:
        self.path = path
        try:
            self.offset = os.path.getsize(path)
        except OSError:
            self.offset = 0
        self.partial = b""

    def lines(self) -> Iterator[dict[str, Any]]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(_MAX_READ)
        except OSError:
            return
        self.offset += len(data)
        data = self.partial + data
        *complete, self.partial = data.split(b"\n")
        for line in complete:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


class _State:
    def __init__(self) -> None:
        self.run_id: str | None = None
        self.where = ""
        self.settled = 0
        self.last = ""
        self.step = ""

    def read(self, record: dict[str, Any]) -> None:
        event = record.get("event")
        if event == "run_started" and self.run_id is None:
            self.run_id = str(record.get("run_id"))
            self.where = f"{record.get('skill')}#{record.get('method')}"
        elif event in ("tool_call", "call_refused") and record.get("run_id") == self.run_id:
            self.settled += 1
            self.step = str(record.get("step") or self.step)
            outcome = record.get("outcome") or ("refused" if event == "call_refused" else "")
            self.last = f"{record.get('tool')} {outcome}".strip()


def _line(state: _State, calls: int | None, elapsed: float) -> str:
    parts = [f"running {state.where or 'the run'}"]
    if state.step:
        parts.append(f"step {state.step}")
    if calls is not None and calls > state.settled:
        parts.append(f"call {calls} in flight" + (f" (after {state.last})" if state.last else ""))
    elif state.last:
        parts.append(f"call {state.settled}: {state.last}")
    parts.append(f"{elapsed:.1f}s")
    return " · ".join(parts)


@contextmanager
def progress(session: Any, *, enabled: bool = True, stream: TextIO | None = None) -> Iterator[None]:
    """Show the run's progress on ``stream`` (stderr) while the block runs, if it is a terminal."""
    out = stream or sys.stderr
    if not enabled or not out.isatty():
        yield
        return
    tail = _Tail(session.audit.path)
    state = _State()
    done = threading.Event()
    started = time.monotonic()

    def draw() -> None:
        while not done.wait(_PERIOD_S):
            for record in tail.lines():
                state.read(record)
            calls = None
            if state.run_id is not None:
                try:
                    calls = session.store.run_counts(state.run_id).calls
                except ProctorError:  # progress never fails a run: it shows less
                    calls = None
            out.write("\r\x1b[2K" + _line(state, calls, time.monotonic() - started)[:200])
            out.flush()

    thread = threading.Thread(target=draw, name="proctor-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=2)
        out.write("\r\x1b[2K")
        out.flush()

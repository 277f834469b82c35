"""process.start quotas: a run tree's live processes are bounded, a dead supervisor is
reconciled to ``lost``, and nothing of a sandbox outlives the supervisor that started it."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ConfigError, ProctorError, RefusedCall
from proctor.runtime.boundary.sandbox import SANDBOX_EXTRA, SandboxUse
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.procs import DEFAULT_MAX_RUNNING
from proctor.runtime.tools.procs_log import describe, list_processes, stop
from tests.runtime.boundary.sandbox_support import alive, needs_bwrap, wait_until
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.tools.test_fs_support import call

pytestmark = needs_bwrap
PY = sys.executable


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    root = make_workspace(tmp_path / "ws")
    yield root
    processes = root / ".proctor" / "processes"
    for info in list_processes(processes):
        if info["running"]:
            stop(processes / info["process_id"])


def _ctx(ws: Path, store: SQLiteRunStore, run_id: str, **extras: Any) -> ToolContext:
    return ToolContext(
        workspace=Workspace(ws), store=store, run_id=run_id, call_id=f"{run_id}/c", extras=extras
    )


@pytest.fixture
def store(ws: Path) -> Iterator[SQLiteRunStore]:
    opened = SQLiteRunStore(ws / ".proctor" / "runs.sqlite")
    yield opened
    opened.close()


def _marker() -> str:
    # sleep's argument: a number no other process on the machine carries in its argv
    return f"900.{secrets.randbelow(10**9):09d}"


def _sleep(ctx: ToolContext, marker: str) -> dict[str, Any]:
    return call(ctx, "process.start", {"command": "sleep", "args": [marker]})


def test_a_process_bomb_past_the_quota_is_refused_and_starts_nothing(
    ws: Path, store: SQLiteRunStore
) -> None:
    ctx = _ctx(ws, store, "run-bomb")
    processes = ws / ".proctor" / "processes"
    markers = [_marker() for _ in range(3 * DEFAULT_MAX_RUNNING)]
    outcomes: list[str] = []
    lock = threading.Lock()

    def start(marker: str) -> None:
        try:
            _sleep(ctx, marker)
            got = "started"
        except ProctorError as exc:
            got = exc.code
        with lock:
            outcomes.append(got)

    # the bomb: three times the quota of starts at once, from threads racing one another
    threads = [threading.Thread(target=start, args=(m,)) for m in markers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(set(outcomes)) == ["process_quota", "started"]
    assert outcomes.count("started") == DEFAULT_MAX_RUNNING
    # the refused starts left nothing: no folder, no process of theirs
    assert len(list_processes(processes)) == DEFAULT_MAX_RUNNING
    running = [m for m in markers if alive(m)]
    assert len(running) == DEFAULT_MAX_RUNNING
    # a refusal says why and what to do, and names the processes that hold the places
    with pytest.raises(RefusedCall) as refused:
        _sleep(ctx, _marker())
    assert refused.value.code == "process_quota"
    assert "stop one" in refused.value.message
    assert len(refused.value.details["running"]) == DEFAULT_MAX_RUNNING
    # another run (another tree) has places of its own
    other = _sleep(_ctx(ws, store, "run-other"), _marker())
    assert other["running"]
    # a stopped process frees its place
    first = list_processes(processes, run_id="run-bomb")[0]
    stop(processes / first["process_id"])
    again = _marker()
    assert _sleep(ctx, again)["running"] and alive(again)


def test_the_workspace_narrows_the_quota_and_may_not_widen_it(
    ws: Path, store: SQLiteRunStore
) -> None:
    ctx = _ctx(ws, store, "run-narrow")
    (ws / "proctor.toml").write_text("[processes]\nmax_running = 1\n")
    first = _marker()
    _sleep(ctx, first)
    second = _marker()
    with pytest.raises(RefusedCall) as refused:
        _sleep(ctx, second)
    assert refused.value.code == "process_quota" and not alive(second)
    (ws / "proctor.toml").write_text(f"[processes]\nmax_running = {DEFAULT_MAX_RUNNING + 1}\n")
    with pytest.raises(ConfigError) as wider:
        _sleep(ctx, second)
    assert wider.value.code == "bad_config" and not alive(second)
    assert len(list_processes(ws / ".proctor" / "processes")) == 1


KID = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: first
        tool: process.start
        inputs: {{command: sleep, args: ["{one}"]}}
      - id: second
        tool: process.start
        inputs: {{command: sleep, args: ["{two}"]}}
"""

TOP = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: own
        tool: process.start
        inputs: {{command: sleep, args: ["{own}"]}}
      - id: down
        skill: ../kid
        inputs: {{}}
"""


def test_the_quota_counts_across_a_parent_run_and_its_child_runs(ws: Path) -> None:
    (ws / "proctor.toml").write_text("[processes]\nmax_running = 2\n")
    own, one, two = _marker(), _marker(), _marker()
    make_skill(ws, "kid", KID.format(one=one, two=two))
    make_skill(ws, "top", TOP.format(own=own))
    env = session(ws, environ={**os.environ, "PROCTOR_HOME": str(ws / ".home")}).run("top", cwd=ws)
    # the child's second start is the tree's third process: refused, and the failure is the
    # child step's, so the root ends failed
    assert env.outcome != "completed"
    listed = list_processes(ws / ".proctor" / "processes")
    assert len(listed) == 2 and all(p["running"] for p in listed)
    runs = {p["run_id"] for p in listed}
    assert env.run_id in runs and len(runs) == 2  # one of the root's, one of its child's
    assert alive(own) and alive(one) and not alive(two)
    audit = (ws / ".proctor" / "audit.jsonl").read_text()
    assert '"process_quota"' in audit
    # a second root run is a tree of its own: it is not held to the first tree's count
    make_skill(ws, "alone", KID.format(one=_marker(), two=_marker()))
    alone = session(ws, environ={**os.environ, "PROCTOR_HOME": str(ws / ".home")}).run(
        "alone", cwd=ws
    )
    assert alone.outcome == "completed", alone.refusal


def _supervisor(ws: Path, process_id: str) -> int:
    state = json.loads((ws / ".proctor" / "processes" / process_id / "state.json").read_text())
    return int(state["supervisor_pid"])


@pytest.mark.parametrize("sandboxed", [True, False])
def test_a_killed_supervisor_is_reconciled_lost_and_leaves_no_process(
    ws: Path, store: SQLiteRunStore, sandboxed: bool
) -> None:
    extras: dict[str, Any] = {}
    if not sandboxed:  # the program then has no PID namespace: the reconciling kills it
        extras[SANDBOX_EXTRA] = SandboxUse("none", "off", network=True)
    ctx = _ctx(ws, store, "run-lost", **extras)
    marker = _marker()
    started = _sleep(ctx, marker)
    wait_until(lambda: bool(alive(marker)), "the program started")
    os.kill(_supervisor(ws, started["process_id"]), signal.SIGKILL)
    folder = ws / ".proctor" / "processes" / started["process_id"]
    wait_until(lambda: not describe(folder)["running"], "the supervisor's lock was freed")
    (listed,) = call(ctx, "process.list", {})["processes"]
    assert listed["state"] == "lost" and listed["running"] is False
    assert json.loads((folder / "state.json").read_text())["state"] == "lost"
    wait_until(lambda: not alive(marker), "a process outlived its killed supervisor", 10)
    # a lost process holds no place of the quota
    (ws / "proctor.toml").write_text("[processes]\nmax_running = 1\n")
    assert _sleep(ctx, _marker())["running"]


def test_a_program_killed_under_its_supervisor_is_recorded_ended(
    ws: Path, store: SQLiteRunStore
) -> None:
    ctx = _ctx(ws, store, "run-ended")
    marker = _marker()
    started = _sleep(ctx, marker)
    wait_until(lambda: bool(alive(marker)), "the program started")
    (program,) = [p for p in alive(marker) if p.cmdline()[:1] == ["sleep"]]
    program.kill()  # the program alone; its supervisor and the sandbox's init live on
    folder = ws / ".proctor" / "processes" / started["process_id"]
    wait_until(lambda: not describe(folder)["running"], "the supervisor recorded the end")
    ended = describe(folder)
    assert ended["state"] == "exited" and ended["exit_code"] is not None


NOTHING = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: look
        tool: data.digest
        inputs: {value: 1}
"""


def test_the_next_run_open_reconciles_a_killed_supervisor(ws: Path, store: SQLiteRunStore) -> None:
    ctx = _ctx(ws, store, "run-before")
    marker = _marker()
    started = _sleep(ctx, marker)
    os.kill(_supervisor(ws, started["process_id"]), signal.SIGKILL)
    state = ws / ".proctor" / "processes" / started["process_id"] / "state.json"
    wait_until(lambda: not alive(marker), "the sandbox ended with its supervisor", 10)
    assert json.loads(state.read_text())["state"] == "running"  # nothing has read it yet
    make_skill(ws, "nothing", NOTHING)
    env = session(ws, environ={**os.environ, "PROCTOR_HOME": str(ws / ".home")}).run(
        "nothing", cwd=ws
    )
    assert env.outcome == "completed", env.refusal
    assert json.loads(state.read_text())["state"] == "lost"


def _address_space(pid: int) -> str:
    limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
    (line,) = [entry for entry in limits if entry.startswith("Max address space")]
    return line.split()[3]  # the soft limit: a number of bytes, or "unlimited"


def test_a_supervisor_caps_its_own_memory_and_not_its_programs(
    ws: Path, store: SQLiteRunStore
) -> None:
    from proctor.runtime.tools.procs_supervisor import SUPERVISOR_MEMORY

    ctx = _ctx(ws, store, "run-memory")
    marker = _marker()
    started = _sleep(ctx, marker)
    wait_until(lambda: bool(alive(marker)), "the program started")
    assert _address_space(_supervisor(ws, started["process_id"])) == str(SUPERVISOR_MEMORY)
    (program,) = [p for p in alive(marker) if p.cmdline()[:1] == ["sleep"]]
    assert _address_space(program.pid) == _address_space(os.getpid())  # inherited, not capped


def _first_not_bwrap(pid: int) -> int:
    """``pid`` or its nearest ancestor whose program is not bubblewrap."""
    while Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"bwrap"):
        pid = int(Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[1])
    return pid


def _kill_supervisor_at_bwrap(marker: str, seen: set[str]) -> None:
    """Kill the supervisor the moment a bubblewrap of ``marker`` exists (its parent), reading
    ``/proc`` in a tight loop: a poll with pauses would come after the sandbox is set up."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            if not name.isdigit() or name in seen:
                continue
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
                parent = Path(f"/proc/{name}/stat").read_bytes().rpartition(b")")[2].split()[1]
            except OSError:
                continue
            if marker.encode() in cmdline and cmdline[0].endswith(b"bwrap"):
                # the first bubblewrap seen may be the sandbox's init, a child of the outer one
                # (a process still between fork and exec reads as neither): kill the first
                # ancestor that is not bubblewrap, the supervisor
                with contextlib.suppress(OSError):
                    os.kill(_first_not_bwrap(int(parent)), signal.SIGKILL)
                return
            if b"procs_supervisor.py" not in b" ".join(cmdline):
                seen.add(name)
    raise AssertionError("no bubblewrap started")


def test_a_supervisor_killed_while_it_starts_its_sandbox_leaves_no_process(
    ws: Path, store: SQLiteRunStore
) -> None:
    # bubblewrap binds the sandbox's life to the supervisor's only part-way through its
    # set-up; a supervisor killed before then must still leave nothing behind
    ctx = _ctx(ws, store, "run-early")
    for _ in range(4):
        marker = _marker()
        outcome: list[str] = []

        def start(marker: str = marker, outcome: list[str] = outcome) -> None:
            try:
                _sleep(ctx, marker)
                outcome.append("started")
            except ProctorError as exc:
                outcome.append(exc.code)

        seen = set(os.listdir("/proc"))
        starter = threading.Thread(target=start)
        starter.start()
        _kill_supervisor_at_bwrap(marker, seen)
        starter.join(timeout=60)
        assert outcome in (["started"], ["command_not_started"])
        wait_until(lambda marker=marker: not alive(marker), "a process outlived its supervisor")
    listed = list_processes(ws / ".proctor" / "processes")
    assert listed and not [p for p in listed if p["running"] or p["state"] == "running"]

"""The sandbox self-test: it holds here with the real bubblewrap, and a bubblewrap that starts
but does not isolate (a wrapper that runs the program on the host, as a host whose AppArmor
rule makes namespaces fail open would) fails it: ``required`` then refuses every process call
``sandbox_unverified`` before a person is asked and nothing runs; ``auto`` runs the call as a
trusted host process and its receipt says the sandbox was not verified, with what failed.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.boundary.sandbox_check import CHECKS, self_test
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from tests.runtime.boundary.sandbox_support import BWRAP, call_receipts, needs_bwrap
from tests.runtime.driver_support import (
    _OPEN,
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
)

pytestmark = needs_bwrap

SIGNER = signer_from_seed(bytes(range(32)))

# Accepts bubblewrap's command line, ignores every option and runs the program on the host.
WRAPPER = """#!/bin/sh
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    import sys

    root = make_workspace(tmp_path / "ws")
    make_skill(
        root,
        "cmd",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: run
        tool: command.execute
        inputs: {{argv: ["{sys.executable}", "tools/count.py", "counter.txt"]}}
""",
    )
    return root


@pytest.fixture
def leaky(tmp_path: Path) -> str:
    path = tmp_path / "bwrap-that-does-not-isolate"
    path.write_text(WRAPPER)
    path.chmod(0o755)
    return str(path)


def _session(root: Path, **environ: str) -> Session:
    ticks = itertools.count()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    opened = Session(
        Workspace(root),
        environ={"PROCTOR_HOME": str(root / ".home"), **environ},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
        signer=SIGNER,
    )
    _OPEN.append(opened)
    return opened


def test_the_self_test_holds_with_bubblewrap_and_each_call_receipt_says_so(ws: Path) -> None:
    assert BWRAP is not None
    tested = self_test(BWRAP)
    assert tested.verified, tested.reason
    assert [name for name, _ in tested.checks] == list(CHECKS)
    assert self_test(BWRAP) is tested  # once per process
    s = _session(ws, PROCTOR_SANDBOX="required")
    env = s.run("cmd", cwd=ws)
    assert env.outcome == "completed", env.refusal
    (body,) = call_receipts(s, env.receipt_id)
    assert body["sandbox"]["used"] == "bubblewrap"
    assert body["sandbox"]["verified"] is True
    assert body["sandbox"]["checks"] == [{"check": c, "held": True} for c in CHECKS]


def test_a_bubblewrap_that_does_not_isolate_fails_the_self_test(leaky: str) -> None:
    tested = self_test(leaky)
    assert not tested.verified
    failed = tested.failed()
    # the wrapper runs the probe on the host: it sees the planted file and the host's /proc,
    # and reaches the listener
    assert {"planted_file_hidden", "network_unreachable", "proc_isolated"} <= set(failed)
    assert "/" not in tested.reason


def test_required_refuses_an_unverified_sandbox_before_anyone_is_asked(
    ws: Path, leaky: str
) -> None:
    s = _session(ws, PROCTOR_SANDBOX="required", PROCTOR_BWRAP=leaky)
    env = s.run("cmd", authority=authority(effects="ask"), cwd=ws)
    assert env.refusal is not None and env.refusal.code == "sandbox_unverified"
    assert "planted_file_hidden" in env.refusal.message
    assert not s.store.requests(env.run_id or "")
    assert not (ws / "counter.txt").exists()


def test_auto_records_an_unverified_sandbox_and_runs_on_the_host(ws: Path, leaky: str) -> None:
    s = _session(ws, PROCTOR_SANDBOX="auto", PROCTOR_BWRAP=leaky)
    env = s.run("cmd", cwd=ws)
    assert env.outcome == "completed", env.refusal
    assert (ws / "counter.txt").read_text() == "1"
    (entry,) = env.trace
    warning = next(w for w in entry.warnings if w.startswith("trusted_host_process"))
    assert "self-test failed" in warning
    (body,) = call_receipts(s, env.receipt_id)
    sandbox = body["sandbox"]
    assert sandbox["used"] == "none" and sandbox["mode"] == "auto"
    assert sandbox["verified"] is False
    held = {c["check"]: c["held"] for c in sandbox["checks"]}
    assert set(held) == set(CHECKS) and held["planted_file_hidden"] is False

"""``proctor worker`` end to end: real worker processes on one fresh PostgreSQL schema.

- a run submitted with ``proctor run --submit`` is driven by a worker to its pause; the
  approval, submitted with ``proctor resume --submit``, is driven to the seal; the receipt
  verifies; ``proctor worker list`` shows the live worker; SIGTERM stops it cleanly (exit 0,
  gone from the list, no lease left);
- a worker SIGKILLed right after recording a decision (a test hook) leaves its run to another
  worker, which continues without asking again and runs the command exactly once;
- bad input is refused with a code and no traceback, changing nothing: ``--submit`` without a
  shared store, a resume document that does not parse, an unreachable database.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.fleet.support import (
    approval_document,
    proctor,
    run_status,
    shared_workspace,
    start_worker,
    wait_for,
)


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], str]]:
    with shared_workspace(tmp_path) as shared:
        yield shared


def test_submitted_work_is_driven_by_a_worker_and_sigterm_stops_it_cleanly(
    shared: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    store = PostgresRunStore(url)
    out = proctor(root, env, ["run", "appender", "-i", "line=one", "--submit", "--json"])
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["run_id"]
    assert store.get_run(run_id) is None  # queued, not driven here
    worker = start_worker(root, env, log=tmp_path / "worker.log")
    try:
        wait_for(lambda: run_status(store, run_id) == "needs_approval", 60, "the pause")
        listed = json.loads(proctor(root, env, ["worker", "list", "--json"]).stdout)
        assert len(listed["workers"]) == 1
        doc = approval_document(store, run_id)
        out = proctor(root, env, ["resume", run_id, "-", "--submit"], json.dumps(doc))
        assert out.returncode == 0 and "submitted" in out.stdout, out.stderr
        wait_for(lambda: run_status(store, run_id) == "sealed", 60, "the seal")
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(30)
    assert code == 0, (tmp_path / "worker.log").read_text()
    run = store.get_run(run_id)
    assert run is not None and run.outcome == "completed"
    assert (root / "lines.txt").read_text() == "one\n"
    verified = proctor(root, env, ["verify", str(run.receipt_id)])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    listed_runs = json.loads(proctor(root, env, ["history", "--json", "--limit", "5"]).stdout)
    assert [r["run_id"] for r in listed_runs["runs"]] == [run_id]
    listed = json.loads(proctor(root, env, ["worker", "list", "--json"]).stdout)
    assert listed["workers"] == [] and listed["submissions"] == {"done": 2}
    assert store._rows("SELECT * FROM leases WHERE holder <> ''") == []


def test_a_killed_workers_run_is_continued_by_another_without_losing_its_decision(
    shared: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    store = PostgresRunStore(url)
    run_id = json.loads(
        proctor(root, env, ["run", "appender", "-i", "line=two", "--submit", "--json"]).stdout
    )["run_id"]
    doomed_env = env | {"PROCTOR_TEST_HOOKS": "1", "PROCTOR_TEST_KILL_AT": "resume.recorded:1"}
    doomed = start_worker(root, doomed_env, log=tmp_path / "doomed.log")
    try:
        wait_for(lambda: run_status(store, run_id) == "needs_approval", 60, "the pause")
        doc = approval_document(store, run_id)
        proctor(root, env, ["resume", run_id, "-", "--submit"], json.dumps(doc))
        assert doomed.wait(60) == -signal.SIGKILL
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait()
    (request,) = store.requests(run_id)
    assert request.state == "decided"  # recorded before the kill
    survivor = start_worker(root, env, log=tmp_path / "survivor.log")
    try:
        wait_for(lambda: run_status(store, run_id) == "sealed", 60, "the seal by the survivor")
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.wait(30)
    run = store.get_run(run_id)
    assert run is not None and run.outcome == "completed"
    assert (root / "lines.txt").read_text() == "two\n"
    asked = [e for e in store.events(run_id) if e["kind"] == "decision_recorded"]
    assert len(asked) == 1  # never asked (nor recorded) again


def test_bad_submissions_are_refused_with_a_code_and_change_nothing(
    shared: tuple[Path, dict[str, str], str],
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    store = PostgresRunStore(url)
    local = {k: v for k, v in env.items() if k != "PROCTOR_DATABASE_URL"}
    out = proctor(root, local, ["run", "appender", "-i", "line=x", "--submit"])
    assert out.returncode == 2 and "submit_needs_database" in out.stderr
    assert "Traceback" not in out.stderr
    out = proctor(root, env, ["resume", "nope", "-", "--submit"], "{not json")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    out = proctor(root, env, ["resume", "nope", "-", "--submit"], "{}")
    assert out.returncode == 2 and "run_not_found" in out.stderr
    assert store._rows("SELECT * FROM submissions") == []
    dead = env | {"PROCTOR_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none"}
    for args in (["history"], ["worker", "list"], ["run", "appender", "-i", "line=x"]):
        out = proctor(root, dead, args)
        assert out.returncode != 0 and "store_unreachable" in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr
        assert "127.0.0.1:1" not in out.stderr  # the URL (it may hold a password) is not shown
    assert not (root / "lines.txt").exists()


def test_sigterm_finishes_the_current_call_and_another_worker_continues(
    shared: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    store = PostgresRunStore(url)
    run_id = json.loads(proctor(root, env, ["run", "slow", "--submit", "--json"]).stdout)["run_id"]
    first = start_worker(root, env, log=tmp_path / "first.log")
    try:
        wait_for(lambda: (root / "lines.txt.started").exists(), 60, "the slow command")
        first.send_signal(signal.SIGTERM)  # mid-call: the command finishes, the run waits
        assert first.wait(60) == 0, (tmp_path / "first.log").read_text()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert (root / "lines.txt").read_text() == "slow\n"  # the call finished
    assert run_status(store, run_id) != "sealed"
    assert store._rows("SELECT * FROM leases WHERE holder <> ''") == []  # released
    queued = store._rows("SELECT kind, state FROM submissions WHERE run_id = %s", (run_id,))
    assert queued == [("resume", "queued")]
    second = start_worker(root, env, log=tmp_path / "second.log")
    try:
        wait_for(lambda: run_status(store, run_id) == "sealed", 60, "the seal by another worker")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    run = store.get_run(run_id)
    assert run is not None and run.outcome == "completed"
    assert (root / "lines.txt").read_text() == "slow\n"  # settled once, never run again


def test_the_lease_ttl_setting_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from proctor.runtime.engine.lease import LEASE_TTL_SECONDS, lease_ttl

    for given, expected in [("15", 15.0), ("0.5", LEASE_TTL_SECONDS), ("x", LEASE_TTL_SECONDS)]:
        monkeypatch.setenv("PROCTOR_LEASE_TTL", given)
        assert lease_ttl() == expected
    monkeypatch.setenv("PROCTOR_LEASE_TTL", "1e9")
    assert lease_ttl() == LEASE_TTL_SECONDS


def test_a_worker_never_imports_a_guard_no_one_trusted(
    shared: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    from proctor.runtime.records.postgres import PostgresRunStore

    root, env, url = shared
    marker = tmp_path / "guard-imported"
    (root / "proctor.toml").write_text('[policy]\nguards = "guards.py"\n')
    (root / "guards.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    store = PostgresRunStore(url)
    out = proctor(root, env, ["run", "appender", "-i", "line=one", "--submit", "--json"])
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["run_id"]
    worker = start_worker(root, env, log=tmp_path / "worker.log")
    try:
        wait_for(lambda: run_status(store, run_id) == "sealed", 60, "the seal")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    run = store.get_run(run_id)
    assert run is not None and run.outcome == "blocked"
    assert "guards_untrusted" in json.dumps(run.data)
    assert not marker.exists()
    assert not (root / "lines.txt").exists()

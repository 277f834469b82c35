"""The crash harness's fencing points: a stale driver, and a worker's dropped connection.

``stale-driver``: driver A (``proctor run``, a real process) is SIGSTOPped while its command
runs (the command waits for a ``go`` file before it counts, so its effect is still to come),
and stays stopped past its lease (``PROCTOR_LEASE_TTL=1``). Driver B (``proctor resume``)
takes the run over: it ends A's command tree, then asks the retry question. A is SIGCONTed and
must stop on ``lease_lost`` having written nothing; then ``go`` is made and B, told to retry,
drives the run to its seal.

``dropped-connection`` (PostgreSQL): a ``proctor worker`` drives the run; while its command
runs, every connection of the worker's process is ended with ``pg_terminate_backend``
(its heartbeat's included), twice. The worker must keep beating and drive the run to its seal.

Each scenario returns an :class:`~tests.crash.harness.Outcome` whose violations list what
broke: the command's effect not exactly once; a write of A that got through (a settlement, a
step, a claim or a seal by A); a call settled twice or left claimed; more or fewer than one
seal; the retry question not saying the lease lapsed; a process of A's command left; the audit
log or the receipts not verifying.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.crash.harness import SKILL_MD, Outcome, _new_schema, _pg_url, proctor

STALE_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: count
        tool: command.execute
        inputs: {argv: [PYTHON, tools/slow_count.py, counter.txt], timeout_seconds: 120}
      - id: finish
        tool: echo
        inputs: {text: done}
"""

SLOW_COUNT = """import os, pathlib, sys, time
counter = pathlib.Path(sys.argv[1])
pathlib.Path(sys.argv[1] + ".started").write_text(str(os.getpid()))
deadline = time.monotonic() + 110
while not pathlib.Path("go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
"""


def make_stale(root: Path, backend: str) -> None:
    """A fresh workspace with the ``stale`` skill (and its own schema on PostgreSQL)."""
    (root / ".proctor").mkdir(parents=True)
    if backend == "postgres":
        (root / ".pg_url").write_text(_new_schema())
    (root / "tools").mkdir()
    (root / "tools" / "slow_count.py").write_text(SLOW_COUNT)
    skill = root / "skills" / "stale"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD.format(name="stale"))
    (skill / "run.yaml").write_text(STALE_YAML.replace("PYTHON", json.dumps(sys.executable)))


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``check`` until it returns something true (a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def query(root: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of the workspace's run store, read with SQLite or psycopg itself."""
    url = _pg_url(root)
    if url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as pg:
            return list(pg.execute(sql.replace("?", "%s"), params).fetchall())
    conn = sqlite3.connect(root / ".proctor" / "runs.sqlite", timeout=30)
    try:
        return list(conn.execute(sql, params).fetchall())
    finally:
        conn.close()


def _env(root: Path, extra: dict[str, str]) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")} | {
        "PROCTOR_HOME": str(root / ".home"),
    }
    url = _pg_url(root)
    if url:
        full["PROCTOR_DATABASE_URL"] = url
    return full | extra


def _lease_lapsed(root: Path, run_id: str) -> bool:
    if _pg_url(root):
        now = "extract(epoch from clock_timestamp())"
        rows = query(root, f"SELECT expires_at < {now} FROM leases WHERE run_id = ?", (run_id,))
        return bool(rows and rows[0][0])
    rows = query(root, "SELECT expires_at FROM leases WHERE run_id = ?", (run_id,))
    return bool(rows and rows[0][0] < time.time())


def _gone(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return True


def stale_driver(root: Path, backend: str = "sqlite") -> Outcome:
    """The stale-driver point (see the module docstring)."""
    make_stale(root, backend)
    outcome = Outcome(f"stale-driver ({backend})", "started")
    bad = outcome.violations
    short = {"PROCTOR_LEASE_TTL": "1"}
    a = subprocess.Popen(
        [sys.executable, "-m", "proctor", "run", "stale", "--json"],
        cwd=root,
        env=_env(root, short),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = root / "counter.txt.started"
        wait_for(started.exists, 60, "A's command to start")
        wait_for(
            lambda: any(
                "tree" in json.loads(s[0] or "{}") for s in query(root, "SELECT site FROM calls")
            ),
            30,
            "A's claim to record where its command runs",
        )
        import psutil

        a.send_signal(signal.SIGSTOP)
        # the command's tree: bubblewrap and what runs in it (not the driver's own helpers)
        sandboxes = [p for p in psutil.Process(a.pid).children() if p.name() == "bwrap"]
        tree = [m for p in sandboxes for m in [p, *p.children(recursive=True)]]
        run_id = str(query(root, "SELECT run_id FROM runs")[0][0])
        wait_for(lambda: _lease_lapsed(root, run_id), 30, "A's lease to lapse")
        first = proctor(root, ["resume", run_id, "-", "--json"], stdin="{}", env=short)
        envelope = json.loads(first.stdout)
        retry = [r for r in envelope.get("requests") or [] if r["kind"] == "retry"]
        if envelope["status"] != "needs_approval" or len(retry) != 1:
            bad.append(f"B was not asked to retry: {first.stdout[:300]} {first.stderr[:300]}")
            return outcome
        question = retry[0]
        if "lease" not in question["question"] or "lapsed" not in question["question"]:
            bad.append(f"the retry question does not say the lease lapsed: {question}")
        if not str(question.get("lapsed_holder", "")).endswith(tuple("0123456789abcdef")):
            bad.append(f"the retry request does not name the lapsed holder: {question}")
        if not tree or not all(_gone(p.pid) for p in tree):
            bad.append(f"A's command tree was not ended before the retry question: {tree}")
        sites = query(root, "SELECT site FROM calls WHERE run_id = ?", (run_id,))
        if not any("tree" in json.loads(s[0] or "{}") for s in sites):
            bad.append(f"A's claim does not record the process tree its command runs in: {sites}")
        record = json.loads(query(root, "SELECT data FROM runs WHERE run_id = ?", (run_id,))[0][0])
        if not (record.get("lapsed_holder") or {}).get("lapsed"):
            bad.append(f"the run record does not name the lapsed holder: {record}")
        a.send_signal(signal.SIGCONT)
        _out, err = a.communicate(timeout=60)
        if a.returncode != 75 or "lease_lost" not in err:
            bad.append(f"A did not stop on lease_lost (rc {a.returncode}): {err[-400:]}")
        if (root / "counter.txt").exists():
            bad.append("the command counted before anyone was told to send it again")
        (root / "go").write_text("go")
        doc = {
            "approvals": {
                question["address"]: {
                    "request_digest": question["request_digest"],
                    "value": {"retry": True},
                }
            }
        }
        second = proctor(root, ["resume", run_id, "-", "--json"], stdin=json.dumps(doc), env=short)
        final = json.loads(second.stdout)
        outcome.final_status = final["status"] + (
            f"/{final['outcome']}" if final.get("outcome") else ""
        )
        _check_once(root, run_id, outcome, a_settles=False)
    finally:
        if a.poll() is None:
            a.send_signal(signal.SIGCONT)
            a.kill()
            a.communicate()
    return outcome


def _check_once(root: Path, run_id: str, outcome: Outcome, *, a_settles: bool) -> None:
    """The run sealed once, completed, with the command's effect exactly once and every call
    settled exactly once; the audit log and the receipts verify."""
    bad = outcome.violations
    if outcome.final_status != "sealed/completed":
        bad.append(f"the run ended {outcome.final_status}")
    count = (root / "counter.txt").read_text() if (root / "counter.txt").exists() else "0"
    if count != "1":
        bad.append(f"the command's effect happened {count} times")
    calls = query(
        root,
        "SELECT call_id, step_id, state, outcome, result FROM calls WHERE run_id = ?",
        (run_id,),
    )
    if any(state != "settled" for _c, _s, state, _o, _r in calls):
        bad.append(f"a call was left claimed: {calls}")
    counted = [c for c in calls if c[1] == "count"]
    if not a_settles:
        # A's claim was settled by B's reconciliation (never by A), and B's own retry ran once
        outcomes = sorted(str(c[3]) for c in counted)
        if outcomes != ["completed", "unknown"]:
            bad.append(f"the count step's calls are not A's reconciled claim and B's: {calls}")
    steps = query(root, "SELECT step_id FROM steps WHERE run_id = ?", (run_id,))
    if sorted(s[0] for s in steps) != ["count", "finish"]:
        bad.append(f"steps settled: {steps}")
    sealed = query(root, "SELECT status, receipt_id FROM runs WHERE run_id = ?", (run_id,))
    if not sealed or sealed[0][0] != "sealed" or not sealed[0][1]:
        bad.append(f"the run is not sealed with a receipt: {sealed}")
    audit = root / ".proctor" / "audit.jsonl"
    lines = audit.read_text().splitlines() if audit.exists() else []
    seals = [ln for ln in lines if '"run_sealed"' in ln and run_id in ln]
    if len(seals) != 1:
        bad.append(f"{len(seals)} run_sealed lines in the audit log")
    verified = proctor(root, ["audit", "verify"])
    if verified.returncode != 0:
        bad.append(f"the audit log does not verify: {verified.stdout[-300:]}")
    if sealed and sealed[0][1]:
        receipts = proctor(root, ["verify", str(sealed[0][1])])
        if receipts.returncode != 0:
            bad.append(f"the receipt does not verify: {receipts.stdout[-300:]}")


def _terminate_backends(url: str, pid: int) -> int:
    """End every PostgreSQL backend whose client is a TCP socket of process ``pid``."""
    import psutil
    import psycopg

    ports = [
        c.laddr.port
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.raddr and c.raddr.port == 5432
    ]
    if not ports:
        return 0
    with psycopg.connect(url, autocommit=True) as pg:
        rows = pg.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY(%s)"
            " AND pid <> pg_backend_pid()",
            (ports,),
        ).fetchall()
    return sum(1 for r in rows if r[0])


def dropped_connection(root: Path, log: Path) -> Outcome:
    """The dropped-connection point (PostgreSQL; see the module docstring)."""
    make_stale(root, "postgres")
    outcome = Outcome("dropped-connection (postgres)", "started")
    bad = outcome.violations
    url = _pg_url(root)
    assert url is not None
    env = _env(root, {"PROCTOR_LEASE_TTL": "4"})
    submitted = subprocess.run(
        [sys.executable, "-m", "proctor", "run", "stale", "--submit", "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    run_id = json.loads(submitted.stdout)["run_id"]
    with open(log, "ab") as sink:
        worker = subprocess.Popen(
            [sys.executable, "-m", "proctor", "worker"],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        wait_for((root / "counter.txt.started").exists, 60, "the worker's command to start")
        ended = 0
        for _ in range(2):  # the heartbeat beats every second: end its connections twice
            ended += wait_for(lambda: _terminate_backends(url, worker.pid), 20, "a backend")
            beat = query(root, "SELECT max(heartbeat_at) FROM workers")[0][0]
            wait_for(
                lambda b=beat: query(root, "SELECT max(heartbeat_at) FROM workers")[0][0] > b,
                20,
                "the heartbeat to beat again",
            )
        (root / "go").write_text("go")
        wait_for(
            lambda: (
                query(root, "SELECT status FROM runs WHERE run_id = ?", (run_id,))[0][0] == "sealed"
            ),
            90,
            "the seal",
        )
        if worker.poll() is not None:
            bad.append(f"the worker ended (rc {worker.returncode}): {log.read_text()[-400:]}")
        listed = subprocess.run(
            [sys.executable, "-m", "proctor", "worker", "list", "--json"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if str(worker.pid) not in listed.stdout:
            bad.append(f"the worker is missing from `proctor worker list`: {listed.stdout}")
        outcome_row = query(root, "SELECT outcome FROM runs WHERE run_id = ?", (run_id,))
        outcome.final_status = f"sealed/{outcome_row[0][0]}"
        if ended < 2:
            bad.append(f"only {ended} backend(s) of the worker were ended")
        _check_once(root, run_id, outcome, a_settles=True)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    return outcome

"""Scale-out on PostgreSQL: runs per second with 1, 2 and 4 workers; list and resume latency
with few and many paused runs; how long a dead worker's run waits to be picked up.

Needs a PostgreSQL database (``PROCTOR_TEST_DATABASE_URL``, or ``--url``); every figure runs
in a fresh schema, dropped afterwards. Run as ``.venv/bin/python bench/scale.py`` (add
``--runs 20 --rounds 5`` for a quick pass). Figures on a loaded machine are noisy: compare
the columns of one run, not runs on different days. To compare with an earlier version in the
same session, put its ``src`` first: ``git archive COMMIT src/proctor | tar -x -C DIR`` and
``PYTHONPATH=DIR/src python bench/scale.py ...`` (the workers import proctor from there).

- throughput: ``--runs`` runs (an approval, a command, an echo) submitted at once, approvals
  answered by this process, until every run sealed; runs per second with N worker processes
  of ``--slots`` driver slots each, timed after every worker has registered and driven one
  untimed run per slot (its first runs import what a run needs); the
  share of the cores the workers kept busy over the whole batch and over its steady middle,
  and how long the workers' threads sat runnable waiting for a core (the machine's other load:
  on a loaded machine the share is starved, not the ceiling); where the machine's core-seconds
  went meanwhile (the workers, their backends, this bench and its backends, the server's own
  processes, other processes, interrupts, steal, idle); the workers' round trips per run and
  how long their slots waited on them, counted over the timed batch only; where a cgroup v1
  ``cpuacct`` group can be made (root), also the CPU of the workers' whole process trees: a
  run's sandboxed processes end reaped by the machine's init, not by a worker (measured: init's
  ``cutime`` grows about 10 ms a run), so their CPU reaches no worker's ``cutime``;
- listing: ``proctor history``'s page (``list_runs``) and the pending-requests page
  (``pending_requests``), first page and a deep cursor, with 100 and 10,000 paused runs among
  ``--history`` runs (default 100,000);
- resume: ``Session.resume`` of a real paused run (admit, record, drive the command, seal),
  with 100 and 10,000 other paused runs in the store;
- pickup: a worker SIGKILLs itself inside a run (test hook); the time until another worker
  has taken the run over.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.pg import schema_url  # noqa: E402
from tests.runtime.fleet.support import (  # noqa: E402
    approval_document,
    environ,
    make_workspace,
    start_worker,
)


def _stats(label: str, seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    median = statistics.median(ordered) * 1e3
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1e3
    print(f"{label:<58} median {median:9.2f} ms   p95 {p95:9.2f} ms")
    return median, p95


@contextmanager
def _schema(base: str) -> Iterator[str]:
    import psycopg

    from proctor.runtime.records.postgres import close_pools

    name = f"bench_{secrets.token_hex(5)}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    try:
        yield schema_url(base, name)
    finally:
        close_pools()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")


def _submit_runs(queue: Any, count: int) -> list[str]:
    ids = [uuid.uuid4().hex for _ in range(count)]
    for run_id in ids:
        body = {"ref": "appender", "cwd": ".", "cli_inputs": [f"line=line-{run_id}"]}
        queue.submit("start", run_id, body)
    return ids


def _answer_until_sealed(
    store: Any, queue: Any, count: int, timeout: float, tick: Callable[[], None] = lambda: None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tick()
        # one query a tick (the runs waiting for an answer, and how many sealed): the bench
        # shares the cores with the workers it measures
        rows = store._rows(
            "SELECT r.run_id, (SELECT COUNT(*) FROM runs WHERE status = 'sealed') FROM runs r"
            " WHERE r.status LIKE 'needs_%%' AND NOT EXISTS (SELECT 1 FROM submissions s"
            " WHERE s.run_id = r.run_id AND s.state IN ('queued', 'taken'))"
            " UNION ALL SELECT NULL, (SELECT COUNT(*) FROM runs WHERE status = 'sealed')"
        )
        for run_id, _ in rows:
            doc = None if run_id is None else approval_document(store, run_id)
            if doc is not None:
                queue.submit("resume", run_id, {"document": doc})
        if next(sealed for run_id, sealed in rows if run_id is None) >= count:
            return
        time.sleep(0.05)
    raise SystemExit(f"not every run sealed within {timeout:.0f} s")


_COUNTER = """
import os, signal, threading, time
try:
    import psycopg
except ImportError:
    psycopg = None
if psycopg is not None:
    _n = [0]
    _t = [0.0]
    _execute = psycopg.Cursor.execute
    _command = psycopg.Connection._exec_command
    _sync = psycopg.Pipeline.sync
    _exit = psycopg.Pipeline.__exit__

    def execute(self, *args, **kwargs):
        if self._conn._pipeline is None:
            _n[0] += 1
        return _execute(self, *args, **kwargs)

    def command(self, *args, **kwargs):
        if self._pipeline is None:
            _n[0] += 1
        return _command(self, *args, **kwargs)

    def sync(self):
        _n[0] += 1
        return _sync(self)

    def leave(self, *args):
        if self.level == 1:  # the outermost pipeline's exit syncs and waits
            _n[0] += 1
        return _exit(self, *args)

    _wait = psycopg.Connection.wait

    def wait(self, *args, **kwargs):
        if not threading.current_thread().name.startswith("proctor-slot-"):
            return _wait(self, *args, **kwargs)
        start = time.perf_counter()
        try:
            return _wait(self, *args, **kwargs)
        finally:
            _t[0] += time.perf_counter() - start

    def dump(*_):
        name = f"{os.getpid()}.{time.monotonic_ns()}"
        with open(os.path.join(os.environ["BENCH_ROUND_TRIPS"], name + ".part"), "w") as out:
            out.write(f"{_n[0]} {_t[0]}")
        os.rename(out.name, out.name[:-5])

    psycopg.Cursor.execute = execute
    psycopg.Connection._exec_command = command
    psycopg.Pipeline.sync = sync
    psycopg.Pipeline.__exit__ = leave
    psycopg.Connection.wait = wait
    signal.signal(signal.SIGUSR2, dump)
"""
"""A ``sitecustomize`` for the workers: it counts the round trips psycopg makes (a statement,
a ``BEGIN``/``COMMIT``, a pipeline's sync) and the time the driver slots spend waiting on them,
and writes both at each ``SIGUSR2`` (the bench sends one as its timed batch starts and one as it
ends: warm-up runs, idle polls after the batch and the worker's exit are not counted)."""


def _counters(procs: list[Any], folder: Path) -> dict[int, tuple[int, float]]:
    """Each worker's round trips and slot seconds in round trips so far (``SIGUSR2``)."""
    seen = {f.name for f in folder.iterdir()}
    for proc in procs:
        proc.send_signal(signal.SIGUSR2)
    found: dict[int, tuple[int, float]] = {}
    deadline = time.monotonic() + 30
    while len(found) < len(procs) and time.monotonic() < deadline:
        for f in folder.iterdir():
            if f.name not in seen and not f.name.endswith(".part"):
                count, seconds = f.read_text().split()
                found[int(f.name.split(".")[0])] = (int(count), float(seconds))
        time.sleep(0.01)
    if len(found) < len(procs):
        raise SystemExit("a worker did not report its round trips")
    return found


def _cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and its waited-for children, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _run_queue_wait(pid: int) -> float:
    """Seconds the threads of a process (those alive now) spent runnable but waiting for a
    core, from ``/proc/PID/task/*/schedstat`` (0 where the kernel does not keep it)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with suppress(OSError, IndexError, ValueError):
            total += int((task / "schedstat").read_text().split()[1])
    return total / 1e9


def _backend_cpu(store: Any, name: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend whose connection carries ``application_name``
    ``name`` (the workers' connections: libpq reads ``PGAPPNAME``), when the server runs on
    this machine (a backend's ``/proc`` entry is readable); empty otherwise."""
    found = {}
    for (pid,) in store._rows(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
    ):
        with suppress(OSError):
            found[int(pid)] = _cpu_seconds(int(pid))
    return found


def _machine_cpu() -> tuple[float, float, float, float]:
    """Core-seconds since boot, from ``/proc/stat``: the machine busy in processes (user and
    system time), idle (``iowait`` included), in interrupts (hard and soft: loopback packets
    and disk completions, which no process is charged for) and stolen by the hypervisor."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (
        (user + nice + system) / tick,
        (idle + iowait) / tick,
        (irq + softirq) / tick,
        steal / tick,
    )


def _own_cpu() -> float:
    """CPU seconds of this process (every thread)."""
    times = os.times()
    return times.user + times.system


def _server_background(store: Any) -> list[int]:
    """Process ids of the PostgreSQL server's own processes (WAL writer, checkpointer,
    autovacuum...), when the server runs on this machine."""
    return [
        int(r[0])
        for r in store._rows(
            "SELECT pid FROM pg_stat_activity WHERE backend_type <> 'client backend'"
        )
    ]


def _cpu_of(pids: list[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        with suppress(OSError):
            found[pid] = _cpu_seconds(pid)
    return found


def _ready(store: Any, workers: int, timeout: float = 120) -> None:
    """Wait until ``workers`` workers have registered (their imports are not the runs' time)."""
    deadline = time.monotonic() + timeout
    while store._rows("SELECT COUNT(*) FROM workers")[0][0] < workers:
        if time.monotonic() > deadline:
            raise SystemExit(f"{workers} workers did not start within {timeout:.0f} s")
        time.sleep(0.05)
    time.sleep(0.5)  # the first upkeep and heartbeat are not the runs' time either


_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


@contextmanager
def _tree_account(pids: list[int]) -> Iterator[Callable[[], float | None]]:
    """CPU seconds of the whole process trees of ``pids`` from here on, orphans included: a
    command a run starts may be reparented to the machine's init (a sandbox's double fork, a
    ``setsid``), and then its CPU reaches no worker's ``cutime``. A cgroup v1 ``cpuacct``
    group counts every process that ever joined it, and children join their parent's. Yields a
    reader (``None`` when no such group can be made here: not root, cgroup v2 only)."""
    group = _CPUACCT / f"proctor-bench-{secrets.token_hex(4)}"
    try:
        group.mkdir()
        for pid in pids:
            (group / "cgroup.procs").write_text(f"{pid}\n")
    except OSError:
        yield lambda: None
        return

    def read() -> float | None:
        return int((group / "cpuacct.usage").read_text()) / 1e9

    try:
        yield read
    finally:
        parent = group.parent / "cgroup.procs"
        with suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():
                with suppress(OSError):
                    parent.write_text(f"{pid}\n")
        with suppress(OSError):
            group.rmdir()


def _share_line(label: str, seconds: float, cpu: float, cores: int) -> str:
    return f"{label:<58} {cpu / seconds / cores:7.0%}"


def throughput(base: str, runs: int, workers: int, slots: int = 1) -> float:
    """Runs per second, submission to seal, with ``workers`` worker processes of ``slots``
    driver slots each (``proctor worker --concurrency``); also the share of the machine's cores
    the workers kept busy (runs/s x worker CPU per run / cores: the CPU ceiling's share), and
    the same share counting the database backends serving the workers too (the server on this
    machine; its own background processes are not counted).

    The share is printed for the whole batch (submission of the first run to the seal of the
    last: it includes the ramp up and the tail, when fewer runs are in flight than slots) and
    for its steady middle (the CPU the same processes used from 20% to 80% of the elapsed time,
    over that time): the same definition, CPU seconds over wall seconds over cores, on a window
    where every slot has work."""
    from proctor.runtime.fleet.queue import WorkQueue
    from proctor.runtime.records.postgres import PostgresRunStore

    with tempfile.TemporaryDirectory() as tmp, _schema(base) as url:
        root = Path(tmp) / "ws"
        root.mkdir()
        make_workspace(root)
        counts = Path(tmp) / "round-trips"
        counts.mkdir()
        (Path(tmp) / "sitecustomize.py").write_text(_COUNTER)
        # an earlier tree to compare with comes first on PYTHONPATH (see the module's note)
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), tmp) if p)
        env = environ(root, url) | {"PYTHONPATH": path, "BENCH_ROUND_TRIPS": str(counts)}
        env["PGAPPNAME"] = app = f"proctor-bench-{secrets.token_hex(4)}"
        # an installed copy has its bytecode compiled: the workers may write it (the first
        # worker's warm-up does), so no run pays for compiling proctor's modules
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        # this process's own connections carry a name of their own, so the CPU of the
        # backends serving the bench (its approver and sampler) is counted apart
        bench_app, was = f"{app}-bench", os.environ.get("PGAPPNAME")
        os.environ["PGAPPNAME"] = bench_app
        store = PostgresRunStore(url)
        queue = WorkQueue(store)
        procs = [start_worker(root, env, concurrency=slots) for _ in range(workers)]
        warm = workers * slots
        samples: list[tuple[float, float, float]] = []  # (time, worker CPU, backends' CPU)
        backends: list[int] = []
        looked = [0.0]

        def sample() -> None:
            # the backends' list is asked for twice a second, their CPU read every tick: a
            # query of pg_stat_activity per tick was the bench's own load on the cores
            if time.monotonic() - looked[0] > 0.5:
                backends[:] = list(_backend_cpu(store, app))
                looked[0] = time.monotonic()
            db = sum(_cpu_of(backends).values())
            samples.append((time.monotonic(), sum(_cpu_seconds(p.pid) for p in procs), db))

        tree_cpu = ExitStack()
        try:
            tree = tree_cpu.enter_context(_tree_account([p.pid for p in procs]))
            _ready(store, workers)
            # one run per slot first, not timed: each worker's first runs import what a run
            # needs, which a worker that has been up a while has done long ago
            _submit_runs(queue, warm)
            _answer_until_sealed(store, queue, warm, 600)
            cpu_before = sum(_cpu_seconds(p.pid) for p in procs)
            tree_before = tree()
            queued_before = sum(_run_queue_wait(p.pid) for p in procs)
            trips_before = _counters(procs, counts)
            db_before = _backend_cpu(store, app)
            background = _server_background(store)
            bench_before = _own_cpu(), sum(_backend_cpu(store, bench_app).values())
            background_before = sum(_cpu_of(background).values())
            load = os.getloadavg()[0]
            machine_before = _machine_cpu()
            started = time.monotonic()
            _submit_runs(queue, runs)
            _answer_until_sealed(store, queue, warm + runs, 600, sample)
            elapsed = time.monotonic() - started
            machine_after = _machine_cpu()
            trips_after = _counters(procs, counts)
            bench_after = _own_cpu(), sum(_backend_cpu(store, bench_app).values())
            background_cpu = sum(_cpu_of(background).values()) - background_before
            cpu = sum(_cpu_seconds(p.pid) for p in procs) - cpu_before
            tree_after = tree()
            queued = sum(_run_queue_wait(p.pid) for p in procs) - queued_before
            db_after = _backend_cpu(store, app)
            db_cpu = sum(t - db_before.get(pid, 0.0) for pid, t in db_after.items())
            load = max(load, os.getloadavg()[0])
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(60)
            tree_cpu.close()
            if was is None:
                os.environ.pop("PGAPPNAME", None)
            else:
                os.environ["PGAPPNAME"] = was
        trips = sum(n - trips_before[pid][0] for pid, (n, _) in trips_after.items())
        waited = sum(t - trips_before[pid][1] for pid, (_, t) in trips_after.items())
    rate = runs / elapsed
    cores = os.cpu_count() or 1
    share = rate * (cpu / runs) / cores
    what = f"{workers} worker(s) x {slots} slot(s), {runs} runs"
    print(f"{f'throughput, {what}':<58} {rate:9.2f} runs/s   (1-min load {load:.1f})")
    print(
        f"{f'  worker CPU per run, share of {cores} cores kept busy':<58}"
        f" {cpu / runs * 1000:7.1f} ms {share:7.0%}"
    )
    if tree_before is not None and tree_after is not None:
        whole = tree_after - tree_before
        print(
            f"{'  the workers with every process their runs started (cgroup)':<58}"
            f" {whole / runs * 1000:7.1f} ms {rate * (whole / runs) / cores:7.0%}"
        )
        cpu_tree = whole
    else:
        cpu_tree = cpu
    both = rate * ((cpu + db_cpu) / runs) / cores
    print(
        f"{'  + database backends CPU per run, share with them':<58}"
        f" {(cpu + db_cpu) / runs * 1000:7.1f} ms {both:7.0%}"
    )
    first = min(samples, key=lambda s: abs(s[0] - (started + 0.2 * elapsed)))
    last = min(samples, key=lambda s: abs(s[0] - (started + 0.8 * elapsed)))
    if last[0] - first[0] > 0.5:
        window = last[0] - first[0]
        print(
            _share_line(
                "  steady middle (20-80% of the time): workers' share",
                window,
                last[1] - first[1],
                cores,
            )
        )
        print(
            _share_line(
                "  steady middle: share with the database backends",
                window,
                last[1] - first[1] + last[2] - first[2],
                cores,
            )
        )
    print(
        f"{'  workers runnable but waiting for a core, per run':<58}"
        f" {queued / runs * 1000:7.1f} ms (the machine's other load)"
    )
    print(f"{'  yardstick: the CPU ceiling, every core busy':<58} {1:7.0%}")
    busy, idle, interrupts, stolen = (
        a - b for a, b in zip(machine_after, machine_before, strict=True)
    )
    whole = busy + idle + interrupts + stolen
    bench_cpu = bench_after[0] - bench_before[0]
    bench_db = bench_after[1] - bench_before[1]
    rest = busy - cpu_tree - db_cpu - bench_cpu - bench_db - background_cpu
    print("  where the cores went over the batch (shares of the machine's core-seconds):")
    for label, part in (
        ("the workers", cpu),
        ("processes their runs started, reaped by init (cgroup)", cpu_tree - cpu),
        ("the database backends serving them", db_cpu),
        ("this bench (approver, sampler)", bench_cpu),
        ("the database backends serving this bench", bench_db),
        ("the server's own processes (WAL writer, checkpointer...)", background_cpu),
        ("every other process on the machine (other load)", rest),
        ("interrupts (loopback packets, disk completions)", interrupts),
        ("stolen by the hypervisor", stolen),
        ("idle (iowait included)", idle),
    ):
        print(f"    {label:<56} {part / whole:7.0%}")
    label = "  worker round trips to PostgreSQL per run (idle polls too)"
    print(f"{label:<58} {trips / runs:9.1f}")
    label = "  time the driver slots waited on those round trips, per run"
    print(f"{label:<58} {waited / runs * 1000:7.1f} ms")
    return rate


def _pad(store: Any, history: int, paused: int) -> None:
    """``history`` synthetic runs, the newest ``paused`` of them waiting on an approval."""
    now = "2026-01-01T00:00:00+00:00"
    with store.connection() as conn:
        conn.execute(
            "INSERT INTO runs (run_id, skill, method, status, created_at, updated_at, data)"
            " SELECT 'pad' || g, 'pad', 'main', CASE WHEN g > %s::int THEN 'needs_approval'"
            " ELSE 'sealed' END, %s, %s, '{}' FROM generate_series(1, %s::int) g",
            (history - paused, now, now, history),
        )
        conn.execute(
            "INSERT INTO requests (run_id, address, kind, request_digest, body, state)"
            " SELECT 'pad' || g, 'steps.confirm', 'approval', 'sha256:pad', '{}', 'open'"
            " FROM generate_series(%s::int, %s::int) g",
            (history - paused + 1, history),
        )
        conn.execute("ANALYZE")


def listing_and_resume(base: str, history: int, paused: int, rounds: int) -> dict[str, float]:
    """List and resume latency with ``paused`` paused runs among ``history`` runs."""
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.fleet.queue import WorkQueue
    from proctor.runtime.records.postgres import PostgresRunStore

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, _schema(base) as url:
        root = Path(tmp) / "ws"
        root.mkdir()
        make_workspace(root)
        env = environ(root, url)
        store = PostgresRunStore(url)
        queue = WorkQueue(store)
        real = _submit_runs(queue, rounds)
        proc = start_worker(root, env, concurrency=2)
        try:
            deadline = time.monotonic() + 300
            while store._rows("SELECT COUNT(*) FROM submissions WHERE state = 'done'")[0][
                0
            ] < rounds and (time.monotonic() < deadline):
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        _pad(store, history, paused)
        tag = f"{paused:,} paused of {history:,} runs"

        def timed(label: str, fn: Callable[[], Any], n: int = 50) -> None:
            fn()
            samples = []
            for _ in range(n):
                start = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - start)
            figures[label] = _stats(f"{label} ({tag})", samples)[0]

        middle = store.list_runs(limit=1)[0].cursor // 2
        timed("history page, newest", lambda: store.list_runs(limit=20))
        timed("history page, deep cursor", lambda: store.list_runs(after=middle, limit=20))
        deep = store.pending_requests(limit=paused // 2)[-1].cursor
        timed("pending page, first", lambda: store.pending_requests(limit=50))
        timed("pending page, deep cursor", lambda: store.pending_requests(after=deep, limit=50))
        old = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            samples = []
            for run_id in real:
                session = Session(Workspace.discover(root), environ=env)
                doc = approval_document(store, run_id)
                start = time.perf_counter()
                envelope = session.resume(run_id, doc or {})
                samples.append(time.perf_counter() - start)
                session.close()
                assert envelope.status == "sealed", envelope.status
            figures["resume"] = _stats(f"resume to seal ({tag})", samples)[0]
        finally:
            os.environ.clear()
            os.environ.update(old)
    return figures


def pickup(base: str) -> float:
    """Seconds from a worker's death inside a run to another worker taking the run over."""
    from proctor.runtime.fleet.queue import WorkQueue
    from proctor.runtime.records.postgres import PostgresRunStore

    with tempfile.TemporaryDirectory() as tmp, _schema(base) as url:
        root = Path(tmp) / "ws"
        root.mkdir()
        make_workspace(root)
        env = environ(root, url)
        store = PostgresRunStore(url)
        queue = WorkQueue(store)
        survivor = start_worker(root, env)
        (run_id,) = _submit_runs(queue, 1)
        try:
            while store.get_run(run_id) is None or not store.get_run(run_id).status.startswith(
                "needs_"
            ):
                time.sleep(0.05)
            survivor.send_signal(signal.SIGTERM)
            survivor.wait(60)
            doomed_env = env | {"PROCTOR_TEST_HOOKS": "1", "PROCTOR_TEST_KILL_AT": "step.start:1"}
            doomed = start_worker(root, doomed_env)
            queue.submit("resume", run_id, {"document": approval_document(store, run_id)})
            doomed.wait(120)
            died = time.monotonic()
            survivor = start_worker(root, env)
            while store.get_run(run_id).status != "sealed":  # type: ignore[union-attr]
                time.sleep(0.05)
            picked = time.monotonic() - died
        finally:
            survivor.send_signal(signal.SIGTERM)
            survivor.wait(60)
    print(f"{'dead worker run picked up and sealed':<58} {picked:9.2f} s")
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", default=os.environ.get("PROCTOR_TEST_DATABASE_URL"))
    parser.add_argument("--runs", type=int, default=60, help="runs per throughput figure")
    parser.add_argument("--history", type=int, default=100_000, help="runs in the listing store")
    parser.add_argument("--rounds", type=int, default=10, help="resumes timed per figure")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument(
        "--slots", type=int, default=1, help="driver slots per worker (--concurrency)"
    )
    parser.add_argument(
        "--throughput-only", action="store_true", help="only the runs/s and CPU-share figures"
    )
    args = parser.parse_args()
    if not args.url:
        raise SystemExit("set PROCTOR_TEST_DATABASE_URL (or --url) to a PostgreSQL database")
    counts = [int(n) for n in args.workers.split(",") if n]
    rates = {n: throughput(args.url, args.runs, n, args.slots) for n in counts}
    if args.throughput_only:
        print(json.dumps({"runs_per_second": rates}))
        return
    few = listing_and_resume(args.url, args.history, 100, args.rounds)
    many = listing_and_resume(args.url, args.history, 10_000, args.rounds)
    for label in few:
        print(f"{label:<58} x{many[label] / few[label]:.2f} from 100 to 10,000 paused")
    took = pickup(args.url)
    print(json.dumps({"runs_per_second": rates, "few": few, "many": many, "pickup_s": took}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One governed call: a one-step run (``echo``) beside its floor, and the syncs it makes.

  syncs       counted with ``strace -f -e trace=fsync,fdatasync,sync_file_range,msync`` (when
              strace is installed): a ``proctor run`` of the one-step skill in a fresh process
              (after a first run made the key, the stores and the day's receipt pack), and one
              more run in a process that already ran one (``Session.run`` twice, the second
              counted); each sync is listed with the file it synced.
  cpu         ``Session.run`` of the skill in process, ``--runs`` times (median and p95 of the
              CPU time of one run), against the floor: one fsync of a small appended file, one
              Ed25519 signature of a receipt-sized body and one SQLite commit (WAL,
              synchronous=FULL) of a row, timed the same way, once the skill's files are
              older than the racily-clean window (3 s: a package changed within it is read
              and hashed again at every run). Target: a run <= 8x the floor's CPU and
              <= 3 syncs.
  --parts     where the CPU goes (after the ratio): the floor's three parts (each timed apart
              in the yardstick's samples), and the CPU a run spends inside its syncs, its
              Ed25519 signatures and its SQLite statements (each call wrapped and timed in
              this process), the rest (Python), and its system time. The ratio moves with
              the machine: the floor is mostly system time and native code (the fsyncs,
              the signature), the run mostly Python, and machines differ in both.

    .venv/bin/python bench/one_step.py [--runs 200] [--parts]

A benchmark, not a test: it asserts nothing but that runs sealed. The machine may be shared:
read the ratio, not the milliseconds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SKILL_MD = "---\nname: one\ndescription: One echo step, for the benchmark.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: s0
        tool: echo
        inputs: {text: hello}
"""
SYNCS = "fsync,fdatasync,sync_file_range,msync"


def workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="proctor-one-"))
    (root / ".proctor").mkdir()
    (root / "skills" / "one").mkdir(parents=True)
    (root / "skills" / "one" / "SKILL.md").write_text(SKILL_MD)
    (root / "skills" / "one" / "run.yaml").write_text(RUN_YAML)
    return root


def settled(root: Path) -> None:
    """Wait until the skill's files are older than the racily-clean window
    (:data:`proctor.runtime.skill_files.RACY_NS`): a session re-reads and hashes again, at
    every run, a package changed less than that before (a write might share the clock's
    tick), and a workspace's skill is not written just before each run."""
    from proctor.runtime.skill_files import RACY_NS

    folder = root / "skills" / "one"
    newest = max(
        max(st.st_mtime_ns, st.st_ctime_ns)
        for st in (p.stat() for p in (folder, *folder.iterdir()))
    )
    wait = newest + RACY_NS - time.time_ns()
    if wait > 0:
        time.sleep(wait / 1e9 + 0.1)


def environ(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(root / ".home")
    return env


def _syncs(trace: Path, after: str | None = None, before: str | None = None) -> list[str]:
    """The sync calls of an strace log (from the line naming ``after`` on and up to the line
    naming ``before``, when given)."""
    lines = trace.read_text().splitlines()
    if after is not None:
        start = next((n for n, line in enumerate(lines) if after in line), len(lines))
        lines = lines[start:]
    if before is not None:
        end = next((n for n, line in enumerate(lines) if before in line), len(lines))
        lines = lines[:end]
    names = SYNCS.split(",")
    out = []
    for line in lines:
        call = line.split(None, 1)[-1]
        if any(call.startswith(name + "(") for name in names):
            out.append(call.split(")")[0] + ")")
    return out


def cli_syncs(root: Path) -> list[str] | None:
    proctor = Path(sys.executable).with_name("proctor")
    env = environ(root)
    argv = [str(proctor), "run", "one", "--json"]
    subprocess.run(argv, cwd=root, env=env, check=True, capture_output=True)
    trace = root / "cli.strace"
    traced = ["strace", "-f", "-y", "-e", f"trace={SYNCS}", "-o", str(trace), *argv]
    subprocess.run(traced, cwd=root, env=env, check=True, capture_output=True)
    return _syncs(trace)


IN_PROCESS = """
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
import one_step
root = Path(sys.argv[1])
s = Session(Workspace(root), environ=one_step.environ(root))
assert s.run("one", cwd=root).status == "sealed"
open(root / "MARK-second-run", "w").close()
assert s.run("one", cwd=root).status == "sealed"
open(root / "MARK-close", "w").close()
s.close()
"""


def in_process_syncs(root: Path) -> tuple[list[str], list[str]]:
    trace = root / "session.strace"
    argv = [sys.executable, "-c", IN_PROCESS, str(root), str(HERE)]
    traced = ["strace", "-f", "-y", "-e", f"trace=openat,{SYNCS}", "-o", str(trace), *argv]
    subprocess.run(traced, check=True, capture_output=True)
    # the store's close (its checkpoint) is the process's, not the run's: counted apart
    return _syncs(trace, "MARK-second-run", "MARK-close"), _syncs(trace, "MARK-close")


FLOOR_PARTS = ("fsync", "sign", "commit")


def floor_samples(root: Path, n: int) -> list[tuple[float, float, float]]:
    """``n`` samples of the floor, each as the CPU of its parts (:data:`FLOOR_PARTS`)."""
    from proctor.receipts.signing import signer_from_seed

    signer = signer_from_seed(bytes(range(32)))
    body = b'{"pad":"' + b"x" * 600 + b'"}'
    conn = sqlite3.connect(str(root / "floor.sqlite"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT)")
    fd = os.open(root / "floor.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    out = []
    try:
        for _ in range(n):
            cpu = time.process_time()
            os.write(fd, body + b"\n")
            os.fsync(fd)
            synced = time.process_time()
            signer.sign(body)
            signed = time.process_time()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (body) VALUES (?)", (body.decode(),))
            conn.execute("COMMIT")
            out.append((synced - cpu, signed - synced, time.process_time() - signed))
    finally:
        os.close(fd)
        conn.close()
    return out


def run_samples(root: Path, n: int) -> list[float]:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    session = Session(Workspace(root), environ=environ(root))
    try:
        for _ in range(5):  # imports, first-use caches, the key and the day's pack
            assert session.run("one", cwd=root).status == "sealed"
        out = []
        for _ in range(n):
            cpu = time.process_time()
            envelope = session.run("one", cwd=root)
            out.append(time.process_time() - cpu)
            assert envelope.status == "sealed" and envelope.outcome == "completed"
        return out
    finally:
        session.close()


def _timed(spent: dict[str, float], kind: str, fn: Any) -> Any:
    """``fn``, adding the CPU spent inside each of its calls to ``spent[kind]`` (a function,
    so that as a class's attribute it binds as the method it wraps)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        cpu = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[kind] += time.process_time() - cpu

    return call


class _TimedConnection:
    """The store's SQLite connection with its statements timed (``execute``, ``executemany``)."""

    def __init__(self, conn: sqlite3.Connection, spent: dict[str, float]) -> None:
        self._conn = conn
        self.execute = _timed(spent, "sqlite", conn.execute)
        self.executemany = _timed(spent, "sqlite", conn.executemany)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def run_parts(root: Path, n: int) -> tuple[dict[str, float], float, float]:
    """The mean CPU a run spends inside its syncs, signatures and SQLite statements, its mean
    CPU in all, and its mean system time, over ``n`` runs (after warm-up)."""
    import resource

    from proctor.receipts.signing import Signer
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    spent = {"syncs": 0.0, "signatures": 0.0, "sqlite": 0.0}
    saved = os.fsync, os.fdatasync, Signer.sign
    session = Session(Workspace(root), environ=environ(root))
    try:
        for _ in range(5):
            assert session.run("one", cwd=root).status == "sealed"
        os.fsync = _timed(spent, "syncs", os.fsync)
        os.fdatasync = _timed(spent, "syncs", os.fdatasync)
        Signer.sign = _timed(spent, "signatures", Signer.sign)  # type: ignore[method-assign]
        store: Any = session.store
        store._conn = _TimedConnection(store._conn, spent)
        before = resource.getrusage(resource.RUSAGE_SELF)
        cpu = time.process_time()
        for _ in range(n):
            assert session.run("one", cwd=root).status == "sealed"
        total = (time.process_time() - cpu) / n
        after = resource.getrusage(resource.RUSAGE_SELF)
        store._conn = store._conn._conn
    finally:
        os.fsync, os.fdatasync, Signer.sign = saved  # type: ignore[method-assign]
        session.close()
    return {k: v / n for k, v in spent.items()}, total, (after.ru_stime - before.ru_stime) / n


def show_parts(root: Path, n: int, floor: list[tuple[float, float, float]]) -> None:
    medians = [statistics.median(part) for part in zip(*floor, strict=True)]
    whole = sum(medians)
    print("the floor's parts (median CPU of each, over the yardstick's samples):")
    for name, cpu in zip(FLOOR_PARTS, medians, strict=True):
        print(f"  {name:<42} {cpu * 1e3:7.3f} ms  ({cpu / whole:4.0%})")
    spent, total, system = run_parts(root, n)
    print(f"where a run's CPU goes (mean of {n} runs, {total * 1e3:.3f} ms each):")
    labels = {
        "syncs": "inside its syncs (pack, audit log)",
        "signatures": "inside its Ed25519 signatures",
        "sqlite": "inside its SQLite statements",
    }
    for name, cpu in spent.items():
        print(f"  {labels[name]:<42} {cpu * 1e3:7.3f} ms  ({cpu / total:4.0%})")
    rest = total - sum(spent.values())
    print(f"  {'the rest (Python)':<42} {rest * 1e3:7.3f} ms  ({rest / total:4.0%})")
    label = "system time, of all the above"
    print(f"  {label:<42} {system * 1e3:7.3f} ms  ({system / total:4.0%})")


def _show(label: str, samples: list[float], floor: list[float]) -> None:
    ordered = sorted(samples)
    median = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    ratio = median / statistics.median(floor)
    print(f"{label:<44} cpu median {median * 1e3:7.3f} ms  p95 {p95 * 1e3:7.3f} ms  {ratio:5.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--parts", action="store_true", help="where the CPU goes (see above)")
    args = ap.parse_args()
    print(f"loadavg {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    if shutil.which("strace"):
        root = workspace()
        try:
            cli = cli_syncs(root)
            print(f"syncs of `proctor run` (a fresh process): {len(cli)}")
            for line in cli:
                print(f"  {line.replace(str(root), '<ws>')}")
            session, closing = in_process_syncs(root)
            print(f"syncs of a second run in one process: {len(session)}")
            for line in session:
                print(f"  {line.replace(str(root), '<ws>')}")
            print(f"syncs of that process's store close (its checkpoint): {len(closing)}")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    else:
        print("syncs: strace is not installed (apt-get install strace)")
    root = workspace()
    try:
        settled(root)  # the runs measured are of a package at rest, as a workspace's is
        parts: list[tuple[float, float, float]] = []
        runs: list[float] = []
        for _ in range(4):  # in turns, so both see the same load
            parts += floor_samples(root, args.runs // 4)
            runs += run_samples(root, args.runs // 4)
        floor = [sum(sample) for sample in parts]
        _show("yardstick: fsync + sign + SQLite commit", floor, floor)
        _show("one-step run (Session.run, echo)", runs, floor)
        if args.parts:
            show_parts(root, args.runs, parts)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

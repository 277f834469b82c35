"""The crash-injection harness: kill -9 a real driver at named points, drive again, check.

A scenario is a list of driver invocations (``proctor run`` then ``proctor resume``), each a
real subprocess of the venv's Python. A first clean pass with ``PROCTOR_TEST_TRACE`` records
every kill point each invocation passes (``<point>:<n>``): the run's start (checked, the key
and the store created, validated, inside the start's transaction, committed), each step and
call, pauses and the seal. Then, for each point, the harness starts over in a fresh workspace,
replays the invocations before it, runs that invocation with ``PROCTOR_TEST_KILL_AT`` (the
process SIGKILLs itself there), and drives the run again the way a careful person would: when
no run exists, the same ``proctor run`` again; else ``{}`` first (a recorded decision must be
used, not asked again), an approval where one is asked, and for a retry request
``retry: true`` only when the counter file shows the command did not run. Kills inside a file
bundle use the bundle's own hook.

A :class:`Case` is one skill and one way to start it: ``crashy`` (a bundle, an approval and a
command; no inputs) and ``inputful`` (its inputs name the file it writes and the text it
writes; given with ``-i`` or ``--inputs``, or invalid so that the start is refused).

After each kill it checks the invariants: no run exists without its inputs (every run in the
store holds exactly the inputs it was started with, or the refusal of its start); the files
are all at their before-images or all at their after-images (never half-written); then, once
driven again, the run ends sealed with the case's outcome, exactly one run exists, the command
ran at most once (exactly once when completed, never when the start was refused), the result
carries the inputs, a decision recorded before the kill was not asked for again, and the audit
log verifies against every anchor (``proctor audit verify``).

The same scenarios run on either run store: ``backend="postgres"`` gives each workspace its own
fresh PostgreSQL schema (its URL kept in the workspace's ``.pg_url`` and passed to every
invocation as ``PROCTOR_DATABASE_URL``), dropped once the scenarios end.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

SKILL_MD = """---
name: {name}
description: Steps with effects, an approval and a command, for crash tests.
---
Nothing for an agent here.
"""

CRASHY = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: read
        tool: fs.read
        inputs: {path: b.txt}
      - id: bundle
        tool: fs.apply_bundle
        inputs:
          changes:
            - {op: create, path: a.txt, content: "A after\\n"}
            - {op: replace, path: b.txt, content: "B after\\n",
               expected_digest: $steps.read.content_digest}
            - {op: create, path: c.txt, content: "C after\\n"}
      - id: confirm
        ask: {reason: Run the counter?}
      - id: count
        tool: command.execute
        inputs: {argv: [PYTHON, tools/count.py, counter.txt]}
      - id: finish
        tool: echo
        inputs: {text: done}
"""

INPUTFUL = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties:
        name: {type: string}
        text: {type: string}
      required: [name, text]
    steps:
      - id: write
        tool: fs.write
        inputs: {path: $input.name, content: $input.text, create: true}
      - id: confirm
        ask: {reason: Run the counter?}
      - id: count
        tool: command.execute
        inputs: {argv: [PYTHON, tools/count.py, counter.txt]}
      - id: finish
        tool: echo
        inputs: {text: $input.text}
    result_from: [finish]
"""

NESTED = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: before
        tool: echo
        inputs: {text: parent}
      - id: call
        skill: crashy
      - id: after
        tool: echo
        inputs: {text: $steps.call.text}
"""

SEALER = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: say
        tool: echo
        inputs: {text: sealed}
"""

COUNTER = """import sys, pathlib
p = pathlib.Path(sys.argv[1])
n = int(p.read_text()) if p.exists() else 0
p.write_text(str(n + 1))
"""

FLAVOURS = {"allow": [], "ask": ["--run-authority", '{"effects": "ask"}']}
"""Host authorities: ``ask`` adds a floor approval before each change and the command."""

TEXT = "written from the run's inputs"


@dataclass(frozen=True)
class Case:
    """One skill and one way to start it, with what a completed run leaves."""

    name: str
    run_args: tuple[str, ...]
    before: dict[str, str | None]
    after: dict[str, str | None]
    inputs: dict[str, Any] | None
    """The inputs every run of the case must hold; ``None``: the start is refused."""
    outcome: str = "completed"
    runs: int = 1
    """How many runs a driven case leaves in the store (a parent and its child: 2)."""
    every: int = 1
    """Kill at every ``every``-th recorded point (the bundle's members always): a case whose
    points repeat another case's (the nested one drives ``crashy`` as a child; ``-i`` and
    ``--inputs`` start the same skill) samples them, and its twin takes the other half
    (``offset``), so every point is killed in one of the two on every run of the suite."""
    offset: int = 0
    start_whole: bool = False
    """Kill at every start point even when sampling (where the twins differ: how inputs come)."""


CASES = {
    "crashy": Case(
        "crashy",
        ("crashy",),
        {"a.txt": None, "b.txt": "B before\n", "c.txt": None},
        {"a.txt": "A after\n", "b.txt": "B after\n", "c.txt": "C after\n"},
        {},
    ),
    "nested": Case(
        "nested",
        ("nested",),
        {"a.txt": None, "b.txt": "B before\n", "c.txt": None},
        {"a.txt": "A after\n", "b.txt": "B after\n", "c.txt": "C after\n"},
        {},
        runs=2,
        every=2,
    ),
    "inputs-i": Case(
        "inputs-i",
        ("inputful", "-i", "name=out.txt", "-i", f"text={TEXT}"),
        {"out.txt": None},
        {"out.txt": TEXT},
        {"name": "out.txt", "text": TEXT},
        every=2,
        start_whole=True,
    ),
    "inputs-json": Case(
        "inputs-json",
        ("inputful", "--inputs", "inputs.json"),
        {"out.txt": None},
        {"out.txt": TEXT},
        {"name": "out.txt", "text": TEXT},
        every=2,
        offset=1,
        start_whole=True,
    ),
    "inputs-refused": Case(
        "inputs-refused",
        ("inputful", "-i", "name=out.txt"),
        {"out.txt": None},
        {"out.txt": None},
        None,
        outcome="blocked",
    ),
}


@dataclass
class Outcome:
    """What one kill scenario found."""

    point: str
    final_status: str
    violations: list[str] = field(default_factory=list)


_SCHEMAS: list[str] = []


def make(root: Path, case: Case, backend: str = "sqlite") -> None:
    """A fresh workspace holding both skills, with the case's files at their before-images
    (and, on PostgreSQL, a fresh schema of its own)."""
    if root.exists():
        shutil.rmtree(root)
    (root / ".proctor").mkdir(parents=True)
    if backend == "postgres":
        (root / ".pg_url").write_text(_new_schema())
    (root / "tools").mkdir()
    (root / "tools" / "count.py").write_text(COUNTER)
    (root / "inputs.json").write_text(json.dumps({"name": "out.txt", "text": TEXT}))
    for name, text in case.before.items():
        if text is not None:
            (root / name).write_text(text)
    skills = (("crashy", CRASHY), ("inputful", INPUTFUL), ("sealer", SEALER), ("nested", NESTED))
    for name, run_yaml in skills:
        skill = root / "skills" / name
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL_MD.format(name=name))
        (skill / "run.yaml").write_text(run_yaml.replace("PYTHON", json.dumps(sys.executable)))


def _new_schema() -> str:
    import secrets

    import psycopg

    from tests.pg import base_url, schema_url

    schema = f"crash_{secrets.token_hex(6)}"
    with psycopg.connect(base_url(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    _SCHEMAS.append(schema)
    return schema_url(base_url(), schema)


def drop_schemas() -> None:
    """Drop every schema the scenarios made."""
    import psycopg

    from tests.pg import base_url

    with psycopg.connect(base_url(), autocommit=True) as conn:
        while _SCHEMAS:
            conn.execute(f"DROP SCHEMA IF EXISTS {_SCHEMAS.pop()} CASCADE")


def _pg_url(root: Path) -> str | None:
    marker = root / ".pg_url"
    return marker.read_text() if marker.exists() else None


def proctor(
    root: Path, args: list[str], *, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in ``root`` (test hooks on, no kill unless ``env`` asks)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")} | {
        "PROCTOR_HOME": str(root / ".home"),
        "PROCTOR_TEST_HOOKS": "1",
    }
    url = _pg_url(root)
    if url:
        full["PROCTOR_DATABASE_URL"] = url
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=root,
        env=full,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def stored_runs(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every run the store holds (run id, data), read with SQLite (or psycopg) itself."""
    url = _pg_url(root)
    if url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as pg:
            table = pg.execute("SELECT to_regclass('runs')").fetchone()
            if table is None or table[0] is None:  # killed before the store was opened
                return []
            found = pg.execute("SELECT run_id, data FROM runs ORDER BY cursor").fetchall()
        return [(r[0], json.loads(r[1])) for r in found]
    path = root / ".proctor" / "runs.sqlite"
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT run_id, data FROM runs ORDER BY cursor").fetchall()
    finally:
        conn.close()
    return [(r[0], json.loads(r[1])) for r in rows]


def inputs_violations(root: Path, case: Case, point: str) -> list[str]:
    """A run without the inputs it was started with (or without the refusal of its start)."""
    out = []
    for run_id, data in stored_runs(root):
        if case.inputs is None:
            if not isinstance(data.get("start_blocked"), dict) or "inputs" in data:
                out.append(f"{point}: run {run_id} exists without its start's refusal")
        elif data.get("inputs") != case.inputs or not data.get("inputs_digest"):
            out.append(f"{point}: run {run_id} exists without its inputs: {data.get('inputs')}")
    return out


def _approve_all(envelope: dict[str, Any], root: Path) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for request in envelope.get("requests") or []:
        entry: dict[str, Any] = {"request_digest": request["request_digest"]}
        if request["kind"] == "approval":
            entry.update({"approved": True, "reason": "crash harness"})
        elif request["kind"] == "retry":
            ran = (root / "counter.txt").exists()
            entry["value"] = {"retry": not ran}
        else:
            raise AssertionError(f"unexpected request kind {request['kind']}")
        doc.setdefault("approvals", {})[request["address"]] = entry
    return doc


def _start(root: Path, case: Case, flavour: str, env: dict[str, str] | None = None) -> Any:
    return proctor(root, ["run", *case.run_args, "--json", *FLAVOURS[flavour]], env=env)


def drive_clean(
    root: Path, case: Case, flavour: str = "allow", backend: str = "sqlite"
) -> tuple[list[list[str]], list[dict[str, Any]]]:
    """Drive the run to its seal with no kill; returns each invocation's trace and document."""
    make(root, case, backend)
    traces: list[list[str]] = []
    documents: list[dict[str, Any]] = []
    trace = root.parent / (root.name + ".trace")
    envelope: dict[str, Any] | None = None
    run_id = None
    for _ in range(10):
        trace.unlink(missing_ok=True)
        env = {"PROCTOR_TEST_TRACE": str(trace)}
        if envelope is None:
            out = _start(root, case, flavour, env)
            documents.append({})
        else:
            doc = _approve_all(envelope, root)
            documents.append(doc)
            out = proctor(
                root, ["resume", str(run_id), "-", "--json"], stdin=json.dumps(doc), env=env
            )
        traces.append(trace.read_text().split() if trace.exists() else [])
        envelope = json.loads(out.stdout)
        run_id = envelope["run_id"]
        if envelope["status"] == "sealed":
            assert envelope["outcome"] == case.outcome, envelope
            return traces, documents
    raise AssertionError("the clean run never sealed")


def _files(root: Path, case: Case) -> dict[str, str | None]:
    return {n: (root / n).read_text() if (root / n).exists() else None for n in case.before}


def run_scenario(
    root: Path,
    case: Case,
    flavour: str,
    invocation: int,
    kill_env: dict[str, str],
    point: str,
    decision_recorded: bool,
    backend: str = "sqlite",
) -> Outcome:
    """Replay the invocations before ``invocation``, kill inside it, drive again, check."""
    make(root, case, backend)
    run_id = None
    envelope: dict[str, Any] | None = None
    outcome = Outcome(point, "killed")
    decided: set[str] = set()
    for index in range(invocation + 1):
        env = kill_env if index == invocation else {}
        if index == 0:
            out = _start(root, case, flavour, env)
        else:
            assert envelope is not None
            # The person's decision on what the paused run showed.
            doc = _approve_all(envelope, root)
            decided = set(doc.get("approvals", {}))
            out = proctor(
                root, ["resume", str(run_id), "-", "--json"], stdin=json.dumps(doc), env=env
            )
        if index == invocation:
            if out.returncode != -9:
                outcome.violations.append(
                    f"{point}: the driver was not killed (rc {out.returncode})"
                )
            break
        envelope = json.loads(out.stdout)
        run_id = envelope["run_id"]
    outcome.violations += inputs_violations(root, case, point)
    for name, text in _files(root, case).items():
        if text not in (case.before[name], case.after[name]):
            outcome.violations.append(f"{point}: {name} is half-written after the kill")
    stored = stored_runs(root)
    run_id = run_id or (stored[0][0] if stored else None)  # the root is created first
    envelope = None
    if run_id is None:
        # Killed before the run existed: nothing ran; the person starts it again.
        if _files(root, case) != case.before or (root / "counter.txt").exists():
            outcome.violations.append(f"{point}: something changed with no run")
        out = _start(root, case, flavour)
        if out.returncode not in (0, 1, 10) or not out.stdout:
            outcome.violations.append(f"{point}: the new start failed: {out.stderr.strip()}")
            return outcome
        envelope = json.loads(out.stdout)
        run_id = envelope["run_id"]
    _drive_to_seal(root, case, run_id, envelope, decision_recorded, decided, outcome)
    return outcome


def _drive_to_seal(
    root: Path,
    case: Case,
    run_id: str,
    envelope: dict[str, Any] | None,
    decision_recorded: bool,
    decided: set[str],
    outcome: Outcome,
) -> None:
    point = outcome.point
    asked_confirm_again = False
    doc: dict[str, Any] = {}
    for attempt in range(8):
        if envelope is None or envelope["status"] != "sealed":
            if envelope is not None:
                doc = _approve_all(envelope, root)
            out = proctor(root, ["resume", run_id, "-", "--json"], stdin=json.dumps(doc))
            if out.returncode not in (0, 1, 10):
                outcome.violations.append(
                    f"{point}: resume failed rc {out.returncode}: {out.stderr.strip()}"
                )
                break
            envelope = json.loads(out.stdout)
        outcome.final_status = envelope["status"] + (
            f"/{envelope['outcome']}" if envelope.get("outcome") else ""
        )
        if envelope["status"] == "sealed":
            break
        addresses = [r["address"] for r in envelope.get("requests") or []]
        if attempt == 0 and decision_recorded and decided & set(addresses):
            asked_confirm_again = True
    else:
        outcome.violations.append(f"{point}: the run never sealed")
    if asked_confirm_again:
        outcome.violations.append(f"{point}: a recorded decision was asked for again (lost)")
    _final_checks(root, case, envelope or {}, outcome)


def _final_checks(root: Path, case: Case, envelope: dict[str, Any], outcome: Outcome) -> None:
    point = outcome.point
    count = int((root / "counter.txt").read_text()) if (root / "counter.txt").exists() else 0
    if count > 1:
        outcome.violations.append(f"{point}: the command ran {count} times")
    files = _files(root, case)
    if files not in (case.before, case.after):
        outcome.violations.append(f"{point}: files half-written at the end: {files}")
    completed = outcome.final_status == "sealed/completed"
    if completed and (files != case.after or count != 1):
        outcome.violations.append(f"{point}: completed but files {files}, count {count}")
    if case.inputs and completed and TEXT not in json.dumps(envelope.get("result")):
        outcome.violations.append(f"{point}: the result lost the inputs: {envelope['result']}")
    if case.outcome == "blocked" and (count or files != case.before):
        outcome.violations.append(f"{point}: a refused start ran a step")
    if outcome.final_status != f"sealed/{case.outcome}" and not (
        case.outcome == "completed" and outcome.final_status.startswith("sealed/")
    ):
        outcome.violations.append(f"{point}: ended {outcome.final_status}")
    if not outcome.final_status.startswith(("sealed", "needs_")):
        outcome.violations.append(f"{point}: ended {outcome.final_status}")
    runs = stored_runs(root)
    if len(runs) != case.runs:
        outcome.violations.append(f"{point}: {len(runs)} runs in the store, not {case.runs}")
    outcome.violations += inputs_violations(root, case, point)
    audit = proctor(root, ["audit", "verify"])
    if audit.returncode != 0:
        outcome.violations.append(f"{point}: the audit log does not verify: {audit.stdout}")
    receipt = envelope.get("receipt_id")
    if outcome.final_status.startswith("sealed") and isinstance(receipt, str):
        # the tree the envelope names is whole on disk, whatever the kill cut short
        checked = proctor(root, ["verify", receipt, "--json"])
        if checked.returncode != 0:
            outcome.violations.append(f"{point}: receipt {receipt} does not verify")


def all_scenarios(
    work: Path,
    case: Case,
    flavour: str,
    backend: str = "sqlite",
    points: frozenset[str] | None = None,
) -> list[Outcome]:
    """Every kill point of a clean run's invocations, plus each member of the bundle.

    ``PROCTOR_CRASH_WORKERS`` (default 1) runs that many scenarios at once, each in its own
    workspace; the outcomes come back in the order of the points. ``points`` keeps only the
    kill points of those names (``call.claimed``, ...) and leaves the bundle's members out.
    """
    traces, _ = drive_clean(work / "clean", case, flavour, backend)
    plans: list[tuple[int, dict[str, str], str, bool]] = []
    for invocation, trace in enumerate(traces):
        recorded_at = trace.index("resume.recorded:1") if "resume.recorded:1" in trace else None
        for position, passage in enumerate(trace):
            sampled = (position + case.offset) % case.every != 0
            if case.start_whole and passage.startswith("start."):
                sampled = False  # where this case differs from its twin: every point
            if sampled or (points is not None and passage.rsplit(":", 1)[0] not in points):
                continue
            decision_recorded = recorded_at is not None and position > recorded_at
            label = f"invocation {invocation}: {passage}"
            plans.append((invocation, {"PROCTOR_TEST_KILL_AT": passage}, label, decision_recorded))
        first_bundle = "call.claimed:1" in trace and not any(
            "call.claimed:1" in t for t in traces[:invocation]
        )
        if case.name in ("crashy", "nested") and first_bundle and points is None:
            for member in range(3):
                label = f"invocation {invocation}: inside the bundle after {member} member(s)"
                kill = {"PROCTOR_TEST_BUNDLE_KILL_AFTER": str(member)}
                plans.append((invocation, kill, label, False))

    def one(n: int) -> Outcome:
        invocation, kill, label, decision_recorded = plans[n]
        root = work / f"k{n}"
        try:
            return run_scenario(
                root, case, flavour, invocation, kill, label, decision_recorded, backend
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)

    workers = max(1, int(os.environ.get("PROCTOR_CRASH_WORKERS", "1")))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, range(len(plans))))
    finally:
        if backend == "postgres":
            drop_schemas()

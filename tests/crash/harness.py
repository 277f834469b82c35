"""The crash-injection harness: kill -9 a real driver at named points, drive again, check.

A scenario is a list of driver invocations (``proctor run`` then ``proctor resume``), each a
real subprocess of the venv's Python. A first clean pass with ``PROCTOR_TEST_TRACE`` records
every kill point each invocation passes (``<point>:<n>``). Then, for each point, the harness
starts over in a fresh workspace, replays the invocations before it, runs that invocation with
``PROCTOR_TEST_KILL_AT`` (the process SIGKILLs itself there), and drives the run again the way
a careful person would: ``{}`` first (a recorded decision must be used, not asked again), an
approval where one is asked, and for a retry request ``retry: true`` only when the counter file
shows the command did not run. Kills inside a file bundle use the bundle's own hook.

After each kill it checks the invariants: the run ends sealed or waiting; the bundle's files
are all at their before-images or all at their after-images (never half-written); the command
ran at most once; a decision recorded before the kill was not asked for again; and the audit
log verifies against every anchor (``proctor audit verify``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

SKILL_MD = """---
name: crashy
description: A file bundle, an approval and a command, for crash tests.
---
Nothing for an agent here.
"""

RUN_YAML = """minimum_proctor: 0.1.0
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

COUNTER = """import sys, pathlib
p = pathlib.Path(sys.argv[1])
n = int(p.read_text()) if p.exists() else 0
p.write_text(str(n + 1))
"""

FLAVOURS = {"allow": [], "ask": ["--run-authority", '{"effects": "ask"}']}
"""Host authorities: ``ask`` adds a floor approval before the bundle and the command."""

BEFORE = {"a.txt": None, "b.txt": "B before\n", "c.txt": None}
AFTER = {"a.txt": "A after\n", "b.txt": "B after\n", "c.txt": "C after\n"}


@dataclass
class Outcome:
    """What one kill scenario found."""

    point: str
    final_status: str
    violations: list[str] = field(default_factory=list)


def make(root: Path) -> None:
    """A fresh workspace holding the crashy skill."""
    if root.exists():
        shutil.rmtree(root)
    (root / ".proctor").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "tools" / "count.py").write_text(COUNTER)
    (root / "b.txt").write_text(BEFORE["b.txt"])
    skill = root / "skills" / "crashy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "run.yaml").write_text(RUN_YAML.replace("PYTHON", json.dumps(sys.executable)))


def proctor(
    root: Path, args: list[str], *, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in ``root`` (test hooks on, no kill unless ``env`` asks)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")} | {
        "PROCTOR_HOME": str(root / ".home"),
        "PROCTOR_TEST_HOOKS": "1",
    }
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


def _latest_run(root: Path) -> str | None:
    out = proctor(root, ["history", "--json"])
    runs = json.loads(out.stdout)["runs"] if out.returncode == 0 else []
    return runs[0]["run_id"] if runs else None


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


@dataclass
class Invocation:
    """One driver process: ``run`` (no document) or ``resume`` with a document."""

    kind: str
    document: dict[str, Any] | None = None


def drive_clean(root: Path, flavour: str = "allow") -> tuple[list[list[str]], list[dict[str, Any]]]:
    """Drive the run to its seal with no kill; returns each invocation's trace and document."""
    make(root)
    traces: list[list[str]] = []
    documents: list[dict[str, Any]] = []
    trace = root.parent / (root.name + ".trace")
    envelope: dict[str, Any] | None = None
    run_id = None
    for _ in range(10):
        trace.unlink(missing_ok=True)
        env = {"PROCTOR_TEST_TRACE": str(trace)}
        if envelope is None:
            out = proctor(root, ["run", "crashy", "--json", *FLAVOURS[flavour]], env=env)
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
            return traces, documents
    raise AssertionError("the clean run never sealed")


def _files(root: Path) -> dict[str, str | None]:
    return {name: (root / name).read_text() if (root / name).exists() else None for name in BEFORE}


def run_scenario(
    root: Path,
    flavour: str,
    invocation: int,
    kill_env: dict[str, str],
    point: str,
    decision_recorded: bool,
) -> Outcome:
    """Replay the invocations before ``invocation``, kill inside it, drive again, check."""
    make(root)
    run_id = None
    envelope: dict[str, Any] | None = None
    outcome = Outcome(point, "killed")
    decided: set[str] = set()
    for index in range(invocation + 1):
        env = kill_env if index == invocation else {}
        if index == 0:
            out = proctor(root, ["run", "crashy", "--json", *FLAVOURS[flavour]], env=env)
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
    run_id = run_id or _latest_run(root)
    if run_id is None:
        # Killed before the run was created: nothing to check but the files.
        outcome.final_status = "never started"
        if _files(root) != BEFORE:
            outcome.violations.append(f"{point}: files changed with no run")
        return outcome
    for name, text in _files(root).items():
        if text not in (BEFORE[name], AFTER[name]):
            outcome.violations.append(f"{point}: {name} is half-written after the kill")
    asked_confirm_again = False
    doc: dict[str, Any] = {}
    for attempt in range(8):
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
        doc = _approve_all(envelope, root)
    else:
        outcome.violations.append(f"{point}: the run never sealed")
    if asked_confirm_again:
        outcome.violations.append(f"{point}: a recorded decision was asked for again (lost)")
    count = int((root / "counter.txt").read_text()) if (root / "counter.txt").exists() else 0
    if count > 1:
        outcome.violations.append(f"{point}: the command ran {count} times")
    files = _files(root)
    if files not in (BEFORE, AFTER):
        outcome.violations.append(f"{point}: bundle half-written at the end: {files}")
    if outcome.final_status == "sealed/completed" and (files != AFTER or count != 1):
        outcome.violations.append(f"{point}: completed but files {files}, count {count}")
    if not outcome.final_status.startswith(("sealed", "needs_")):
        outcome.violations.append(f"{point}: ended {outcome.final_status}")
    audit = proctor(root, ["audit", "verify"])
    if audit.returncode != 0:
        outcome.violations.append(f"{point}: the audit log does not verify: {audit.stdout}")
    return outcome


def all_scenarios(work: Path, flavour: str) -> list[Outcome]:
    """Every kill point of a clean run's invocations, plus each member of the bundle."""
    traces, _ = drive_clean(work / "clean", flavour)
    outcomes: list[Outcome] = []
    n = 0
    for invocation, trace in enumerate(traces):
        recorded_at = trace.index("resume.recorded:1") if "resume.recorded:1" in trace else None
        for position, passage in enumerate(trace):
            n += 1
            decision_recorded = recorded_at is not None and position > recorded_at
            outcomes.append(
                run_scenario(
                    work / f"k{n}",
                    flavour,
                    invocation,
                    {"PROCTOR_TEST_KILL_AT": passage},
                    f"invocation {invocation}: {passage}",
                    decision_recorded,
                )
            )
            shutil.rmtree(work / f"k{n}", ignore_errors=True)
        if "call.claimed:1" in trace and not any(
            "call.claimed:1" in t for t in traces[:invocation]
        ):
            for member in range(3):
                n += 1
                outcomes.append(
                    run_scenario(
                        work / f"k{n}",
                        flavour,
                        invocation,
                        {"PROCTOR_TEST_BUNDLE_KILL_AFTER": str(member)},
                        f"invocation {invocation}: inside the bundle after {member} member(s)",
                        False,
                    )
                )
                shutil.rmtree(work / f"k{n}", ignore_errors=True)
    return outcomes

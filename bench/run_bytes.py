"""Bytes a paused run keeps in its run row: the envelope's requests and answers template are
kept as references to the request rows (``stored_envelope``), not repeated.

    .venv/bin/python bench/run_bytes.py [--runs 200] [--lines 20]

Pauses ``--runs`` runs of a skill that reads a file of ``--lines`` lines and asks to replace it
(an approval showing the diff), in one SQLite store, then reads every run row and prints, per
run, median/p95 bytes of its ``data`` as kept, beside the yardstick: the same row with the
envelope every reader sees (``envelope_doc``: what the row held before references), and the
store file's bytes per run.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
from pathlib import Path
from typing import Any

SKILL_MD = "---\nname: edit\ndescription: Replace a note, once approved.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: read
        tool: fs.read
        inputs: {path: note.txt}
      - id: write
        tool: fs.write
        reason: Replace the note.
        inputs: {path: note.txt, content: "new text\\n",
                 expected_digest: $steps.read.content_digest}
"""


def show(label: str, values: list[int]) -> float:
    ordered = sorted(values)
    median = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(f"{label:<52} median {median:8.0f} B   p95 {p95:8.0f} B")
    return float(median)


def sizes(session: Any, ids: list[str]) -> tuple[list[int], list[int]]:
    """Bytes of each run's data as kept, and with the envelope a reader sees."""
    from proctor.runtime.engine.stored_envelope import envelope_doc
    from proctor.runtime.records.rows import dumps

    kept, whole = [], []
    for run_id in ids:
        record = session.store.get_run(run_id)
        assert record is not None
        kept.append(len(dumps(record.data).encode()))
        doc = envelope_doc(session.store, record)
        whole.append(len(dumps({**record.data, "envelope": doc}).encode()))
    return kept, whole


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--sealed", type=int, default=50, help="runs then approved to a seal")
    args = parser.parse_args()
    from proctor.core.authority import parse_authority
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".proctor").mkdir()
        skill = root / "skills" / "edit"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL_MD)
        (skill / "run.yaml").write_text(RUN_YAML)
        note = "".join(f"line {n} of the note\n" for n in range(args.lines))
        (root / "note.txt").write_text(note)
        os.environ["PROCTOR_HOME"] = str(root / ".home")
        session = Session(Workspace(root))
        ask = parse_authority({"effects": "ask"})
        try:
            ids = []
            for _ in range(args.runs):
                env = session.run("edit", authority=ask, cwd=root)
                assert env.status == "needs_approval", env.refusal
                ids.append(env.run_id or "")
            kept, whole = sizes(session, ids)
            for run_id in ids[: args.sealed]:
                answer = session.envelope(run_id).answers_template or {}
                for entry in answer.get("approvals", {}).values():
                    entry.update({"approved": True, "reason": "bench"})
                (root / "note.txt").write_text(note)  # as the run read it
                done = session.resume(run_id, answer)
                assert done.outcome == "completed", done.refusal
            sealed_kept, sealed_whole = sizes(session, ids[: args.sealed])
        finally:
            session.close()
        conn = sqlite3.connect(root / ".proctor" / "runs.sqlite")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            (pages,) = conn.execute("PRAGMA page_count").fetchone()
            (size,) = conn.execute("PRAGMA page_size").fetchone()
            (requests,) = conn.execute("SELECT AVG(length(body)) FROM requests").fetchone()
        finally:
            conn.close()
    print(f"{args.runs} paused runs, a {args.lines}-line note each (one approval with its diff)")
    a = show("run row data, envelope as readers see it (before)", whole)
    b = show("run row data, as kept (references)", kept)
    print(f"request row body (holds the request once):            mean {requests:8.0f} B")
    print(
        f"store file per run:                                   {pages * size / args.runs:8.0f} B"
    )
    print(f"saved per paused run: {a - b:.0f} B; ratio kept / before: {b / a:.2f}")
    c = show("sealed run row data, envelope as readers see it (before)", sealed_whole)
    d = show("sealed run row data, as kept (trace by count)", sealed_kept)
    print(f"saved per sealed run: {c - d:.0f} B; ratio kept / before: {d / c:.2f}")


if __name__ == "__main__":
    main()

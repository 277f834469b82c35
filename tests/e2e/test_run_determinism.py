"""The same run replayed with the same key and a fixed clock gives byte-identical receipts,
the run receipt's ``audit_head`` included: under an injected clock the audit log's times and
event ids derive from it, so the same events give the same log.
"""

from __future__ import annotations

import itertools
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from proctor.receipts.signing import signer_from_seed
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from tests.e2e.conftest import REPO
from tests.receipt_files import stored


def replay(root: Path) -> tuple[str, dict[str, bytes]]:
    (root / ".proctor").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "notes-editor", root / "skills" / "notes-editor")
    (root / "n.md").write_text("alpha beta\n")
    ticks = itertools.count()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    session = Session(
        Workspace(root),
        environ={"PROCTOR_HOME": str(root / "home")},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
        signer=signer_from_seed(bytes(range(32))),
        run_ids=lambda: "run-fixed",
    )
    try:
        env = session.run(
            "notes-editor#edit",
            cli_inputs=["file=n.md", "old=beta", "new=gamma"],
            cwd=root,
        )
    finally:
        session.close()
    assert env.outcome == "completed", env.refusal
    assert env.receipt_id is not None
    folder = root / ".proctor" / "receipts"
    files = stored(folder)
    run = json.loads(files.pop(env.receipt_id))
    return run, files


def test_replay_gives_byte_identical_receipts(tmp_path: Path) -> None:
    first_run, first = replay(tmp_path / "a")
    second_run, second = replay(tmp_path / "b")
    assert len(first) == 3 + 3  # three calls, three steps (and the run)
    assert first == second
    assert first_run["body"]["audit_head"]["lines"] > 0
    assert first_run == second_run

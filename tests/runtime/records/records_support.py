"""What the run store's and the audit log's tests share: a settled call, and a line another
process appends to a log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from proctor.runtime.records.runs import CallRecord


def settled_call(
    run_id: str, call_id: str, step_id: str | None, outcome: str | None, **kw: Any
) -> CallRecord:
    """A settled ``echo`` call of ``run_id`` with ``outcome`` (and any other fields ``kw``)."""
    return CallRecord(
        run_id=run_id,
        call_id=call_id,
        step_id=step_id,
        tool="echo",
        state="settled",
        args_digest="sha256:" + "0" * 64,
        outcome=outcome,
        result={"status": outcome},
        **kw,
    )


def append_elsewhere(path: Path) -> None:
    """Another process appends an ``elsewhere`` line to the audit log at ``path``."""
    subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path;"
         " from proctor.runtime.records.audit import AuditLog;"
         " AuditLog(Path(sys.argv[1])).emit('elsewhere', run_id=None, step_index=None)",
         str(path)],
        check=True,
    )  # fmt: skip

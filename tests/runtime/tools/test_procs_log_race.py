"""A process that ends while someone lists it keeps how it ended.

``describe`` (``process.list``, ``proctor process list``) reconciles a process whose supervisor
died unrecorded to ``lost``. The supervisor records how its program ended in ``state.json``
and then lets go of its lock: a reader that read the state before that write and found the lock
free after it must not take the finished process for a lost one and overwrite its record."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

from proctor.runtime.tools.procs_log import describe, reconcile_lost

PROCESS_ID = "proc_" + "0" * 16


def _folder(root: Path, n: int) -> tuple[Path, int]:
    folder = root / str(n) / PROCESS_ID
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps({"run_id": "r", "argv": ["x"]}))
    lock = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the supervisor holds it
    (folder / "state.json").write_text(json.dumps({"state": "running", "started_at": 1.0}))
    return folder, lock


def _end(folder: Path, lock: int) -> None:
    """What the supervisor does last: record the end (a rename), then let the lock go."""
    ended = {"state": "exited", "started_at": 1.0, "ended_at": 2.0, "exit_code": 0,
             "removed": ["signing.pem"]}  # fmt: skip
    temp = folder / ".state.tmp"
    temp.write_text(json.dumps(ended))
    os.replace(temp, folder / "state.json")
    os.close(lock)


def _race(tmp_path: Path, read: object) -> list[dict[str, object]]:
    ends = []
    for n in range(150):
        folder, lock = _folder(tmp_path, n)
        stop = threading.Event()

        def reader(folder: Path = folder, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                read(folder)  # type: ignore[operator]

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            _end(folder, lock)
        finally:
            stop.set()
            thread.join()
        ends.append(json.loads((folder / "state.json").read_text()))
    return ends


def test_a_process_listed_while_it_ends_is_recorded_as_it_ended(tmp_path: Path) -> None:
    ends = _race(tmp_path, describe)
    assert [e for e in ends if e["state"] != "exited"] == []
    assert all(e["exit_code"] == 0 and e["removed"] == ["signing.pem"] for e in ends)
    assert describe(tmp_path / "0" / PROCESS_ID)["exit_code"] == 0


def test_a_process_reconciled_while_it_ends_is_recorded_as_it_ended(tmp_path: Path) -> None:
    ends = _race(tmp_path, lambda folder: reconcile_lost(folder.parent))
    assert [e for e in ends if e["state"] != "exited"] == []


def test_a_supervisor_dead_unrecorded_is_still_lost(tmp_path: Path) -> None:
    folder, lock = _folder(tmp_path, 0)
    os.close(lock)  # died without recording the end
    assert describe(folder)["state"] == "lost"
    assert json.loads((folder / "state.json").read_text())["state"] == "lost"

"""How the console script's process of a plain ``run`` ends: without the interpreter's teardown
of its modules, but with everything teardown would still have finished done first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SKILL = Path(__file__).resolve().parents[2] / "examples" / "hello-world"

# Before it calls main() as the console script does, the probe leaves three things that only an
# orderly end finishes: a non-daemon thread still working, an atexit handler, and a file with
# bytes still in its buffer. An object of __main__ shows whether modules were torn down.
_PROBE = """
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
out = Path(sys.argv[1])
def late(name):
    time.sleep(0.3)
    (out / name).write_text("joined")
threading.Thread(target=late, args=("thread",)).start()
idle = ThreadPoolExecutor(2)  # workers that wait for work: shutdown must stop them, not hang
idle.submit(lambda: None).result()
busy = ThreadPoolExecutor(1)
busy.submit(late, "pool")
atexit.register(lambda: (out / "atexit").write_text("ran"))
pending = open(out / "buffered", "w")
pending.write("kept")
class Kept:
    def __del__(self):
        (out / "teardown").write_text("ran")
kept = Kept()
sys.argv[1:] = sys.argv[2:]
from proctor.cli.main import main
main()
"""


def test_a_run_process_finishes_threads_atexit_and_files_then_skips_teardown(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".proctor").mkdir(parents=True)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"PROCTOR_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(marks), "run", str(SKILL), "-i", "message=hi",
         "--json"],
        capture_output=True, text=True, env=env, cwd=workspace, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["outcome"] == "completed"
    assert (marks / "thread").read_text() == "joined"
    assert (marks / "pool").read_text() == "joined"
    assert (marks / "atexit").read_text() == "ran"
    assert (marks / "buffered").read_text() == "kept"
    assert not (marks / "teardown").exists()  # the modules were not torn down
    # What the run wrote is whole: its receipt verifies in another process.
    verified = subprocess.run(
        [sys.executable, "-m", "proctor", "verify", envelope["receipt_id"], "--json"],
        capture_output=True, text=True, env=env, cwd=workspace, check=False, timeout=120,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["status"] == "verified"


def test_a_click_command_process_ends_the_same_way(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(marks), "--version"],
        capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path,
        env={"PROCTOR_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert (done.returncode, done.stdout.startswith("proctor, version ")) == (0, True)
    assert sorted(p.name for p in marks.iterdir()) == ["atexit", "buffered", "pool", "thread"]

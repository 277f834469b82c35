"""Live progress: on a terminal a long run shows its skill, step, call and elapsed time on
stderr, erased when it ends; piped, the output is exactly what it was without progress."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SLOW = """\
minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: first
        tool: echo
        inputs: {text: started}
      - id: wait
        tool: command.execute
        inputs:
          argv: [PYTHON, -c, "import time; time.sleep(1.5)"]
"""


def _workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "ws"
    package = root / "skills" / "slow"
    package.mkdir(parents=True)
    (root / ".proctor").mkdir()
    (package / "SKILL.md").write_text("---\nname: slow\ndescription: Slow.\n---\n# s\n", "utf-8")
    (package / "run.yaml").write_text(SLOW.replace("PYTHON", sys.executable), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(PROCTOR_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO / "src"))
    return root, env


def test_a_terminal_sees_progress_and_a_pipe_sees_nothing_extra(tmp_path: Path) -> None:
    root, env = _workspace(tmp_path)
    argv = [sys.executable, "-m", "proctor", "run", "slow"]
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0, seen
    text = seen.decode("utf-8", "replace")
    assert "running slow#main" in text
    assert "step first" in text and "echo completed" in text
    assert "s" in text.split("·")[-1]  # elapsed seconds
    assert text.endswith("\r\x1b[2K")  # erased when the run returned

    piped = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0
    assert "running" not in piped.stderr and "\x1b" not in piped.stderr + piped.stdout

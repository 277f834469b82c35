"""A reader that goes away (``proctor run ... | head``) ends the command quietly: exit 1, as
click ends a command, no traceback, and what the command recorded before stays recorded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROCTOR = [sys.executable, "-c", "import sys; from proctor.cli.main import main; sys.exit(main())"]


def _closed_reader(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run proctor with standard output a pipe whose reader has already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(root / "home")
    try:
        return subprocess.run(
            [*PROCTOR, *args], stdout=write_end, stderr=subprocess.PIPE, text=True,
            cwd=root, env=env, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples" / "hello-world", tmp_path / "hello-world")
    (tmp_path / ".proctor").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ("run", "hello-world", "-i", "message=hi"),  # read without click
        ("run", "hello-world", "-i", "message=hi", "--json"),
        ("tool", "list", "--json"),  # through click
        ("run", "no-such-skill", "--json"),  # an error printed as JSON
    ],
    ids=["run", "run-json", "click", "error-json"],
)
def test_a_reader_that_went_away_ends_the_command_quietly(root: Path, args: tuple[str]) -> None:
    done = _closed_reader(root, *args)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1


def test_the_run_is_recorded_whole_when_its_reader_went_away(root: Path) -> None:
    done = _closed_reader(root, "run", "hello-world", "-i", "message=hi")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(root / "home")
    listed = subprocess.run(
        [*PROCTOR, "history", "--json"], capture_output=True, text=True, cwd=root, env=env,
        timeout=120, check=True,
    )  # fmt: skip
    runs = json.loads(listed.stdout)["runs"]
    assert [(r["status"], r["outcome"]) for r in runs] == [("sealed", "completed")]

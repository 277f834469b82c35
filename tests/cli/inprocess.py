"""Running the CLI in the test's own process: ``main(argv)`` with its output captured, in a
workspace whose environment names no proctor setting but a scratch home."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.cli.main import main


def enter_workspace(monkeypatch: pytest.MonkeyPatch, root: Path, home: Path) -> None:
    """Work in ``root`` with ``home`` as the proctor home and no other ``PROCTOR_*`` setting."""
    for key in list(os.environ):
        if key.startswith("PROCTOR_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PROCTOR_HOME", str(home))
    monkeypatch.chdir(root)


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``proctor ARGV`` in process: its exit code, standard output and standard error."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err

"""A file named on the command line is read only up to what the command accepts: ``resume
RUN FILE`` and ``verify FILE`` read at most their 64 MiB cap, and ``audit verify PATH`` takes
only a regular file, so a device or a pipe that never ends (``/dev/zero``) is refused with a
code instead of growing the process until the system kills it.

Each command runs in a child interpreter whose address space is capped at 1 GiB: reading
``/dev/zero`` whole would end it with a MemoryError traceback long before the cap is reached.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")

_CAPPED = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    "from proctor.cli.main import main\n"
    "main(sys.argv[1:])\n"
)


def _proctor(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PROCTOR_HOME": str(cwd / "home"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", _CAPPED, *args],
        capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=120,
    )  # fmt: skip


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / ".proctor").mkdir()
    return tmp_path


def _state(root: Path) -> list[tuple[str, bytes]]:
    proctor = root / ".proctor"
    return [(str(p), p.read_bytes()) for p in sorted(proctor.rglob("*")) if p.is_file()]


def test_resume_reads_a_never_ending_file_only_to_its_cap(workspace: Path) -> None:
    before = _state(workspace)
    done = _proctor(workspace, "resume", "0" * 32, "/dev/zero")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and "error[resume_too_large]" in done.stderr
    assert _state(workspace) == before


def test_verify_reads_a_never_ending_file_only_to_its_cap(workspace: Path) -> None:
    done = _proctor(workspace, "verify", "/dev/zero")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and "error[receipt_target_invalid]" in done.stderr
    assert "larger than 64 MiB" in done.stderr


def test_audit_verify_refuses_a_file_that_is_not_regular(workspace: Path) -> None:
    done = _proctor(workspace, "audit", "verify", "/dev/zero")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and "error[audit_unreadable]" in done.stderr
    assert "not a regular file" in done.stderr


def test_resume_names_a_folder_it_cannot_read_by_the_path_given(workspace: Path) -> None:
    done = _proctor(workspace, "resume", "0" * 32, ".")
    assert done.returncode == 2 and "error[resume_unreadable]: cannot read '.'" in done.stderr


def test_authority_save_reads_a_never_ending_file_only_to_its_cap(workspace: Path) -> None:
    done = _proctor(workspace, "authority", "save", "p", "/dev/zero", "--workspace", ".")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and "error[authority_invalid]" in done.stderr
    assert "over 1024 KiB; nothing was saved" in done.stderr
    assert not list((workspace / "home").rglob("*.json"))

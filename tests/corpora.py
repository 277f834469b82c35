"""Locate third-party test corpora (never vendored into this repo).

They live in ``../shared/corpora`` beside the repository, or wherever ``PROCTOR_CORPORA`` points.
Where they are absent, tests that need them skip with a message; CI sets
``PROCTOR_REQUIRE_CORPORA=1`` and then a missing corpus fails instead of skipping.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def corpora_root() -> Path | None:
    """The corpora folder, or ``None`` when it cannot be found."""
    named = os.environ.get("PROCTOR_CORPORA")
    candidates = [Path(named)] if named else []
    candidates.append(REPO.parent / "shared" / "corpora")
    candidates.append(REPO.parent.parent / "shared" / "corpora")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def corpus_dir(name: str) -> Path:
    """The folder of one corpus; skips (or fails under PROCTOR_REQUIRE_CORPORA=1) if absent."""
    root = corpora_root()
    path = None if root is None else root / name
    if path is None or not path.is_dir():
        message = f"corpus {name!r} not found (set PROCTOR_CORPORA to the shared corpora folder)"
        if os.environ.get("PROCTOR_REQUIRE_CORPORA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path

"""Shared helpers for the policy tests: a tool set, registries, policy files on disk, contexts."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from proctor.policy import GuardContext, GuardRegistry

TOOLS = frozenset(
    {
        "echo",
        "data.digest",
        "fs.read",
        "fs.read_bundle",
        "fs.list",
        "fs.search",
        "fs.write",
        "fs.edit",
        "fs.apply_bundle",
        "fs.delete",
        "fs.restore",
        "http.request",
    }
)


@pytest.fixture
def registry() -> GuardRegistry:
    """An isolated registry with the shipped guards only."""
    return GuardRegistry.with_shipped()


def write(folder: Path, name: str, text: str) -> Path:
    """Write a dedented policy file and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def ctx(
    tool: str,
    args: Mapping[str, Any] | None = None,
    *,
    reason: str = "a stated reason",
    history: tuple[Mapping[str, Any], ...] = (),
    **extra: Any,
) -> GuardContext:
    """A GuardContext for ``tool`` with the same raw and validated arguments."""
    a = dict(args or {})
    return GuardContext(tool, a, a, reason, None, history, **extra)

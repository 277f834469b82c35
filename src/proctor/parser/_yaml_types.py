"""The strict YAML loader's limits and position types (shared by its public face and its parser)."""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "Path", "Positions"]

MAX_DEPTH = 200
"""Deepest nesting of mappings and sequences accepted (hostile input guard)."""

Path = tuple[str | int, ...]
"""Where a value sits: mapping keys and sequence indexes from the document root."""

Positions = dict[Path, tuple[int, int]]
"""1-based ``(line, column)`` of each value: a mapping member's key, a sequence item's start."""

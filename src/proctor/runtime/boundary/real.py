"""The real path of a path, asked of the kernel in one lookup (:mod:`proctor.runtime.real_paths`,
which the package reader below the boundary uses too)."""

from __future__ import annotations

from proctor.runtime.real_paths import real_folder, real_path

__all__ = ["real_folder", "real_path"]

"""Reach: which folders besides the workspace a run's tools may touch (``docs/admission.md``).

Under ``reach: inputs`` a run's roots are the workspace plus every folder one of its inputs
names: a top-level input whose schema says ``"format": "path"`` and whose value is a folder,
absolute or relative to the workspace root. They are resolved (symlinks followed) once, when the
run starts, and kept in the run store under ``roots`` (name -> real path), so every later driver
of the run (resume, crash recovery) reaches exactly the same folders. Under ``reach: workspace``
no input names a root. A path in a root is ``$NAME/...`` (see
:mod:`proctor.runtime.boundary.workspace`).

The receipt binds the roots through its ``authority_digest`` (:func:`authority_record`); the
real paths stay in the local run store and reach no receipt, result or message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.errors import ConfigError, UsageError
from proctor.runtime.boundary.roots import checked_root

if TYPE_CHECKING:
    from proctor.core.authority import Authority
    from proctor.runtime.boundary.workspace import Workspace

__all__ = [
    "PATH_FORMAT",
    "authority_record",
    "recorded_roots",
    "recovery_workspace",
    "run_roots",
    "run_workspace",
]

PATH_FORMAT = "path"
"""The JSON Schema ``format`` that makes a string input name a root."""


def run_roots(
    authority: Authority,
    schema: Mapping[str, Any],
    values: Mapping[str, Any],
    workspace_root: Path,
) -> dict[str, str]:
    """The roots a run starting with ``values`` reaches besides the workspace (name -> real
    path); empty under ``reach: workspace``. An absent optional input names no root.

    Raises:
        UsageError: ``root_invalid``: a path input is not a string naming a usable folder.
    """
    if authority.reach != "inputs":
        return {}
    properties = schema.get("properties")
    roots: dict[str, str] = {}
    for name, prop in (properties if isinstance(properties, Mapping) else {}).items():
        if not isinstance(prop, Mapping) or prop.get("format") != PATH_FORMAT:
            continue
        value = values.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value or "\x00" in value:
            raise UsageError(f"input {name!r} must name a folder", code="root_invalid")
        folder = Path(value) if os.path.isabs(value) else workspace_root / value
        try:
            roots[name] = checked_root(name, folder)
        except ConfigError as exc:
            raise UsageError(exc.message, code=exc.code) from None
    return roots


def recorded_roots(data: Mapping[str, Any]) -> dict[str, str]:
    """The roots a run's store record keeps (``{}`` for a run from before reach, or none)."""
    roots = data.get("roots")
    if not isinstance(roots, Mapping):
        return {}
    return {str(k): v for k, v in roots.items() if isinstance(v, str)}


def run_workspace(workspace: Workspace, authority: Authority, data: Mapping[str, Any]) -> Workspace:
    """``workspace`` reaching the roots the run recorded (only under ``reach: inputs``).

    A root that is gone or no longer usable since the run started is left out, so a path into it
    is refused (``path_outside_reach``) rather than reaching whatever now stands there.
    """
    if authority.reach != "inputs":
        return workspace
    roots: dict[str, str] = {}
    for name, real in recorded_roots(data).items():
        try:
            if checked_root(name, real) == real:
                roots[name] = real
        except ConfigError:
            continue
    return workspace.reaching(roots) if roots else workspace


def recovery_workspace(workspace: Workspace, data: Mapping[str, Any] | None) -> Workspace:
    """The workspace a crashed run's journal is rolled back in: with the roots its store record
    ``data`` keeps (its authority decided them when it started); ``None`` is a run not found."""
    if data is None:
        return workspace
    roots = recorded_roots(data)
    kept = {n: r for n, r in roots.items() if os.path.isdir(r)}
    return workspace.reaching(kept) if kept else workspace


def authority_record(data: Mapping[str, Any]) -> dict[str, Any]:
    """What a run's receipt digests as its authority: the host's record, plus the roots its
    inputs named (by name and real path; only the digest leaves the machine)."""
    authority = data.get("authority")
    record = dict(authority) if isinstance(authority, Mapping) else {}
    roots = recorded_roots(data)
    if roots:
        record["roots"] = roots
    return record

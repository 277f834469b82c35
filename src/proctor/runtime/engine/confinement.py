"""Directive runs' confinement: file changes only under ``output/`` and ``drafts/``.

Whether a run is confined is a property of the run (:func:`proctor.runtime.directives.
confined_run`, recorded when it starts); here is how its governor's tools are confined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import replace
from proctor.errors import RefusedCall
from proctor.runtime.directives import WRITABLE_DIRS

if TYPE_CHECKING:
    from proctor.runtime.boundary.workspace import Access, Workspace
    from proctor.runtime.tools.base import Tool

__all__ = ["confined_tools"]


def _confined(tool: Tool, workspace: Workspace) -> Tool:
    inner = tool.paths

    def paths(args: Mapping[str, Any]) -> list[tuple[str, Access]]:
        found = inner(args)
        for path, access in found:
            if access != "write":
                continue
            # Resolved as containment resolves it (links, '..'), so a link inside output/
            # pointing elsewhere is judged by where it leads.
            rel = workspace.resolve(path, "write").rel
            head, _, rest = rel.partition("/")
            if head not in WRITABLE_DIRS or not rest:
                raise RefusedCall(
                    f"a directive run writes only under {' and '.join(WRITABLE_DIRS)}/; "
                    f"{tool.name} names a path outside them",
                    code="outside_writable_dirs",
                )
        return found

    return replace(tool, paths=paths)


def confined_tools(tools: Mapping[str, Tool], workspace: Workspace) -> dict[str, Tool]:
    """``tools`` with every file-changing tool confined to ``output/`` and ``drafts/``.

    The confined tools keep their names, schemas and handlers, so every policy rule that covers
    them still does; their path check refuses (``outside_writable_dirs``) at containment, before
    policy, a path that resolves outside the writable folders. Workspace containment applies
    as for any run (``..``, links, sensitive and authority files).
    """
    out = dict(tools)
    for name, tool in tools.items():
        if tool.effect == "write":
            out[name] = _confined(tool, workspace)
    return out

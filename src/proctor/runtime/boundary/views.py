"""The view of the workspace a tool handler gets during one admitted call."""

from __future__ import annotations

from typing import Any, cast

from proctor.runtime.boundary.workspace import Access, Resolved, Workspace

__all__ = ["admitted_workspace"]


class _AdmittedWorkspace:
    """The workspace as a handler sees it during one call: ``resolve`` answers the paths
    containment already resolved for this call from that resolution (no second walk and
    content check of the same path); any other path is resolved afresh. Everything else is the
    workspace itself."""

    def __init__(self, workspace: Workspace, resolved: dict[tuple[str, str], Resolved]) -> None:
        self._workspace = workspace
        self._resolved = resolved

    def resolve(self, path: str, access: Access) -> Resolved:
        hit = self._resolved.get((path, access))
        return hit if hit is not None else self._workspace.resolve(path, access)

    def check_content(self, rel: str, data: bytes) -> None:
        # every read chunk asks this: answered without the __getattr__ detour
        self._workspace.check_content(rel, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workspace, name)


def admitted_workspace(
    workspace: Workspace, resolved: dict[tuple[str, str], Resolved]
) -> Workspace:
    """The workspace a handler gets: ``workspace`` itself, or a view answering ``resolved``."""
    if not resolved:
        return workspace
    return cast("Workspace", _AdmittedWorkspace(workspace, resolved))

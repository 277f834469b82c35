"""The view of the workspace a tool handler gets during one admitted call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from proctor.runtime.boundary.workspace import Access, Resolved, Workspace

__all__ = ["admitted_workspace"]


class _AdmittedWorkspace:
    """The workspace as a handler sees it during one call: ``resolve`` answers the paths
    containment already resolved for this call from that resolution (no second walk and
    content check of the same path); any other path is resolved afresh. ``take_seen`` hands
    over, once, the bytes containment read of a file it judged whole. Everything else is the
    workspace itself."""

    def __init__(
        self,
        workspace: Workspace,
        resolved: Mapping[tuple[str, str], Resolved],
        seen: dict[Resolved, bytes],
    ) -> None:
        self._workspace = workspace
        self._resolved = resolved
        self._seen = seen

    def resolve(self, path: str, access: Access) -> Resolved:
        hit = self._resolved.get((path, access))
        return hit if hit is not None else self._workspace.resolve(path, access)

    def take_seen(self, target: Resolved) -> bytes | None:
        # once: a handler that reads the same file again (after writing it, say) reads it anew
        return self._seen.pop(target, None) if self._seen else None

    def check_content(self, rel: str, data: bytes) -> None:
        # every read chunk asks this: answered without the __getattr__ detour
        self._workspace.check_content(rel, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workspace, name)


def admitted_workspace(
    workspace: Workspace,
    resolved: Mapping[tuple[str, str], Resolved],
    seen: dict[Resolved, bytes] | None = None,
) -> Workspace:
    """The workspace a handler gets: ``workspace`` itself, or a view answering ``resolved``
    and handing over ``seen`` (what containment read whole of a resolved file, by its
    resolution; the view takes the dict over and empties it)."""
    if not resolved:
        return workspace
    return cast("Workspace", _AdmittedWorkspace(workspace, resolved, seen or {}))

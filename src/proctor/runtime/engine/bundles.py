"""Bundles a crashed driver left half-applied, rolled back before a run starts or resumes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proctor.runtime.engine.host import RunHost

__all__ = ["recover_open_bundles"]


def recover_open_bundles(host: RunHost) -> list[str]:
    """Roll back what crashed drivers left half-applied (see
    :func:`proctor.runtime.tools.fs_bundle.recover_bundles`); the bundle tool loads only when
    the store holds an open journal."""
    if not host.store.journal_pending():
        return []
    from proctor.runtime.tools.fs_bundle import recover_bundles

    return recover_bundles(host.workspace, host.store)

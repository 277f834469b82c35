"""What a crash left behind, recovered before a run starts or resumes: bundles a crashed driver
left half-applied are rolled back, and processes whose supervisor was killed are recorded
``lost`` (never left ``running``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proctor.runtime.engine.host import RunHost

__all__ = ["recover_open_bundles"]


def recover_open_bundles(host: RunHost, *, journals: bool | None = None) -> list[str]:
    """Roll back what crashed drivers left half-applied (see
    :func:`proctor.runtime.tools.fs_bundle.recover_bundles`); the bundle tool loads only when
    the store holds an open journal. Processes whose supervisor died are reconciled first
    (:func:`proctor.runtime.tools.procs_log.reconcile_lost`; loaded only when the workspace
    has a processes folder).

    ``journals=False``: the caller read the store a moment ago (the start's
    :func:`~.start.check_parts`) and no journal was open, so the journal is not read again (a
    journal another process opened since could as well have been opened just after this
    read); ``None`` reads it."""
    # the folder's text, not a Path built and stat'ed through pathlib: asked before every run
    processes = f"{host.workspace.state_dir}/processes"
    # access first: the folder is usually absent, and isdir's stat would raise and catch a
    # FileNotFoundError for it (a name access cannot find, isdir says False of too)
    if os.access(processes, os.F_OK) and os.path.isdir(processes):
        from pathlib import Path

        from proctor.runtime.tools.procs_log import reconcile_lost

        reconcile_lost(Path(processes))
    if journals is False or not host.store.journal_pending():
        return []
    from proctor.runtime.tools.fs_bundle import recover_bundles

    return recover_bundles(host.workspace, host.store)

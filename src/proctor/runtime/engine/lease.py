"""One driver at a time per run: a lease row in the run store, with expiry.

A holder is ``host|pid|process start time|nonce``. A lease expires after
:data:`LEASE_TTL_SECONDS` unless renewed (the driver renews it before each step); a lease whose
holder ran on this host and whose process is gone (a crashed driver) is taken over at once.
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proctor.runtime.records.runs import RunStore

__all__ = ["LEASE_TTL_SECONDS", "acquire_lease", "holder_dead", "holder_id", "renew_lease"]

LEASE_TTL_SECONDS = 600.0


def holder_id() -> str:
    """This process's identity as a lease holder."""
    started = 0.0
    try:
        import psutil

        started = float(psutil.Process(os.getpid()).create_time())
    except Exception:  # psutil missing or unsupported: the lease then only expires
        pass
    return f"{socket.gethostname()}|{os.getpid()}|{started:.2f}|{secrets.token_hex(4)}"


def holder_dead(holder: str) -> bool:
    """True when the holder ran on this host and its process is gone (a crashed driver)."""
    parts = holder.split("|")
    if len(parts) != 4 or parts[0] != socket.gethostname():
        return False
    try:
        import psutil

        proc = psutil.Process(int(parts[1]))
        return abs(float(proc.create_time()) - float(parts[2])) >= 0.5
    except (ValueError, ImportError):
        return False
    except Exception:  # psutil.NoSuchProcess and friends: the holder is gone
        return True


def acquire_lease(store: RunStore, run_id: str, holder: str) -> bool:
    """Take the run's lease for ``holder``; False when a live driver holds it."""
    current = store.acquire_lease(run_id, holder, LEASE_TTL_SECONDS)
    if current is not None and holder_dead(current):
        current = store.acquire_lease(run_id, holder, LEASE_TTL_SECONDS, steal_from=current)
    return current is None


def renew_lease(store: RunStore, run_id: str, holder: str) -> None:
    """Extend ``holder``'s lease by another TTL."""
    store.acquire_lease(run_id, holder, LEASE_TTL_SECONDS)

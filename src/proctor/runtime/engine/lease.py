"""One driver at a time per run: a lease row in the run store, with expiry.

A holder is ``host|pid|process start time|nonce``. A lease expires after
:data:`LEASE_TTL_SECONDS` (or ``PROCTOR_LEASE_TTL`` seconds, which ``proctor worker`` sets short
and renews from its heartbeat) unless renewed (the driver renews it before each step); a lease
whose holder ran on this host and whose process is gone (a crashed driver) is taken over at
once. A holder on another machine is known dead only by its lease running out.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proctor.runtime.records.runs import RunStore

__all__ = [
    "LEASE_TTL_SECONDS",
    "acquire_lease",
    "holder_dead",
    "holder_id",
    "lease_ttl",
    "renew_lease",
]

LEASE_TTL_SECONDS = 600.0


def lease_ttl() -> float:
    """``PROCTOR_LEASE_TTL`` when it is a number of seconds from 1 to 86400, else
    :data:`LEASE_TTL_SECONDS`."""
    try:
        value = float(os.environ.get("PROCTOR_LEASE_TTL", ""))
    except ValueError:
        return LEASE_TTL_SECONDS
    return value if 1.0 <= value <= 86400.0 else LEASE_TTL_SECONDS


def _host() -> str:
    """This host's name, as ``gethostname(2)`` gives it (the kernel's node name); read without
    importing :mod:`socket`."""
    return os.uname().nodename


def holder_id() -> str:
    """This process's identity as a lease holder."""
    try:
        started = _started(os.getpid())
    except Exception:  # no /proc and no psutil: the lease then only expires
        started = 0.0
    return f"{_host()}|{os.getpid()}|{started:.2f}|{os.urandom(4).hex()}"


def holder_dead(holder: str) -> bool:
    """True when the holder ran on this host and its process is gone (a crashed driver)."""
    parts = holder.split("|")
    if len(parts) != 4 or parts[0] != _host():
        return False
    try:
        return abs(_started(int(parts[1])) - float(parts[2])) >= 0.5
    except (ValueError, ImportError):
        return False
    except Exception:  # no such process (FileNotFoundError, psutil.NoSuchProcess): gone
        return True


def _started(pid: int) -> float:
    """When ``pid`` started, in seconds since the epoch, as psutil's ``create_time`` reckons it:
    read from ``/proc`` on Linux (psutil costs ~15 ms to import at every run's start), from
    psutil elsewhere."""
    if not os.path.isdir("/proc/self"):
        import psutil

        return float(psutil.Process(pid).create_time())
    with open(f"/proc/{pid}/stat", "rb") as stat:
        data = stat.read()
    # The fields after the command name (which may hold spaces and parentheses): the 22nd
    # field of the line, the start time in clock ticks since boot, is the 20th of these.
    ticks = int(data[data.rindex(b")") + 2 :].split()[19])
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")


def _boot_time() -> float:
    with open("/proc/stat", "rb") as stat:
        for line in stat:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def acquire_lease(store: RunStore, run_id: str, holder: str) -> bool:
    """Take the run's lease for ``holder``; False when a live driver holds it."""
    current = store.acquire_lease(run_id, holder, lease_ttl())
    if current is not None and holder_dead(current):
        current = store.acquire_lease(run_id, holder, lease_ttl(), steal_from=current)
    return current is None


def renew_lease(store: RunStore, run_id: str, holder: str) -> None:
    """Extend ``holder``'s lease by another TTL."""
    store.acquire_lease(run_id, holder, lease_ttl())

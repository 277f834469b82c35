"""Fencing: the lease epoch every write a driver makes for a run is conditional on.

The seam: the run stores (:mod:`.sqlite`, :mod:`.postgres`) keep, beside each run's lease row,
an epoch that only grows: a holder that takes the lease from another (a lapsed or dead one)
or after a release gets the next number, and a holder renewing its own lease keeps its number.
The store remembers the epoch this process took for each run it holds; every write it makes for
that run checks, in the same transaction, that the lease row still carries that epoch, and a
stale one is refused :class:`~proctor.errors.LeaseLost`. This module holds what both stores
share for it: the refusal, and where a claim's effect runs (:func:`process_site`, recorded with
each claim so that a taker on the same host can end what a lapsed driver left running).
"""

from __future__ import annotations

import os
from typing import Any

from proctor.errors import LeaseLost

__all__ = ["host_name", "lease_lost", "process_site", "started_at"]

_SITE: dict[str, Any] = {}


def host_name() -> str:
    """This host's name, as ``gethostname(2)`` gives it (the kernel's node name); read without
    importing :mod:`socket`."""
    return os.uname().nodename


def started_at(pid: int) -> float:
    """When ``pid`` started, in seconds since the epoch, as psutil's ``create_time`` reckons it:
    read from ``/proc`` on Linux (psutil costs ~15 ms to import at every run's start), from
    psutil elsewhere.

    Raises:
        OSError, psutil.Error: no such process.
    """
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


def process_site() -> dict[str, Any]:
    """Where an effect this process sends runs: ``host``, and the root of its process tree
    (this driver's ``pid`` and its start time ``started``; a command's sandbox is a descendant
    of it). Recorded with each claim."""
    pid = os.getpid()
    if _SITE.get("pid") != pid:  # a forked child is a process of its own
        try:
            started = started_at(pid)
        except Exception:  # no /proc and no psutil: a taker then cannot tell it is this one
            started = 0.0
        _SITE.clear()
        _SITE.update({"host": host_name(), "pid": pid, "started": round(started, 2)})
    return dict(_SITE)


def lease_lost(run_id: str, epoch: int, current: int | None) -> LeaseLost:
    """The refusal of a write made under ``epoch`` when the lease row carries ``current``."""
    now = "was released" if current is None else f"is now at epoch {current}"
    return LeaseLost(
        f"this driver lost run {run_id}'s lease (it held epoch {epoch}; the lease {now}):"
        " another driver took the run over, so nothing more of this driver was recorded and"
        " it stopped; the run goes on under its new driver (see `proctor history`)",
        details={"run_id": run_id, "epoch": epoch, "current_epoch": current},
    )

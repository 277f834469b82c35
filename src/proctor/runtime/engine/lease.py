"""One driver at a time per run: a lease row in the run store, with expiry and a fencing epoch.

A holder is ``host|pid|process start time|nonce``. A lease expires after
:data:`LEASE_TTL_SECONDS` (or ``PROCTOR_LEASE_TTL`` seconds, which ``proctor worker`` sets short
and renews from its heartbeat) unless renewed (the driver renews it before each step and before
its seal); a lease whose holder ran on this host and whose process is gone (a crashed driver) is
taken over at once. A holder on another machine is known dead only by its lease running out.

Each lease carries an epoch the store keeps (:mod:`proctor.runtime.records.fencing`): every
write of a driver is refused ``lease_lost`` once another holder took the run, and a renewal
that finds the lease gone stops the driver before its next claim or seal.

A taker that finds a call claimed under a lapsed lease first ends what that call may still be
running (:func:`end_lapsed_effect`): on this host, the process tree the claim recorded (every
descendant of the lapsed driver: its command's sandbox included), waiting until it is gone.
An effect in flight on another host cannot be recalled from here.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proctor.errors import LeaseLost
from proctor.runtime.records.fencing import host_name, started_at

if TYPE_CHECKING:
    from proctor.runtime.records.runs import RunStore

__all__ = [
    "LEASE_TTL_LEAST",
    "LEASE_TTL_SECONDS",
    "acquire_lease",
    "check_lease",
    "end_lapsed_effect",
    "holder_dead",
    "holder_id",
    "lease_ttl",
    "renew_lease",
]

LEASE_TTL_SECONDS = 600.0
LEASE_TTL_LEAST = 1.0
"""The shortest lease :func:`lease_ttl` answers (``PROCTOR_LEASE_TTL`` below it is not used)."""
_GONE_SECONDS = 10.0


def lease_ttl() -> float:
    """``PROCTOR_LEASE_TTL`` when it is a number of seconds from 1 to 86400, else
    :data:`LEASE_TTL_SECONDS`."""
    text = os.environ.get("PROCTOR_LEASE_TTL")
    if not text:  # the usual case, without the refused float("") of an unset variable
        return LEASE_TTL_SECONDS
    try:
        value = float(text)
    except ValueError:
        return LEASE_TTL_SECONDS
    return value if LEASE_TTL_LEAST <= value <= 86400.0 else LEASE_TTL_SECONDS


def holder_id() -> str:
    """This process's identity as a lease holder."""
    try:
        started = started_at(os.getpid())
    except Exception:  # no /proc and no psutil: the lease then only expires
        started = 0.0
    return f"{host_name()}|{os.getpid()}|{started:.2f}|{os.urandom(4).hex()}"


def holder_dead(holder: str) -> bool:
    """True when the holder ran on this host and its process is gone (a crashed driver)."""
    parts = holder.split("|")
    if len(parts) != 4 or parts[0] != host_name():
        return False
    try:
        return abs(started_at(int(parts[1])) - float(parts[2])) >= 0.5
    except (ValueError, ImportError):
        return False
    except Exception:  # no such process (FileNotFoundError, psutil.NoSuchProcess): gone
        return True


def acquire_lease(store: RunStore, run_id: str, holder: str) -> bool:
    """Take the run's lease for ``holder``; False when a live driver holds it."""
    current = store.acquire_lease(run_id, holder, lease_ttl())
    if current is not None and holder_dead(current):
        current = store.acquire_lease(run_id, holder, lease_ttl(), steal_from=current)
    return current is None


def renew_lease(store: RunStore, run_id: str, holder: str) -> None:
    """Extend ``holder``'s lease by another TTL.

    Raises:
        LeaseLost: the lease is no longer ``holder``'s (another driver took the run over, or
            it was released): the driver must stop before its next claim or seal.
        StoreError: the store could not be reached (the driver stops likewise).
    """
    if store.renew_lease(run_id, holder, lease_ttl()):
        return
    lease = store.lease(run_id)
    now = "it was released" if lease is None or not lease.holder else "another driver holds it"
    raise LeaseLost(
        f"this driver could not renew run {run_id}'s lease ({now}), so it stopped before its"
        " next step; the run goes on under the driver that holds it",
        details={"run_id": run_id, "epoch": None if lease is None else lease.epoch},
    )


def check_lease(store: RunStore, run_id: str, holder: str) -> None:
    """Make sure ``holder`` still holds the run's lease, unexpired, without renewing it (one
    read, no commit): before a seal whose driver took or renewed the lease a moment ago, as a
    renewal would, but the lease still runs for most of its time.

    Raises:
        LeaseLost: the lease is no longer ``holder``'s (another driver took the run over, it
            was released, or it ran out): the driver must stop before its seal.
    """
    lease = store.lease(run_id)
    if lease is not None and lease.holder == holder and not lease.lapsed:
        return
    now = "it was released" if lease is None or not lease.holder else "another driver holds it"
    if lease is not None and lease.holder == holder:
        now = "it ran out"
    raise LeaseLost(
        f"this driver no longer holds run {run_id}'s lease ({now}), so it stopped before its"
        " seal; the run goes on under the driver that holds it",
        details={"run_id": run_id, "epoch": None if lease is None else lease.epoch},
    )


def end_lapsed_effect(site: Mapping[str, Any] | None) -> str:
    """End what a call claimed under a lapsed lease may still be running, as far as this host
    can: ``"ended"`` (its process tree on this host was killed and is gone), ``"gone"``
    (nothing of it runs here any more), ``"self"`` (this process claimed it) or
    ``"other_host"`` (it ran elsewhere: it cannot be recalled).

    The tree is the one the claim recorded when its program started (its sandbox's first
    process and its process group); a claim whose program had not recorded it yet ends every
    descendant of the claiming driver (a driver's programs all are). The claiming driver itself
    is not killed: frozen past its lease, it wakes to find every write refused ``lease_lost``
    and stops by itself.
    """
    if not site or site.get("host") != host_name():
        return "other_host"
    try:
        pid, started = int(site["pid"]), float(site["started"])
    except (KeyError, TypeError, ValueError):
        return "other_host"
    if pid == os.getpid():
        return "self"
    import psutil

    family: list[Any] = []
    tree = site.get("tree")
    if isinstance(tree, Mapping):
        for key in ("inner", "pid"):
            member = _same(psutil, tree.get(key), tree.get(f"{key}_started"))
            if member is not None:
                family.append(member)
                with contextlib.suppress(psutil.Error):
                    family += member.children(recursive=True)
        with contextlib.suppress(OSError, TypeError, ValueError):
            if family:
                os.killpg(int(tree["pid"]), 9)  # its process group (setsid'd escapees aside)
    else:
        driver = _same(psutil, pid, started)
        if driver is not None:
            with contextlib.suppress(psutil.Error):
                family = driver.children(recursive=True)
    if not family:
        return "gone"
    for member in family:
        with contextlib.suppress(psutil.Error):
            member.kill()
    alive = list(family)
    deadline = time.monotonic() + _GONE_SECONDS
    # a stopped parent cannot reap its children: a zombie is gone as far as effects go
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _running(p)]
        if alive:
            time.sleep(0.01)
    return "ended"


def _same(psutil: Any, pid: Any, started: Any) -> Any:
    """The process ``pid`` while it is the one that started at ``started``, else ``None``."""
    try:
        process = psutil.Process(int(pid))
        if started is not None and abs(process.create_time() - float(started)) >= 0.5:
            return None
        return process
    except (psutil.Error, TypeError, ValueError):
        return None


def _running(process: Any) -> bool:
    import psutil

    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False

"""The sandbox self-test, and the choice it feeds: what a process call runs under.

The seam with :mod:`proctor.runtime.boundary.sandbox`: that module says how a sandbox is built
(the spec, the bubblewrap command line, whether bubblewrap starts at all); this one proves,
once per proctor process, that a sandbox built that way isolates here, before the first call
relies on it. A bubblewrap that starts but isolates nothing (a host whose AppArmor rule makes
user namespaces fail open, a wrapper in its place) passes the probe and fails this.

:func:`self_test` starts a small Python program in a sandbox made like a call's (the same
system folders and toolchains, an empty home, no network) and checks, from the host:

- ``home_hidden``: the host entries of the account's home are absent (but the toolchains bound
  inside it);
- ``planted_file_hidden``: a file proctor plants on the host for the test cannot be read;
- ``network_unreachable``: a loopback listener proctor opens on the host cannot be reached (and
  accepted no connection);
- ``proc_isolated``: ``/proc`` lists no host process (proctor's pid is absent, and only the
  sandbox's own few are there);
- ``capabilities_empty``: the effective, permitted and ambient capability sets are empty.

The answer is kept for the process, per bubblewrap executable (its identity on disk) and
kernel release. It is not kept in a file: whether namespaces isolate can change with a setting
(a sysctl, an AppArmor profile) that neither names, and one probe per process is cheap.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from proctor.contracts.values import dataclass
from proctor.errors import RefusedCall
from proctor.runtime.boundary.sandbox import EgressLog, SandboxSpec, SandboxUse, bwrap_argv, probe
from proctor.runtime.boundary.sandbox_setting import BWRAP_ENV, SANDBOX_ENV, SandboxSetting
from proctor.runtime.boundary.sandbox_view import (
    account_homes,
    etc_secrets,
    system_view,
    toolchains,
)

__all__ = ["CHECKS", "SelfTest", "sandbox_for_call", "self_test"]

CHECKS = (
    "home_hidden",
    "planted_file_hidden",
    "network_unreachable",
    "proc_isolated",
    "capabilities_empty",
)
"""The self-test's checks, in the order a receipt lists them."""

_TIMEOUT = 20.0
_HOME_SAMPLES = 4
_MAX_PIDS = 4
# The probe: told the paths and the port, it answers what it could see, as JSON.
_PROBE = r"""
import json, os, socket, sys
home, planted, port, host_pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
out = {}
out["home_seen"] = [n for n in sys.argv[5:] if os.path.lexists(os.path.join(home, n))]
try:
    with open(planted, "rb") as f:
        out["planted"] = f.read().decode("ascii", "replace")
except OSError:
    out["planted"] = None
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    out["connected"] = True
except OSError:
    out["connected"] = False
pids = [p for p in os.listdir("/proc") if p.isdigit()]
out["pids"] = len(pids)
out["host_pid_seen"] = host_pid in pids
caps = {}
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith(("CapEff:", "CapPrm:", "CapAmb:")):
            key, value = line.split(":", 1)
            caps[key] = int(value.strip(), 16)
out["caps"] = caps
print(json.dumps(out))
"""


@dataclass(frozen=True)
class SelfTest:
    """The self-test's answer: ``checks`` in :data:`CHECKS` order; ``reason`` says why it
    did not pass (never a host path)."""

    checks: tuple[tuple[str, bool], ...]
    reason: str = ""

    @property
    def verified(self) -> bool:
        """Every check ran and held."""
        return len(self.checks) == len(CHECKS) and all(held for _, held in self.checks)

    def failed(self) -> list[str]:
        """The names of the checks that did not hold (all of them when the probe failed)."""
        held = dict(self.checks)
        return [name for name in CHECKS if not held.get(name, False)]


_RESULTS: dict[tuple[object, ...], SelfTest] = {}
_LOCK = threading.Lock()


def self_test(bwrap: str) -> SelfTest:
    """Whether a sandbox built by ``bwrap`` isolates here (cached per process, per
    executable and kernel release)."""
    try:
        info = os.stat(bwrap)
    except OSError:
        return SelfTest((), "the bubblewrap named is gone")
    key = (bwrap, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, os.uname().release)
    with _LOCK:
        known = _RESULTS.get(key)
        if known is None:
            known = _RESULTS[key] = _run(bwrap)
        return known


def _home() -> Path | None:
    with contextlib.suppress(KeyError):
        return Path(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir))
    return None


def _run(bwrap: str) -> SelfTest:
    home = _home()
    system, links = system_view()
    homes = account_homes()
    tools = toolchains(
        env={"PATH": os.environ.get("PATH", "")},
        argv0=None,
        cwd=Path("/"),
        workspace_root=None,
        declared=(),
        shown=system,
        homes=homes,
        hidden=(),
    )
    # the home's entries that no toolchain passes through, which must not be seen
    through = {t.relative_to(home).parts[0] for t in tools if home and t.is_relative_to(home)}
    samples: list[str] = []
    if home is not None:
        with contextlib.suppress(OSError):
            samples = sorted(n for n in os.listdir(home) if n not in through)[:_HOME_SAMPLES]
    spec = SandboxSpec(
        cwd=Path("/"),
        hidden=tuple(etc_secrets()),
        scratch=tuple(h for h in homes if h.is_dir()),
        system=tuple(system),
        links=tuple(links),
        toolchains=tuple(tools),
        network=False,
    )
    folder = Path(tempfile.mkdtemp(prefix="proctor-selftest-", dir=_plant_dir()))
    planted = folder / "planted"
    nonce = os.urandom(8).hex()
    planted.write_text(nonce)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        argv = [sys.executable, "-I", "-S", "-c", _PROBE, str(home or "/nonexistent")]
        argv += [str(planted), str(port), str(os.getpid()), *samples]
        try:
            done = subprocess.run(
                bwrap_argv(spec, argv, bwrap=bwrap),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_TIMEOUT,
                env={},
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return SelfTest((), f"the self-test could not run ({type(exc).__name__})")
        accepted = False
        with contextlib.suppress(BlockingIOError):
            listener.accept()[0].close()
            accepted = True
    finally:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)
    try:
        seen = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return SelfTest((), f"the self-test probe did not answer (exit status {done.returncode})")
    if not isinstance(seen, dict):
        return SelfTest((), "the self-test probe did not answer")
    caps = seen.get("caps")
    held = {
        "home_hidden": seen.get("home_seen") == [],
        "planted_file_hidden": seen.get("planted") is None,
        "network_unreachable": seen.get("connected") is False and not accepted,
        "proc_isolated": seen.get("host_pid_seen") is False
        and isinstance(seen.get("pids"), int)
        and seen["pids"] <= _MAX_PIDS,
        "capabilities_empty": isinstance(caps, dict) and len(caps) == 3 and not any(caps.values()),
    }
    result = SelfTest(tuple((name, held[name]) for name in CHECKS))
    if not result.verified:
        result = SelfTest(result.checks, "isolation did not hold: " + ", ".join(result.failed()))
    return result


def _plant_dir() -> str | None:
    """Where the planted file goes: a host folder no sandbox shows (``/var/tmp``), else the
    default temporary folder."""
    return "/var/tmp" if os.access("/var/tmp", os.W_OK) else None


def sandbox_for_call(
    setting: SandboxSetting, *, network: bool, egress: Sequence[str] = ()
) -> SandboxUse:
    """What a process call runs under (admission calls this before anything starts).

    ``egress``: the run's allow entries; under bubblewrap with ``network`` the process reaches
    the network only through the egress proxy, which applies them.

    Under ``required`` and ``auto``, bubblewrap must start (:func:`probe`) and a sandbox built
    like a call's must pass the self-test (:func:`self_test`); the answer and its checks go
    with the call into its receipt.

    Raises:
        RefusedCall: under ``required``: ``sandbox_unavailable`` when bubblewrap does not work
            here, ``sandbox_unverified`` when it starts but the self-test fails (the message
            says what did not hold and how to fix it).
    """
    if setting.mode == "off":
        return SandboxUse("none", "off", network=True, reason=f"{SANDBOX_ENV}=off")
    found = probe(setting.bwrap)
    if not found.available or setting.bwrap is None:
        if setting.mode == "required":
            raise RefusedCall(
                f"this run needs a sandbox for processes and {found.reason}; install "
                "bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces, or, "
                f"on a host you trust, set {SANDBOX_ENV}=auto",
                code="sandbox_unavailable",
                details={"mode": setting.mode},
            )
        return SandboxUse("none", setting.mode, network=True, reason=found.reason)
    tested = self_test(setting.bwrap)
    if tested.verified:
        return SandboxUse(
            "bubblewrap",
            setting.mode,
            network=network,
            bwrap=setting.bwrap,
            egress=tuple(egress),
            log=EgressLog() if network else None,
            verified=True,
            checks=tested.checks,
        )
    reason = f"the sandbox self-test failed: {tested.reason}"
    if setting.mode == "required":
        raise RefusedCall(
            f"this run needs a sandbox for processes and bubblewrap starts here but does not "
            f"isolate ({tested.reason}); check that user namespaces are allowed (an AppArmor "
            f"rule may make them fail open) and that {BWRAP_ENV} names the real bubblewrap, "
            f"or, on a host you trust, set {SANDBOX_ENV}=auto",
            code="sandbox_unverified",
            details={"mode": setting.mode, "failed": tested.failed()},
        )
    return SandboxUse("none", setting.mode, network=True, reason=reason, checks=tested.checks)

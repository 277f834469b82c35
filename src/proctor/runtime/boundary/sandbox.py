"""The process sandbox: how every process a run starts is confined (``docs/sandbox.md``).

A process tool (``command.execute``, ``worker.run``, ``process.start``) never
starts its program directly. Admission decides, once per call, what it runs under
(:func:`proctor.runtime.boundary.sandbox_check.sandbox_for_call`, from the run's
:class:`SandboxSetting`, after the sandbox self-test); the tool turns a
:class:`SandboxSpec` and its argv into a bubblewrap command line (:func:`bwrap_argv`) and starts
that instead. What the spec hides, binds and re-binds read-only for a run is built by
:mod:`proctor.runtime.boundary.sandbox_paths`.

Modes (``PROCTOR_SANDBOX``):

- ``required``: bubblewrap must work here, else the call is refused ``sandbox_unavailable``
  before anything starts (the default over MCP and for managed agents);
- ``auto``: bubblewrap when it works, else the program runs as a trusted host process, marked
  ``trusted_host_process`` in the call's receipt and warned about in the envelope (the CLI's
  and the Python API's default);
- ``off``: never sandboxed; only by an explicit setting, and every such call writes a
  ``sandbox_disabled`` audit event.

``PROCTOR_BWRAP`` names the bubblewrap executable (an absolute path; default ``bwrap`` on the
``PATH``). Pointing it at a missing file is how tests (and operators) make bubblewrap
unavailable without uninstalling it. Whether bubblewrap works is probed once per process and
per executable (:func:`probe`): a missing binary, disabled user namespaces, or a kernel that
refuses any namespace the sandbox needs all make it unavailable.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from proctor.contracts.values import dataclass, field
from proctor.runtime.boundary.sandbox_setting import (
    BWRAP_ENV,
    MODES,
    SANDBOX_ENV,
    SANDBOX_EXTRA,
    SandboxMode,
    SandboxSetting,
    sandbox_setting,
    stricter,
)

if TYPE_CHECKING:
    from proctor.runtime.boundary.netrelay import Relay

__all__ = [
    "BWRAP_ENV",
    "MODES",
    "SANDBOX_ENV",
    "SANDBOX_EXTRA",
    "EgressLog",
    "Probe",
    "SandboxMode",
    "SandboxSetting",
    "SandboxSpec",
    "SandboxUse",
    "bwrap_argv",
    "probe",
    "sandbox_setting",
    "stricter",
]

_PROBE_TIMEOUT = 20.0
_REASON_CHARS = 200
# Namespaces and privileges every sandboxed process loses. The network namespace is never
# shared, egress grant or not: the host's loopback services and abstract unix sockets (X11,
# D-Bus, agents) live in the host's namespace, and a grant reaches the network only through
# the egress proxy (:mod:`proctor.runtime.boundary.egress_proxy`). ``--cap-drop ALL`` matters
# when proctor runs as root: bubblewrap keeps a privileged caller's capabilities otherwise,
# and CAP_SYS_ADMIN would let the program remount / read-write or unmount what hides the home.
_ISOLATION = (
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--cap-drop",
    "ALL",
)
_BASE_MOUNTS = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")
# A call's sandbox starts from bubblewrap's empty root instead: only what its spec names is bound
# into it (the allowlist, :mod:`.sandbox_view`).
_VIEW_MOUNTS = ("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp")


@dataclass(frozen=True)
class Probe:
    """Whether bubblewrap works here; ``reason`` says why not (never a host path)."""

    available: bool
    reason: str = ""


_PROBES: dict[str | None, Probe] = {}
_PROBE_LOCK = threading.Lock()


def probe(bwrap: str | None) -> Probe:
    """Whether ``bwrap`` starts a sandbox with every namespace a process gets (cached per
    process and executable: the answer does not change while proctor runs)."""
    with _PROBE_LOCK:
        known = _PROBES.get(bwrap)
        if known is None:
            known = _PROBES[bwrap] = _probe(bwrap)
        return known


def _probe(bwrap: str | None) -> Probe:
    if bwrap is None:
        return Probe(False, "bubblewrap (bwrap) is not installed")
    try:
        info = os.stat(bwrap)
    except OSError:
        return Probe(False, f"{BWRAP_ENV} or the PATH names no bubblewrap executable")
    if not stat.S_ISREG(info.st_mode) or not os.access(bwrap, os.X_OK):
        return Probe(False, "the bubblewrap named is not an executable file")
    target = next((p for p in ("/bin/true", "/usr/bin/true") if os.path.exists(p)), None)
    argv = [*_ISOLATION, *_BASE_MOUNTS]
    command = [target] if target is not None else ["/bin/sh", "-c", ":"]
    try:
        done = subprocess.run(
            [bwrap, *argv, "--", *command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            env={},
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(False, f"bubblewrap could not be started ({type(exc).__name__})")
    if done.returncode != 0:
        first = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        said = first[0][:_REASON_CHARS] if first else f"exit status {done.returncode}"
        return Probe(False, f"bubblewrap cannot create a sandbox here: {said}")
    return Probe(True)


class EgressLog:
    """What a process asked the egress proxy for during one call.

    ``reached`` lists each destination reached (``{"host", "port", "address"}``, once each, in
    the order first reached); the call's record holds this very list, so what the proxy adds
    while the call runs is in the record written when it ends, and so in its receipt. ``sink``
    (set by admission) audits every decision, refused ones included; ``scrub`` (set by
    admission) cleans the host a program asked for before it is kept (a name can carry a
    secret the program was given).
    """

    def __init__(self, reached: list[dict[str, Any]] | None = None) -> None:
        self.reached: list[dict[str, Any]] = [] if reached is None else reached
        self.sink: Callable[[dict[str, Any]], None] | None = None
        self.scrub: Callable[[str], str] | None = None
        self._lock = threading.Lock()

    def note(self, connection: Mapping[str, Any]) -> None:
        """Record one decision of the proxy (``Connection.to_json()``)."""
        connection = dict(connection)
        if self.scrub is not None:
            connection["host"] = self.scrub(str(connection.get("host", "")))
        with self._lock:
            if connection.get("address") is not None:
                entry = {k: connection[k] for k in ("host", "port", "address")}
                if entry not in self.reached:
                    self.reached.append(entry)
            sink = self.sink
        if sink is not None:
            sink(dict(connection))


@dataclass(frozen=True)
class SandboxUse:
    """What one process call runs under, decided at admission and recorded with the call.

    Attributes:
        used: ``bubblewrap`` or ``none``.
        mode: the mode in force when it was decided.
        network: the process may reach the network: under bubblewrap only through the egress
            proxy, which checks each destination against ``egress``; unsandboxed, directly.
        bwrap: the executable (``used == "bubblewrap"`` only; never recorded).
        reason: why ``none``: the probe's answer under ``auto``, the setting under ``off``.
        egress: the run's egress allow entries (hosts and networks of its authority's grant).
        log: the destinations reached (bubblewrap with ``network`` only).
        verified: the sandbox self-test passed here
            (:func:`proctor.runtime.boundary.sandbox_check.self_test`).
        checks: each of the self-test's checks and whether it held (empty when it did not
            run: under ``off``, or without bubblewrap).
        toolchains: the toolchain folders the call's sandbox bound (known once the tool built
            its sandbox; read back from the record).
        declared: the folders the workspace declares in ``[sandbox] read`` (audited when the
            call is handed over; never recorded here).
    """

    used: Literal["bubblewrap", "none"]
    mode: SandboxMode
    network: bool = False
    bwrap: str | None = field(default=None, compare=False)
    reason: str | None = None
    egress: tuple[str, ...] = ()
    log: EgressLog | None = field(default=None, compare=False)
    verified: bool = False
    checks: tuple[tuple[str, bool], ...] = ()
    toolchains: tuple[str, ...] = ()
    declared: tuple[str, ...] = field(default=(), compare=False)

    @property
    def proxied(self) -> bool:
        """Whether the process's network goes through the egress proxy."""
        return self.used == "bubblewrap" and self.network

    @property
    def trust(self) -> str | None:
        """``trusted_host_process`` (auto, unavailable) or ``sandbox_disabled`` (off)."""
        if self.used == "bubblewrap":
            return None
        return "sandbox_disabled" if self.mode == "off" else "trusted_host_process"

    def to_record(self) -> dict[str, Any]:
        """The form a call's record in the run store keeps (with the log's live list of
        destinations, see :class:`EgressLog`)."""
        record: dict[str, Any] = {
            "used": self.used,
            "mode": self.mode,
            "network": self.network,
            "reason": self.reason,
            "verified": self.verified,
            "checks": [[name, held] for name, held in self.checks],
            "toolchains": list(self.toolchains),
        }
        if self.log is not None:
            record["destinations"] = self.log.reached
        return record

    def receipt_json(self) -> dict[str, Any]:
        """The ``sandbox`` object of the call's receipt (no reason text, no path but the
        toolchains bound); a proxied call's names the destinations its process reached."""
        out: dict[str, Any] = {
            "used": self.used,
            "mode": self.mode,
            "network": self.network,
            "verified": self.verified,
            "checks": [{"check": name, "held": held} for name, held in self.checks],
            "toolchains": list(self.toolchains),
        }
        if self.log is not None:
            out["destinations"] = [dict(d) for d in self.log.reached]
        return out

    def warning(self) -> str | None:
        """The envelope's warning about a call that ran unsandboxed."""
        if self.used == "bubblewrap":
            return None
        if self.mode == "off":
            return f"sandbox_disabled: ran without a sandbox ({SANDBOX_ENV}=off)"
        return (
            "trusted_host_process: ran without a sandbox, with its user's full rights "
            f"({self.reason or 'bubblewrap is unavailable'}); set {SANDBOX_ENV}=required to "
            "refuse such calls instead"
        )

    @classmethod
    def from_record(cls, record: object) -> SandboxUse | None:
        """Read back :meth:`to_record` (``None`` for a call recorded without a sandbox)."""
        if not isinstance(record, Mapping):
            return None
        used, mode = record.get("used"), record.get("mode")
        if used not in ("bubblewrap", "none") or mode not in MODES:
            return None
        reason = record.get("reason")
        reached = record.get("destinations")
        checks = record.get("checks")
        tools = record.get("toolchains")
        return cls(
            used=used,
            mode=mode,
            network=record.get("network") is True,
            reason=reason if isinstance(reason, str) else None,
            log=EgressLog(_destinations(reached)) if isinstance(reached, list) else None,
            verified=record.get("verified") is True,
            checks=tuple(
                (str(c[0]), c[1] is True)
                for c in (checks if isinstance(checks, list) else [])
                if isinstance(c, list) and len(c) == 2
            ),
            toolchains=tuple(str(t) for t in (tools if isinstance(tools, list) else [])),
        )


def _destinations(items: list[Any]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        if isinstance(item, Mapping):
            host, port, address = item.get("host"), item.get("port"), item.get("address")
            if isinstance(host, str) and type(port) is int and isinstance(address, str):
                out.append({"host": host, "port": port, "address": address})
    return out


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandboxed process sees. Every path is a real (symlink-free) absolute path.

    Attributes:
        writable: folders bound read-write (the run's reach roots).
        read_only: paths re-bound read-only on top (authority files inside a writable root,
            the Python installation inside a hidden home).
        hidden: paths made empty and unreadable: a folder becomes an empty read-only tmpfs, a
            file is covered with ``/dev/null``.
        scratch: folders replaced by an empty writable tmpfs (the home, so programs that
            write caches there still work; nothing reaches the host).
        system: the system folders bound read-only (``/usr``, ``/etc`` ...:
            :mod:`.sandbox_view`); nothing else of the host is there unless named above or in
            ``toolchains``.
        links: ``(link, target)`` links made in the sandbox's root (``/bin -> usr/bin``).
        toolchains: the interpreter, virtualenv, ``PATH`` and declared folders bound
            read-only (recorded with the call).
        network: the run grants egress; the process still has only its own loopback, and
            reaches the network through the egress proxy when :func:`bwrap_argv` is given one.
        env: the whole environment of the process (passed to bubblewrap's process, which
            hands it on unchanged; never on a command line, where others could read it).
        cwd: the folder the program starts in.
    """

    cwd: Path
    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    scratch: tuple[Path, ...] = ()
    system: tuple[Path, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    toolchains: tuple[Path, ...] = ()
    network: bool = False
    env: Mapping[str, str] = field(default_factory=dict, repr=False)


# At equal depth a scratch folder is mounted first, a writable root then covers it, read-only
# re-binds come next and hidden paths last, so hiding always wins at the same path.
_ORDER = {"scratch": 0, "bind": 1, "ro_bind": 2, "hide_dir": 3, "hide_file": 3}


def _kind_of(path: Path) -> str | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return "hide_dir" if stat.S_ISDIR(info.st_mode) else "hide_file"


def bwrap_argv(
    spec: SandboxSpec,
    argv: Sequence[str],
    *,
    bwrap: str,
    info_fd: int | None = None,
    relay: Relay | None = None,
) -> list[str]:
    """The bubblewrap command line that runs ``argv`` confined by ``spec``.

    ``info_fd``: a file descriptor bubblewrap writes ``{"child-pid": N}`` to once the sandbox
    is set up (N is the host pid of the sandbox's first process, whose end ends them all).
    ``relay``: the sandbox's crossings (the egress proxy, published ports): their folder is
    bound into the sandbox and ``argv`` runs under the relay that serves them. The sandbox's
    network namespace is its own either way.

    The sandbox's root is an empty tmpfs, read-only once every mount is in place; only the
    spec's folders are bound into it. Paths that do not exist are left out (nothing is created
    on the host). Mounts are ordered
    by depth so an inner one always lands on top of the one that contains it; hidden folders
    are made read-only last, after everything inside them is in place.
    """
    ops: list[tuple[int, int, str, str]] = []

    def add(kind: str, path: Path) -> None:
        text = str(path)
        ops.append((len(path.parts), _ORDER[kind], kind, text))

    for path in spec.scratch:
        if os.path.isdir(path):
            add("scratch", path)
    for path in spec.writable:
        if os.path.isdir(path):
            add("bind", path)
    for path in (*spec.system, *spec.toolchains, *spec.read_only):
        if os.path.exists(path):
            add("ro_bind", path)
    for path in spec.hidden:
        kind = _kind_of(path)
        if kind is not None:
            add(kind, path)
    out = [bwrap, *_ISOLATION]
    if info_fd is not None:
        out += ["--info-fd", str(info_fd)]
    out.extend(_VIEW_MOUNTS)
    for link, target in spec.links:
        out += ["--symlink", target, link]
    remount: list[str] = []
    for _depth, _order, kind, text in sorted(set(ops)):
        if kind == "scratch":
            out += ["--tmpfs", text]
        elif kind == "hide_dir":
            out += ["--tmpfs", text]
            remount.append(text)
        elif kind == "bind":
            out += ["--bind", text, text]
        elif kind == "ro_bind":
            out += ["--ro-bind", text, text]
        else:
            out += ["--ro-bind", "/dev/null", text]
    for text in reversed(remount):
        out += ["--remount-ro", text]
    if relay is not None:
        from proctor.runtime.boundary.netrelay import SANDBOX_FOLDER

        out += ["--bind", str(relay.folder), SANDBOX_FOLDER]
        argv = relay.wrap(argv)
    out += ["--remount-ro", "/"]  # the sandbox's own root, where mount points were made
    out += ["--chdir", str(spec.cwd), "--", *argv]
    return out

"""The policy state a run enforces, loaded once per process for each distinct set of files.

:func:`run_policies` is what a driver calls when a run starts, resumes or makes a turn call. It
reads every file the state is built from (the workspace's ``policies/*.yaml|*.yml``, the
guard config in ``proctor.toml`` / ``.proctor/config``, the guard modules they name, each read
once: :mod:`proctor.policy.guard_files`) and keys the loaded state on their content digests,
with the settings that change it (``PROCTOR_POLICY_PROFILE``, ``PROCTOR_ALLOW_NO_POLICIES``)
and the known tool names. An edited, added or removed file is a new key, so it is loaded again
on the next call: a long process (``proctor mcp``) enforces the files as they are now, never as
they were at its start.
A load that fails is never kept, so each call refuses again until the files are fixed.

When the config names guard modules, the caller's trust is asked on every call, a cached state
too, before anything is used (:func:`proctor.policy.user_guards.load_user_guards`): a trust
withdrawn while a long process runs refuses its next run (``guards_untrusted``).

proctor's shipped policy files are package data, read once per process.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping
from pathlib import Path

from proctor.policy.evaluate import UNRESTRICTED, Unrestricted
from proctor.policy.loader import (
    PolicySource,
    load_policy_sources,
    shipped_policy_sources,
    workspace_policy_sources,
)
from proctor.policy.model import PolicySet
from proctor.policy.profile import (
    ALLOW_NO_POLICIES_ENV,
    allow_unguarded,
    check_profile,
    policy_profile,
)
from proctor.policy.registry import GuardRegistry
from proctor.policy.user_guards import GuardTrust, load_user_guards, read_guard_files

__all__ = ["RunPolicies", "run_policies"]

RunPolicies = tuple[PolicySet | Unrestricted, GuardRegistry, bool]
"""The enforced set (or ``UNRESTRICTED`` under the audited opt-out), the guards, and whether
the run goes unguarded."""

_LIMIT = 16
_entries: OrderedDict[tuple[object, ...], RunPolicies] = OrderedDict()
_lock = threading.Lock()
# one load at a time: a user guard module is executed under a process-wide module name
_build_lock = threading.Lock()
_shipped: list[list[PolicySource]] = []


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _shipped_sources() -> list[PolicySource]:
    if not _shipped:
        _shipped.append(shipped_policy_sources())
    return _shipped[0]


def run_policies(
    workspace: Path, environ: Mapping[str, str], tools: Collection[str], *, trust: GuardTrust
) -> RunPolicies:
    """The policy state a run in ``workspace`` enforces (shipped rules, the workspace's rules
    and guards), from the per-process cache when no file it is built from has changed.

    ``trust`` is asked about the workspace's guard files whenever it names guard modules.

    Raises:
        PolicyLoadError: a policy file or rule is invalid, or a user guard takes a taken name.
        ConfigError: ``guards_untrusted`` (from ``trust``); a bad ``PROCTOR_POLICY_PROFILE``;
            a bad guard config or module; drift
            from the shipped rules under ``default`` (``policy_drift``); zero enforceable rules
            without the opt-out (``no_enforceable_policies``).
    """
    profile = policy_profile(environ)
    sources = workspace_policy_sources(workspace)
    guard_files = read_guard_files(workspace)
    if guard_files.modules:
        trust(guard_files)  # on a cached state too: a withdrawn trust refuses the next run
    key = (
        str(workspace),
        profile,
        environ.get(ALLOW_NO_POLICIES_ENV),
        tuple(sorted(tools)),
        tuple((s.name, _digest(s.text.encode("utf-8"))) for s in sources),
        guard_files.digest,
    )
    with _lock:
        held = _entries.get(key)
        if held is not None:
            _entries.move_to_end(key)
            return held
    with _build_lock:
        registry = GuardRegistry.with_shipped()
        load_user_guards(guard_files, registry, trust=trust)
        policy_set = load_policy_sources([*_shipped_sources(), *sources], registry, tools)
        check_profile(policy_set, profile)
        unguarded = allow_unguarded(policy_set, environ)
        loaded: RunPolicies = (UNRESTRICTED if unguarded else policy_set, registry, unguarded)
        # the bytes executed are the bytes keyed on (read once): the state is theirs
        with _lock:
            _entries[key] = loaded
            while len(_entries) > _LIMIT:
                _entries.popitem(last=False)
    return loaded

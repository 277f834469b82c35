"""The start of a run: checked, prepared, then created whole in one transaction, or not at all.

:func:`check_parts` runs before a run is created (and before a resume drives one):

- the home: ``PROCTOR_HOME`` or a home folder must exist to be found (``home_missing``);
- the signing key: loaded, or created on first use; an exposed, invalid or uncreatable key is
  refused, and so is a missing one where the receipt store holds receipts signed by a key not
  kept trusted (``signing_key_missing``: ``proctor key rotate`` makes a new key on purpose);
- the receipt store: it must be ours (it records a key's id before the key signs there);
- the run store: opened and checked (``store_corrupt``, ``store_unreadable``; a missing one
  that records show existed, ``store_missing``);
- the audit log: its chain and the run store's newest anchor checked from where the last check
  stopped (``audit_broken`` until a person records the break: ``proctor audit accept-break``).

Each refusal is a ``ProctorError`` with its code, raised before anything of the run exists.

:func:`start_run` then prepares the run without recording anything (the step kinds this
version runs, the inputs typed and validated, the reach roots they name, the refusal of a
certain change under ``effects: none``) and records it in **one transaction** of the run
store: the run's row with its inputs (or the refusal that blocks it), its lease, its
``started`` event, and the ``run_started`` audit line, written just before the commit, so the
audit log may name a start that never committed but never misses one that did. A kill before
the commit leaves no run at all; after it the run is whole, and any driver goes on from its
record: a start refused in preparation seals ``blocked`` and never runs a step.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from proctor.contracts.skill import (
    AgentStep,
    AskStep,
    Method,
    OperationStep,
    ProcessStep,
    SkillStep,
    ToolStep,
    WaitStep,
    WorkerStep,
)
from proctor.core.authority import package_covered
from proctor.core.floor import certain_changes
from proctor.errors import ConfigError, ParseError, PolicyLoadError, ProctorError, UsageError
from proctor.parser.inputs import coerce_cli_inputs, drop_absent, validate_inputs
from proctor.receipts.canonical import digest
from proctor.runtime.boundary.egress_allow import EgressAllow
from proctor.runtime.boundary.reach import run_roots
from proctor.runtime.engine.bundles import recover_open_bundles
from proctor.runtime.engine.delivery import load_run_egress
from proctor.runtime.engine.drive import RunDriver
from proctor.runtime.engine.host import RunHost
from proctor.runtime.engine.upkeep import notify_config
from proctor.runtime.home.files import home_dir
from proctor.runtime.limits import max_concurrency_from_env
from proctor.runtime.records.audit_breaks import refuse_broken_log
from proctor.runtime.records.retention import replay_retain
from proctor.runtime.telemetry import enabled as telemetry_enabled
from proctor.runtime.telemetry import trace_id_of
from proctor.runtime.testhooks import kill_point
from proctor.runtime.tools.base import OPERATION_PREFIX

__all__ = ["Acquire", "check_parts", "no_config", "prepare_start", "run_egress", "start_run"]


class Acquire(Protocol):
    """Takes a run's lease for the driver (``fresh``: the run was created in this transaction,
    so no other driver held it before)."""

    def __call__(self, run_id: str, *, fresh: bool = ...) -> None: ...


class _Refused(Exception):
    def __init__(self, code: str, message: str, seal_reason: str) -> None:
        super().__init__(message)
        self.code, self.message, self.seal_reason = code, message, seal_reason


def no_config(root: Path) -> bool:
    """Whether the workspace has no ``proctor.toml`` now (a run's start looks once: its
    ``[notify]``, ``[egress]`` and ``[replay]`` readers would each find none and answer their
    default). ``False`` whenever the look says anything else: each reader then looks itself."""
    try:
        os.stat(os.path.join(root, "proctor.toml"))
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return False


def run_egress(root: Path, bare: bool) -> EgressAllow:
    """The workspace's egress allow-list for a new run (:func:`.delivery.load_run_egress`;
    empty with no ``proctor.toml``, ``bare``).

    Raises:
        ConfigError: ``proctor.toml`` is invalid or an entry is refused.
    """
    return EgressAllow() if bare else load_run_egress(root)


def check_parts(host: RunHost, *, bare: bool = False) -> bool:
    """Check the home, the signing key, the receipt store and the run store (``bare``: the
    workspace was just seen to have no ``proctor.toml``, so no ``[notify]`` to check).

    Returns whether a bundle journal was open when the run store was read (in the read of the
    audit log's anchor, :meth:`RunStore.start_reads`): :func:`start_run`'s recovery need not
    read it again (``journals``).

    Raises:
        ConfigError: ``notify_config_invalid`` (``proctor.toml``'s ``[notify]`` or
            ``[approvals]``); ``home_missing``; ``max_concurrency_invalid``
            (``PROCTOR_MAX_CONCURRENCY`` set to anything but a positive integer);
            ``signing_key_exposed``, ``signing_key_invalid``, ``signing_key_unreadable``,
            ``signing_key_uncreatable``, ``signing_key_missing``.
        ReceiptInvalid: ``receipt_store_foreign``.
        StoreError: ``store_corrupt``, ``store_unreadable``, ``store_missing``,
            ``store_error``, ``receipt_store_io``, ``audit_broken``, ``audit_unreadable``.
    """
    home_dir(host.environ)
    max_concurrency_from_env(host.environ)
    host.receipts.check()
    host.load_key()
    store = host.store  # opening it is the check (quick_check on a first open)
    log = host.audit.path
    anchor, journals = store.start_reads()  # the anchor and the journal in one read
    refuse_broken_log(log, anchor, log.name)
    host.audit.known_head = anchor  # the seal counts the log on from it (one read, not two)
    # a run that would pause with nobody told is refused before its first step
    if not bare:
        notify_config(host.workspace.root)
    return journals


def start_run(
    host: RunHost,
    driver: RunDriver,
    inputs: Any,
    cli_inputs: list[str] | None,
    acquire: Acquire,
    *,
    recover: bool = True,
    parent: str | None = None,
    link: dict[str, Any] | None = None,
    journals: bool | None = None,
) -> None:
    """Prepare ``driver``'s run and create it in one transaction, holding its lease.

    A child run (``parent``: the run that starts it) is created in the same transaction as its
    parent's ``child_started`` event, so the parent's lease epoch fences the child's start: a
    parent driver that lost its lease starts no child (``lease_lost``). ``link`` (its root
    ``tree``, the parent's run, step and call) goes on its ``run_started`` audit line, and its
    trace is its root's.

    Call :func:`check_parts` first (``journals``: what it returned: ``False``, no bundle
    journal was open when it read the store a moment ago, so none is read again). On return
    the run exists with its inputs (or its recorded refusal) and ``acquire`` took its lease;
    on any raise, nothing of the run exists.

    Raises:
        StoreError: the run store refused the transaction (nothing is recorded).
        ResumeRefused: ``run_busy`` from ``acquire`` (nothing is recorded).
        LeaseLost: the parent's driver lost its lease (nothing is recorded).
    """
    record = driver.record
    record.data.update(prepare_start(driver, inputs, cli_inputs))
    if telemetry_enabled(host.environ):  # a receipt's run leads to its trace (its root's)
        record.data["trace_id"] = trace_id_of(str((link or {}).get("tree") or record.run_id))
    kill_point("start.validated")
    # Bundles a crashed driver left half-applied are rolled back before anything new starts
    # (by the root: a child run starts while its siblings may be applying theirs).
    recovered = recover_open_bundles(host, journals=journals) if recover else []
    driver.recovered = recover  # its drive need not look again: the run has no claim yet
    kill_point("start.recovered")
    if "start_blocked" not in record.data:
        _policy_at_start(host, driver)
    store = host.store
    with store.transaction():
        if parent is not None:
            store.append_event(parent, "child_started", {"run_id": record.run_id})
        store.create_run(record)
        kill_point("start.created")
        acquire(record.run_id, fresh=True)
        authority = driver.authority.to_json()  # the event's and the audit line's (not changed)
        store.append_event(record.run_id, "started", {"authority": authority})
        kill_point("start.recorded")
        host.audit.emit(
            "run_started",
            run_id=record.run_id,
            step_index=None,
            skill=driver.skill.package.name,
            method=record.method,
            package_digest=driver.skill.package_digest,
            authority=authority,
            recovered_bundles=recovered,
            **(link or {}),
        )
        kill_point("start.audited")
    driver.fresh = True  # created whole by this driver: nothing of it was recorded before
    kill_point("start.committed")


def _policy_at_start(host: RunHost, driver: RunDriver) -> None:
    """Load the policy state the run's governor enforces now, so its digest is written with
    the run's row, in the start's transaction, not in a transaction of its own when the
    governor is built (which then enforces this state). A state that does not load is left
    for the governor to load again and refuse (its run seals ``blocked``); a start refused in
    preparation loads none (its receipt binds no policy)."""
    try:
        loaded = host.policy(driver.real_root)
    except (PolicyLoadError, ConfigError):
        return
    policies, _guards, unguarded = loaded
    driver.record.data["policy_digest"] = None if unguarded else getattr(policies, "digest", None)
    driver.start_policies = loaded


def prepare_start(driver: RunDriver, inputs: Any, cli_inputs: list[str] | None) -> dict[str, Any]:
    """What the run's record starts with: ``inputs``, ``inputs_digest`` and ``roots``, and
    ``start_blocked`` (``code``, ``message``, ``seal_reason``) when the start is refused.

    Nothing is recorded or executed. The refused value is never echoed: messages say which
    input is wrong and why, and are scrubbed of secrets.
    """
    fields: dict[str, Any] = {}
    try:
        _check_package(driver)
        _check_environment(driver)
        _check_kinds(driver.method)
        _check_operations(driver)
        values = _inputs(driver.method, inputs, cli_inputs)
        try:  # the folders a reach: inputs run's inputs name, resolved once (boundary.reach)
            roots = run_roots(
                driver.authority, driver.method.inputs, values, driver.s.workspace.root
            )
        except UsageError as exc:
            raise _Refused(exc.code, exc.message, "inputs_invalid") from exc
        fields.update(inputs=values, inputs_digest=digest(values), roots=roots)
        _refuse_certain_changes(driver)
        if _retains(driver):  # kept in the run: whoever resumes it retains too
            fields["retain"] = True
    except _Refused as refused:
        fields["start_blocked"] = {
            "code": refused.code,
            "message": driver.sanitizer.text(refused.message),
            "seal_reason": refused.seal_reason,
        }
    return fields


def _retains(driver: RunDriver) -> bool:
    """Whether the workspace asks runs to keep what a replay needs (``[replay] retain``,
    :mod:`proctor.runtime.records.retention`); a malformed setting refuses the run."""
    if getattr(driver.s, "retain", False):
        return True
    if driver.bare:  # no proctor.toml a moment ago (:func:`no_config`): no [replay]
        return False
    try:
        return replay_retain(driver.s.workspace.root)
    except ConfigError as exc:
        raise _Refused(exc.code, exc.message, "admission_refused") from exc


def _check_package(driver: RunDriver) -> None:
    """Refuse a run whose package the authority's ``packages`` does not cover: the root of a
    tree, or a child a skill step calls (its parent's step then fails, and nothing of the
    child runs)."""
    patterns = driver.authority.packages
    if patterns is None:
        return
    identity = driver.skill.identity
    if not identity or not package_covered(patterns, identity):
        shown = identity or f"{driver.skill.package.name} (a package with no identity)"
        raise _Refused(
            "package_not_allowed",
            f"the run's authority does not cover the package {shown}: its packages allow"
            f" {', '.join(patterns) or 'none'}",
            "admission_refused",
        )


def _check_environment(driver: RunDriver) -> None:
    """Refuse a run whose package declares a required environment variable the session does
    not set, before any step (the value is never shown, only the name)."""
    profile = driver.skill.package.profile
    if profile is None:
        return
    missing = [name for name in profile.environment.required if name not in driver.s.environ]
    if missing:
        raise _Refused(
            "environment_missing",
            f"the package requires the environment variable(s) {', '.join(missing)}, which"
            " are not set",
            "inputs_invalid",
        )


# the step kinds this version runs (a tuple made once: a union written in the call is built
# again at every start)
_KINDS = (ToolStep, AskStep, AgentStep, OperationStep, SkillStep, WorkerStep, ProcessStep, WaitStep)


def _check_kinds(method: Method) -> None:
    for step in method.steps:
        if not isinstance(step, _KINDS):
            kind = type(step).__name__.removesuffix("Step").lower()
            raise _Refused(
                "step_kind_unsupported",
                f"step '{step.id}' is a {kind} step, which this version of proctor cannot"
                " run yet; no step of the run was executed",
                "admission_refused",
            )


def _inputs(method: Method, inputs: Any, cli_inputs: list[str] | None) -> dict[str, Any]:
    try:
        values: dict[str, Any] = dict(inputs or {})
        if cli_inputs:
            values.update(coerce_cli_inputs(cli_inputs, method.inputs))
        values = drop_absent(values, method.inputs)
        validate_inputs(values, method.inputs)
    except (UsageError, ParseError) as exc:
        raise _Refused(exc.code, exc.message, "inputs_invalid") from exc
    return values


def _check_operations(driver: RunDriver) -> None:
    """Refuse, before any step runs, an operation step naming no operation of the run's
    connectors (a connector that does not parse blocks the run when its governor is built)."""
    wanted = [s for s in driver.method.steps if isinstance(s, OperationStep)]
    if not wanted:
        return
    try:
        ops = driver.operation_tools()
    except ProctorError:
        return
    for step in wanted:
        if OPERATION_PREFIX + step.operation not in ops:
            raise _Refused(
                "tool_unknown",
                f"step '{step.id}' names operation {step.operation!r}, which no connector of"
                " the package or the workspace declares (see `proctor connector list`)",
                "admission_refused",
            )


def _refuse_certain_changes(driver: RunDriver) -> None:
    # under effects: none, the run's or a step's own (the narrowest applies to the step)
    steps = [s for s in driver.method.steps if driver.step_authority(s).effects == "none"]
    if not steps:
        return
    tools = driver.s.tools
    fixed = [
        (step.id, step.tool, tools[step.tool].effect)
        for step in steps
        if isinstance(step, ToolStep) and step.tool in tools
    ]
    fixed += [
        (step.id, "command.execute", "process") for step in steps if isinstance(step, ProcessStep)
    ]
    if any(isinstance(step, OperationStep) for step in steps):
        try:  # a connector that does not parse blocks the run when its governor is built
            ops = driver.operation_tools()
        except ProctorError:
            ops = {}
        fixed += [
            (step.id, name, ops[name].effect)
            for step in steps
            if isinstance(step, OperationStep)
            and (name := OPERATION_PREFIX + step.operation) in ops
        ]
    changes = certain_changes(fixed)
    if changes:
        raise _Refused(
            "effects_none",
            "these steps change something and their authority is effects: none: "
            + ", ".join(changes)
            + "; no step was executed",
            "admission_refused",
        )

"""Start or go on with one child run (a ``skill:`` step's), in the session of its root.

A child run is a run like any other: its record, its lease, its steps, calls and receipts are
its own, created whole in one transaction (:func:`.start.start_run`) under an id derived from
its parent's (so a driver that crashed finds it). What differs:

- its authority is the parent's, as narrowed for the parent's method, narrowed again by the
  child's own method (a child never widens it); its depth below the root is recorded;
- its record never names its parent: the parent's step records the child;
- the root's driver rolls back half-applied bundles for the whole tree, once, before any child
  runs (a child's siblings may be applying theirs now);
- answers the root received for it are recorded in its store before it is driven on;
- it draws on its root's receipt budget: starting reserves its own run receipt (and one for a
  refused step) there, refused ``receipt_budget_exceeded`` before it exists; once it sealed,
  its tree's size is added to its parent's record (``child_receipts``), which a later driver
  of the parent counts on the budget with the parent's own steps and calls;
- it records its ``reuse_key`` (the digest of its package digest, method and inputs); a call
  with ``reuse`` finds the newest earlier completed child of that key sealed recently enough
  and, instead of running, seals at once with that child's result, its run receipt naming the
  reused run's receipt (``reused_from``).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from proctor.contracts.envelope import RunEnvelope
from proctor.receipts.canonical import digest
from proctor.runtime.engine.drive import RunDriver
from proctor.runtime.engine.host import ChildCall, RunHost
from proctor.runtime.engine.start import start_run
from proctor.runtime.packages.resolve import resolve_skill
from proctor.runtime.records.runs import RunRecord

__all__ = ["ChildHost", "drive_child"]


class ChildHost(RunHost, Protocol):
    """What driving a child uses of its root's session (the session implements it)."""

    def envelope(self, run_id: str) -> RunEnvelope: ...

    def _acquire(self, run_id: str, *, fresh: bool = False) -> None: ...

    def _release(self, run_id: str) -> None: ...

    def _record(self, run_id: str) -> RunRecord: ...

    def _reload(self, record: RunRecord) -> tuple[Any, Any]: ...

    def _close(self, record: RunRecord, outcome: str) -> RunEnvelope: ...


def drive_child(session: ChildHost, call: ChildCall) -> RunEnvelope:
    """Drive the child ``call`` names to its seal or its next pause; a sealed child's envelope
    is returned as it is (nothing runs again).

    Raises:
        UsageError / ParseError: the child's reference or package is invalid (no child exists).
        ResumeRefused: ``run_busy``, ``package_changed``.
        RefusedCall: ``receipt_budget_exceeded``: the tree's receipt budget has no room for a
            new child (it is not started).
        RunInterrupted: a stop was requested (the child waits for its root's resume).
    """
    store = session.store
    record = store.get_run(call.run_id)
    if record is None:
        if call.close is not None:
            raise AssertionError("a child that never started cannot be closed")  # pragma: no cover
        envelope = _start(session, call)
        _count_sealed(session, call, envelope)
        return envelope
    if record.status == "sealed":
        return session.envelope(call.run_id)
    envelope = _go_on(session, call)
    _count_sealed(session, call, envelope)
    return envelope


def _go_on(session: ChildHost, call: ChildCall) -> RunEnvelope:
    store = session.store
    session._acquire(call.run_id)
    try:
        record = session._record(call.run_id)
        if call.close is not None:
            return session._close(record, call.close)
        skill, method = session._reload(record)
        if call.decisions:
            store.record_decisions(call.run_id, call.decisions)
            for address in call.decisions:
                store.append_event(call.run_id, "decision_recorded", {"address": address})
        store.update_run(call.run_id, status="running")
        # the child goes on in this process: where it hangs in its root's trace
        link = _link(session, call)
        session.audit.emit("run_continued", run_id=call.run_id, step_index=None,
                           skill=record.skill, method=record.method, **link)  # fmt: skip
        driver = RunDriver(session, record, skill, method, call.stop)
        driver.serial, driver.ledger, driver.receipts = call.serial, call.ledger, call.receipts
        return driver.drive()
    finally:
        session._release(call.run_id)


_COUNT_LOCK = threading.Lock()


def _count_sealed(session: ChildHost, call: ChildCall, envelope: RunEnvelope) -> None:
    """A child that sealed in this drive adds its receipt tree to its parent's record
    (``child_receipts``), so a later driver of the parent counts it on the tree's budget."""
    if envelope.status != "sealed" or call.parent_run_id is None:
        return
    store = session.store
    child = store.get_run(call.run_id)
    size = int(((child.data if child else {}).get("receipt_tree") or {}).get("size") or 1)
    with _COUNT_LOCK:  # the siblings of a fan-out seal in threads; one driver holds the root
        parent = store.get_run(call.parent_run_id)
        before = int((parent.data if parent else {}).get("child_receipts") or 0)
        store.update_run(call.parent_run_id, data={"child_receipts": before + size})


def _link(session: ChildHost, call: ChildCall) -> dict[str, Any]:
    """Where the child hangs in its tree, for its audit lines (and so its trace): the root,
    the parent run, the parent's step and index, and the parent's call when one started it.
    The audit log may name a parent; a receipt never does."""
    if call.parent_run_id is None:
        return {}
    link: dict[str, Any] = {"tree": _tree_of(session, call), "parent_run_id": call.parent_run_id}
    link.update(parent_step=call.parent_step, parent_step_index=call.parent_step_index)
    if call.parent_call_id is not None:
        link["parent_call_id"] = call.parent_call_id
    return link


def _tree_of(session: ChildHost, call: ChildCall) -> str:
    """The root run of the tree ``call`` belongs to (its parent's root, or the parent)."""
    if call.parent_run_id is None:
        return call.run_id
    parent = session.store.get_run(call.parent_run_id)
    tree = (parent.data if parent else {}).get("tree")
    return tree if isinstance(tree, str) else call.parent_run_id


def _act_of(session: ChildHost, call: ChildCall) -> Any:
    """The act the host stated for the run that starts the child (``None`` when none)."""
    if call.parent_run_id is None:
        return None
    parent = session.store.get_run(call.parent_run_id)
    return (parent.data if parent else {}).get("act")


def _start(session: ChildHost, call: ChildCall) -> RunEnvelope:
    from proctor.parser.skill import select_method

    root = session.workspace.root
    skill = resolve_skill(
        call.ref, cwd=Path(call.base), workspace_root=root, environ=session.environ
    )
    if skill.package.profile is None:
        from proctor.errors import UsageError

        raise UsageError(
            f"child skill {skill.package.name} has no run.yaml, so it has no method to run",
            code="no_methods",
        )
    method_name, method = select_method(skill.package.profile, skill.method)
    if call.receipts is not None:
        from proctor.core.budget import RUN_RECEIPTS

        call.receipts.reserve(RUN_RECEIPTS)  # refused: the child never exists
    act = _act_of(session, call)
    reused: dict[str, Any] = {"package": skill.identity, "package_digest": skill.package_digest,
                              "method": method_name, "inputs": call.inputs}  # fmt: skip
    if act is not None:  # a child reading $run.act is reused only under the same act
        reused["act"] = act
    key = digest(reused)
    source = None
    if call.reuse_max_age is not None:
        since = datetime.now(UTC) - timedelta(seconds=call.reuse_max_age)
        source = session.store.find_reusable(key, since=since.isoformat(timespec="microseconds"))
    record = RunRecord(
        run_id=call.run_id,
        skill=skill.package.name,
        method=method_name,
        data={
            "package": skill.label,
            "package_folder": str(skill.folder),
            "package_digest": skill.package_digest,
            "authority": dict(call.authority),
            "started_at": session.clock().isoformat(),
            "depth": call.depth,
            "reuse_key": key,
            # the tree's root: limits the whole tree shares (live processes) count by it
            "tree": _tree_of(session, call),
        },
    )
    if skill.origin is not None:
        record.data["origin"] = skill.origin
    if skill.identity:  # the column history lists, and the data the receipt binds
        record.identity = record.data["identity"] = skill.identity
    if act is not None:  # $run.act in a child: the act of the run that started it
        record.data["act"] = act
    if source is not None:
        record.data["reused_from"] = {"run_id": source.run_id, "receipt_id": source.receipt_id}
    driver = RunDriver(session, record, skill, method, call.stop)
    driver.serial, driver.ledger = call.serial, call.ledger
    driver.receipts, driver.receipts_counted = call.receipts, call.receipts is not None
    start_run(
        session, driver, call.inputs, None, session._acquire, recover=False,
        parent=call.parent_run_id, link=_link(session, call),
    )  # fmt: skip
    try:
        if source is not None and "start_blocked" not in record.data:
            envelope = source.data.get("envelope") or {}
            return driver.seal_reused(envelope.get("result"))
        return driver.drive()
    finally:
        session._release(call.run_id)

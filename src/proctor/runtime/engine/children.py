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
- it records its ``reuse_key`` (the digest of its package digest, method and inputs); a call
  with ``reuse`` finds the newest earlier completed child of that key sealed recently enough
  and, instead of running, seals at once with that child's result, its run receipt naming the
  reused run's receipt (``reused_from``).
"""

from __future__ import annotations

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

    def _acquire(self, run_id: str) -> None: ...

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
        RunInterrupted: a stop was requested (the child waits for its root's resume).
    """
    store = session.store
    record = store.get_run(call.run_id)
    if record is None:
        if call.close is not None:
            raise AssertionError("a child that never started cannot be closed")  # pragma: no cover
        return _start(session, call)
    if record.status == "sealed":
        return session.envelope(call.run_id)
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
        driver = RunDriver(session, record, skill, method, call.stop)
        driver.serial, driver.ledger = call.serial, call.ledger
        return driver.drive()
    finally:
        session._release(call.run_id)


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
    key = digest({"package_digest": skill.package_digest, "method": method_name,
                  "inputs": call.inputs})  # fmt: skip
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
        },
    )
    if skill.origin is not None:
        record.data["origin"] = skill.origin
    if source is not None:
        record.data["reused_from"] = {"run_id": source.run_id, "receipt_id": source.receipt_id}
    driver = RunDriver(session, record, skill, method, call.stop)
    driver.serial, driver.ledger = call.serial, call.ledger
    start_run(session, driver, call.inputs, None, session._acquire, recover=False)
    try:
        if source is not None and "start_blocked" not in record.data:
            envelope = source.data.get("envelope") or {}
            return driver.seal_reused(envelope.get("result"))
        return driver.drive()
    finally:
        session._release(call.run_id)

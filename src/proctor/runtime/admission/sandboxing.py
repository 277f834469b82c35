"""The sandbox a process call runs in, chosen at admission (``docs/sandbox.md``).

:func:`choose_sandbox` runs before the approval floor, so a call that cannot run under
``PROCTOR_SANDBOX=required`` is refused (``sandbox_unavailable``, ``sandbox_unverified``,
``sandbox_read_invalid``) before a person is asked to approve it, and nothing starts.
:func:`hand_over` gives the choice to the tool (through ``ToolContext.extras``) and writes the
``sandbox_disabled`` audit event of a call under ``off`` and the ``sandbox_read_declared`` event
of a call given ``[sandbox] read`` folders; the choice is recorded with the call (``sandbox`` in
its settled record), which is what its receipt and the envelope's warning are built from.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import replace
from proctor.errors import ProctorError, RefusedCall
from proctor.runtime.boundary.sandbox_setting import (
    SANDBOX_EXTRA,
    SANDBOX_RECORD_EXTRA,
    SandboxSetting,
    sandbox_setting,
)

if TYPE_CHECKING:
    from pathlib import Path

    from proctor.core.authority import Authority
    from proctor.runtime.boundary.sandbox import SandboxUse
    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.tools.base import Tool

__all__ = ["choose_sandbox", "hand_over"]


def choose_sandbox(
    setting: SandboxSetting | None, authority: Authority, tool: Tool, root: Path | None = None
) -> SandboxUse | None:
    """What a call of ``tool`` runs under (``None`` for a tool that starts no process).

    ``setting`` is the run's (``None``: ``PROCTOR_SANDBOX`` of this process, else
    ``required``). A sandboxed process never shares the host's network; when the run's
    authority holds an egress grant it reaches the network through the egress proxy, which
    checks each destination against the grant. ``root``: the workspace, whose
    ``[sandbox] read`` folders a sandboxed call is given (each audited by :func:`hand_over`).

    Raises:
        RefusedCall: ``sandbox_unavailable`` (required, and bubblewrap does not work here);
            ``sandbox_unverified`` (required, and the sandbox self-test failed);
            ``sandbox_setting_invalid`` (no setting given and the environment's is invalid);
            ``sandbox_read_invalid`` (``[sandbox] read`` is malformed or names a home).
    """
    if tool.effect != "process":
        return None
    if setting is None:
        try:
            setting = sandbox_setting(os.environ, default="required")
        except ProctorError as exc:
            raise RefusedCall(exc.message, code=exc.code) from exc
    from proctor.runtime.boundary.sandbox_check import sandbox_for_call
    from proctor.runtime.boundary.sandbox_view import declared_reads

    grant = authority.egress
    entries = () if grant is None else (*grant.hosts, *grant.networks)
    use = sandbox_for_call(setting, network=bool(entries), egress=entries)
    if use.used != "bubblewrap" or root is None:
        return use
    try:
        declared = declared_reads(root)
    except ProctorError as exc:
        raise RefusedCall(exc.message, code=exc.code) from exc
    return replace(use, declared=tuple(str(p) for p in declared)) if declared else use


def hand_over(
    use: SandboxUse | None,
    extras: dict[str, Any],
    audit: AuditLog,
    *,
    run_id: str,
    step_index: int | None,
    tool: str,
    call_id: str,
    taint: TaintSet | None = None,
) -> dict[str, Any]:
    """Put the choice in the tool's extras; audit an ``off``; return what the call's settled
    record adds (``{"sandbox": ...}``, or nothing for a tool that starts no process).

    Every connection the process asks the egress proxy for is audited as an
    ``egress_connection`` event (allowed or refused, with the address dialled); the host it
    asked for is scrubbed with the run's ``taint`` before the record or the audit log keeps it."""
    if use is None:
        return {}
    extras[SANDBOX_EXTRA] = use
    if use.log is not None:

        def sink(connection: dict[str, Any]) -> None:
            audit.emit("egress_connection", run_id=run_id, step_index=step_index, tool=tool,
                       call_id=call_id, taint=taint, **connection)  # fmt: skip

        def scrub(host: str) -> str:
            from proctor.runtime.boundary.sanitize import scrub_text

            return scrub_text(host, taint)

        use.log.sink = sink
        use.log.scrub = scrub
    if use.declared:
        # a folder of the host beyond the allowlist, shown because the workspace asks for it
        audit.emit(
            "sandbox_read_declared",
            run_id=run_id,
            step_index=step_index,
            tool=tool,
            call_id=call_id,
            folders=list(use.declared),
        )
    if use.mode == "off":
        audit.emit(
            "sandbox_disabled",
            run_id=run_id,
            step_index=step_index,
            tool=tool,
            call_id=call_id,
            reason=use.reason,
        )
    record = use.to_record()
    extras[SANDBOX_RECORD_EXTRA] = record  # the tool adds the toolchains it bound
    return {"sandbox": record}

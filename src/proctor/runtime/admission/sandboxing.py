"""The sandbox a process call runs in, chosen at admission (``docs/sandbox.md``).

:func:`choose_sandbox` runs before the approval floor, so a call that cannot run under
``PROCTOR_SANDBOX=required`` is refused ``sandbox_unavailable`` before a person is asked to
approve it, and nothing starts. :func:`hand_over` gives the choice to the tool (through
``ToolContext.extras``) and writes the ``sandbox_disabled`` audit event of a call under
``off``; the choice is recorded with the call (``sandbox`` in its settled record), which is
what its receipt and the envelope's warning are built from.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from proctor.errors import ProctorError, RefusedCall
from proctor.runtime.boundary.sandbox_setting import SANDBOX_EXTRA, SandboxSetting, sandbox_setting

if TYPE_CHECKING:
    from proctor.core.authority import Authority
    from proctor.runtime.boundary.sandbox import SandboxUse
    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.tools.base import Tool

__all__ = ["choose_sandbox", "hand_over"]


def choose_sandbox(
    setting: SandboxSetting | None, authority: Authority, tool: Tool
) -> SandboxUse | None:
    """What a call of ``tool`` runs under (``None`` for a tool that starts no process).

    ``setting`` is the run's (``None``: ``PROCTOR_SANDBOX`` of this process, else
    ``required``). A sandboxed process never shares the host's network; when the run's
    authority holds an egress grant it reaches the network through the egress proxy, which
    checks each destination against the grant.

    Raises:
        RefusedCall: ``sandbox_unavailable`` (required, and bubblewrap does not work here);
            ``sandbox_setting_invalid`` (no setting given and the environment's is invalid).
    """
    if tool.effect != "process":
        return None
    if setting is None:
        try:
            setting = sandbox_setting(os.environ, default="required")
        except ProctorError as exc:
            raise RefusedCall(exc.message, code=exc.code) from exc
    from proctor.runtime.boundary.sandbox import sandbox_for_call

    grant = authority.egress
    entries = () if grant is None else (*grant.hosts, *grant.networks)
    return sandbox_for_call(setting, network=bool(entries), egress=entries)


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
    if use.mode == "off":
        audit.emit(
            "sandbox_disabled",
            run_id=run_id,
            step_index=step_index,
            tool=tool,
            call_id=call_id,
            reason=use.reason,
        )
    return {"sandbox": use.to_record()}

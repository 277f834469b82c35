"""What a run's driver resolves once per driver: its spend ledger, connector operations, state
store seam, sandbox setting and credential delivery.

:class:`DriverParts` is the part of :class:`proctor.runtime.engine.drive.RunDriver` that reads
the run's record and environment to build these; each is resolved on first use and refused as
:class:`Blocked` (the run seals blocked with the code) when it cannot be.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from proctor.errors import ConfigError, CredentialError, ProctorError
from proctor.runtime.admission.governor import CallOutcome
from proctor.runtime.tools.base import OPERATION_PREFIX

if TYPE_CHECKING:
    from proctor.contracts.skill import Method
    from proctor.core.authority import Authority
    from proctor.core.spend import SpendLedger
    from proctor.runtime.admission.governor import CallSpec, Deliver
    from proctor.runtime.boundary.sandbox import SandboxSetting
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.connectors.operations import OperationTool
    from proctor.runtime.engine.host import RunHost
    from proctor.runtime.records.runs import RunRecord
    from proctor.runtime.skills import LoadedSkill

__all__ = ["Blocked", "DriverParts"]


class Blocked(Exception):
    """The run cannot go on as prepared: it seals blocked with ``code`` and ``seal_reason``."""

    def __init__(self, code: str, message: str, seal_reason: str) -> None:
        super().__init__(message)
        self.code, self.message, self.seal_reason = code, message, seal_reason


class DriverParts:
    """The run's resources a driver resolves once (see the module docstring)."""

    s: RunHost
    record: RunRecord
    run_id: str
    skill: LoadedSkill
    method: Method
    stop: threading.Event | None
    authority: Authority
    sanitizer: Sanitizer
    ledger: SpendLedger | None
    request_secrets: Mapping[str, str] | None
    _operations: dict[str, OperationTool] | None

    def spend_ledger(self) -> SpendLedger:
        """The ledger the run's tree spends from: the root's, rebuilt from its record (what a
        killed driver held counts as spent)."""
        if self.ledger is None:
            from proctor.core.spend import SpendLedger

            state = self.record.data.get("spend") or {}
            spent = int(state.get("spent") or 0) + int(state.get("held") or 0)
            store, run_id = self.s.store, self.run_id
            self.ledger = SpendLedger(
                self.authority.max_spend_micro_usd,
                spent=spent,
                persist=lambda now: store.update_run(run_id, data={"spend": now}),
            )
        return self.ledger

    def operation_tools(self) -> dict[str, OperationTool]:
        """The run's connector operations as tools (read once per driver).

        Raises:
            ParseError: a connector manifest is refused.
        """
        if self._operations is None:
            from proctor.runtime.engine.operations import run_operation_tools

            self._operations = run_operation_tools(self.skill, self.s.workspace.root)
        return self._operations

    def _operations_or_blocked(self) -> dict[str, OperationTool]:
        try:
            return self.operation_tools()
        except ProctorError as exc:
            raise Blocked(exc.code, exc.message, "admission_refused") from exc

    def _with_state(self, deliver: Deliver) -> Deliver:
        """``deliver`` plus the ``store.*`` tools' seam: the state store (opened on first use)
        under the namespace of the run's package identity (never a name the package chose),
        which no call names; and the identity itself, which connector writes are keyed by."""
        from proctor.runtime.storage.select import open_state_store
        from proctor.runtime.tools.base import PACKAGE_EXTRA
        from proctor.runtime.tools.store import store_deliver

        s = self.s
        identity = self.skill.identity or self.skill.package.name
        state = store_deliver(identity, lambda: open_state_store(s.environ, s.workspace.state_dir))
        return lambda spec, tool: {
            **deliver(spec, tool),
            **state(spec, tool),
            PACKAGE_EXTRA: identity,
        }

    def _sandbox(self) -> SandboxSetting:
        """The run's sandbox setting: ``PROCTOR_SANDBOX``, else the strictest default any driver
        of the run had (recorded, so a looser session resuming it keeps it)."""
        from proctor.runtime.boundary.sandbox_setting import sandbox_setting, stricter

        recorded = self.record.data.get("sandbox_default")
        default = stricter(self.s.sandbox_default, recorded)
        if default == "required" and recorded != default:  # auto, the loosest, needs no record
            self.s.store.update_run(self.run_id, data={"sandbox_default": default})
            self.record.data["sandbox_default"] = default
        try:
            return sandbox_setting(self.s.environ, default=default)
        except ConfigError as exc:
            raise Blocked(exc.code, exc.message, "admission_refused") from exc

    def _deliver(self) -> Deliver:
        """Resolve the run's credentials once (see :mod:`proctor.runtime.engine.delivery`).

        Raises:
            NeedsCredential: a credential is missing (the caller parks the run).
        """
        from proctor.runtime.engine.delivery import NeedsCredential, prepare_delivery
        from proctor.runtime.engine.operations import operation_credentials

        extra = operation_credentials(self.method, self._operations_or_blocked())
        profile = self.record.data.get("credential_profile")
        try:
            inner = prepare_delivery(
                self.skill, self.method, run_id=self.run_id, store=self.s.store,
                workspace_root=self.s.workspace.root, environ=self.s.environ,
                authority=self.record.data.get("authority") or {},
                taint=self.sanitizer.taint, profile=profile if isinstance(profile, str) else None,
                request_secrets=self.request_secrets, route=self.s.egress_route,
                extra_credentials=extra,
            )  # fmt: skip
        except NeedsCredential:
            raise
        except (CredentialError, ConfigError) as exc:
            raise Blocked(exc.code, exc.message, "credential_unavailable") from exc
        return with_receipts_seam(inner, self.s)

    def _unpriced(self, spec: CallSpec) -> CallOutcome | None:
        """Refuse before admission, sending nothing: a turn's priced call (``http.request``, an
        operation without ``cost:``) has no declared price, so under a spend limit it is
        ``price_unknown``; an Agent Skills package's command outside its ``Bash(...)`` entries
        is ``command_not_allowed``."""
        from proctor.core.spend import SpendRefused
        from proctor.runtime.engine.kinds import priced

        mapping = self.skill.tool_mapping
        argv = spec.args.get("argv")
        if spec.tool == "command.execute" and mapping is not None and not mapping.allows_argv(argv):
            error = {
                "code": "command_not_allowed",
                "message": "this Agent Skills package's allowed-tools do not name this command"
                " (Bash(...) entries); nothing was run",
            }
            return CallOutcome(spec.call_id or "", spec.tool, spec.step_id, "refused", error=error)
        if not priced(spec.tool) or self._quote(spec.tool) is not None:
            return None
        try:
            self.spend_ledger().reserve(None, what=f"a turn's {spec.tool} call")
        except SpendRefused as exc:
            call_id = spec.call_id or spec.address or ""
            return CallOutcome(call_id, spec.tool, spec.step_id, "refused", error=exc.to_dict())
        return None

    def spend_call(self, spec: CallSpec, call: Callable[[], CallOutcome]) -> CallOutcome:
        """Make a turn's ``call``; a priced operation's quote is reserved against the tree's
        limit before it (``cost_limit_exceeded`` sends nothing) and becomes spend when it ran.

        A call refused or answered from its record (already done) gives the hold back; a call
        that pauses on a person gives it back too (it is reserved again when it runs).
        """
        from proctor.core.spend import SpendRefused

        quote = self._quote(spec.tool)
        if quote is None:
            return call()
        ledger = self.spend_ledger()
        try:
            held = ledger.reserve(quote, what=f"a turn's {spec.tool} call")
        except SpendRefused as exc:
            call_id = spec.call_id or spec.address or ""
            return CallOutcome(call_id, spec.tool, spec.step_id, "refused", error=exc.to_dict())
        try:
            outcome = call()
        except BaseException:
            ledger.release(held)
            raise
        if outcome.status == "refused" or outcome.already_done is not None:
            ledger.release(held)
        else:
            ledger.settle(held, quote)
        return outcome

    def _quote(self, tool: str) -> int | None:
        """A connector operation's declared price per call, else ``None``."""
        if not tool.startswith(OPERATION_PREFIX):
            return None
        from proctor.runtime.connectors.operations import quote_micro_usd

        found = self._operations_or_blocked().get(tool)
        return None if found is None else quote_micro_usd(found)


def with_receipts_seam(inner: Deliver, session: Any) -> Deliver:
    """``inner``, plus the run's own receipt store and trusted keys for ``receipts.*`` tools
    (and nothing for any other tool)."""

    def deliver(spec: Any, tool: Any) -> dict[str, Any]:
        out = inner(spec, tool)
        if tool.name.startswith("receipts."):
            from proctor.runtime.home.keys import trusted_local_keys
            from proctor.runtime.tools.receipts_tool import RECEIPTS_EXTRA

            keys = [session.signer.public_key, *trusted_local_keys(session.environ)]
            out[RECEIPTS_EXTRA] = {"load": session.receipts.get, "keys": keys}
        return out

    return deliver

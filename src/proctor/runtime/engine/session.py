"""The run driver: resolve a skill, prepare its run, drive its steps, pause, resume, seal.

A :class:`Session` opens a workspace for running (run store, audit log, tools, guards, the
signing key). Its public API (see ``docs/driver-api.md``):

- :meth:`Session.run` starts a run and drives it to its seal or its first pause;
- :meth:`Session.resume` admits a ``proctor.resume.v1`` document and drives the run on;
- :meth:`Session.turn_call` makes one call of a paused agent turn (MCP turn tools);
- :meth:`Session.envelope` reads a run's current envelope.

The run store is the truth: every settled step (outcome, output, times) and every call is
recorded there, so a resumed run, in any process, reuses settled steps and never executes them
again; receipts are written at seal from the store's records. One driver holds a run at a time
(a lease row). What can go wrong and where it shows:

- the reference or a package file is invalid: raised (no run exists yet; exit code 2);
- the home, the signing key, the receipt store or the run store would fail the run: raised
  before anything of the run is recorded (see :mod:`.start`; exit code 3 for the home and the
  key); a run is then created whole, with its inputs, in one transaction;
- a blocked preparation (inputs that fail the schema, a step kind this version cannot run, a
  policy set that refuses to load, ``effects: none`` with fixed steps that change something)
  seals a ``blocked`` run with its receipt, never echoing the rejected value;
- a refused call blocks its step and the run; a tool that fails fails them.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import RunEnvelope
from proctor.contracts.resume import ResumeDocument, parse_resume_document
from proctor.contracts.values import replace
from proctor.core.authority import Authority, default_authority
from proctor.core.ids import uuid4_hex
from proctor.core.moments import iso_text
from proctor.core.resume import RequestView, admit_resume
from proctor.errors import ProctorError, ResumeRefused, StoreError, UsageError
from proctor.parser.skill import select_method
from proctor.policy.cache import RunPolicies, run_policies
from proctor.policy.guard_files import GuardFiles, guard_modules
from proctor.runtime.admission.governor import CallOutcome
from proctor.runtime.boundary.real import real_folder
from proctor.runtime.directives import WRITABLE_DIRS, is_directive_run
from proctor.runtime.engine.decisions import record_plan
from proctor.runtime.engine.delivery import (
    NeedsCredential,
    park_needs_credential,
    record_authority,
)
from proctor.runtime.engine.host import AgentDriver, ChildCall, Clock, RunInterrupted
from proctor.runtime.engine.lease import (
    LEASE_TTL_LEAST,
    acquire_lease,
    check_lease,
    holder_dead,
    holder_id,
    lease_ttl,
    renew_lease,
)
from proctor.runtime.home.trust import TRUST_ENV, HomeTrust
from proctor.runtime.packages.resolve import reload_skill, verify_named_refs
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.testhooks import kill_point

if TYPE_CHECKING:
    from proctor.receipts.signing import Signer
    from proctor.runtime.boundary.egress import EgressRoute
    from proctor.runtime.boundary.sandbox import SandboxMode
    from proctor.runtime.boundary.sandbox_setting import FoundExecutables
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.stand_ins import ProcessRoute
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.records.receipts import ReceiptStore
    from proctor.runtime.records.runs import RunStore
    from proctor.runtime.telemetry import Observer
    from proctor.runtime.tools.registry import ToolTable

__all__ = ["AgentDriver", "RunInterrupted", "Session"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _named(exc: StoreError, run_id: str) -> StoreError:
    from proctor.runtime.records.store_file import run_stopped_by

    return run_stopped_by(exc, run_id)


class Session:
    """A workspace opened for running skills.

    Args:
        workspace: the workspace.
        environ: the environment to read ``PROCTOR_*`` settings from (default ``os.environ``).
        clock: injected clock (receipt times; a fixed clock gives byte-identical receipts).
        signer: the signing key (default: the home's key, created on first use).
        run_ids: a factory of run ids (default: random UUID4 hex).
        agent_driver: a managed agent that works agent turns; without one, an agent step
            pauses the run ``needs_agent`` on an ``agent_turn`` request.
        egress_route: where checked network requests go instead of the network (``proctor
            test`` answers them from fixtures); the egress guard runs first either way.
        process_route: answers admitted calls of process tools instead of a process (``proctor
            test``'s ``providers.processes``; :mod:`proctor.runtime.engine.stand_ins`).
        durable: fsync receipts as they are written (default). A disposable workspace
            (``proctor test`` deletes it after the run) turns it off.
        sandbox_default: the sandbox mode when ``PROCTOR_SANDBOX`` is unset (default: the
            class's :attr:`sandbox_default`); a surface serving untrusted callers passes
            ``"required"``.
        managed: runs started without a host authority take ``effects: ask, reach:
            workspace`` (an MCP server's sessions); default: true with an ``agent_driver``.
        retain: the runs this session starts keep what a replay needs, as ``proctor.toml``'s
            ``[replay] retain = true`` asks (:mod:`proctor.runtime.records.retention`).
    """

    confine_writes: bool = False
    """Record the runs this session starts as confined to ``output/`` and ``drafts/`` (a
    directive run). It is recorded in the run, so whatever session resumes it confines it."""

    sandbox_default: SandboxMode = "auto"
    """The sandbox mode of the processes this session's runs start when ``PROCTOR_SANDBOX`` is
    unset (``docs/sandbox.md``): ``auto`` for a person's own CLI and the Python API; sessions
    driven by a model or serving MCP clients use ``required``. A run records the strictest
    default it was driven under, so a later, looser driver keeps it."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Clock = _utc_now,
        signer: Signer | None = None,
        run_ids: Callable[[], str] | None = None,
        agent_driver: AgentDriver | None = None,
        egress_route: EgressRoute | None = None,
        process_route: ProcessRoute | None = None,
        durable: bool = True,
        sandbox_default: SandboxMode | None = None,
        managed: bool | None = None,
        retain: bool = False,
    ) -> None:
        self.workspace = workspace
        self.retain = retain
        if sandbox_default is not None:
            self.sandbox_default = sandbox_default
        self.managed = agent_driver is not None if managed is None else managed
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.clock = clock
        self.agent_driver = agent_driver
        self.egress_route = egress_route
        self.process_route = process_route
        self.durable = durable
        self._signer = signer
        self._key_noted = False
        self._key_source = "given"
        self._run_ids = run_ids or uuid4_hex
        self._store: RunStore | None = None
        self._audit: AuditLog | None = None
        self._observer: Observer | None = None
        self._receipts: ReceiptStore | None = None
        self._tools: ToolTable | None = None
        self._holder = holder_id()
        self.stop_event = threading.Event()
        self._trusted_by_env: set[str] = set()
        # when this session last took or renewed each run's lease (monotonic; see _renew)
        self._renewed: dict[str, float] = {}
        self._released: set[str] = set()  # leases its seals gave back (see _release_sealed)
        # the bubblewrap its runs found along PATH (see sandbox_setting's ``found``)
        self.found_executables: FoundExecutables = {}
        from proctor.runtime.engine.held_skills import HeldSkills

        self._held_skills = HeldSkills()  # the packages of its turn calls (.held_skills)
        from proctor.runtime.engine.held_policy import HeldPolicy

        self._held_policy = HeldPolicy()  # the policy state it loaded (.held_policy)

    @property
    def holder(self) -> str:
        """This session's lease-holder id (``proctor worker`` renews its leases by it)."""
        return self._holder

    # -- parts, opened on first use --------------------------------------------------------

    @property
    def store(self) -> RunStore:
        """The run store (``PROCTOR_DATABASE_URL``, ``PROCTOR_DATABASE_PATH`` or
        ``.proctor/runs.sqlite``)."""
        if self._store is None:
            from proctor.runtime.records.backend import open_run_store

            _path, shown = self.store_file()
            self._store = open_run_store(self.workspace.state_dir, self.environ, shown)
        return self._store

    def store_file(self) -> tuple[Path, str]:
        """Where the SQLite run store is (``PROCTOR_DATABASE_PATH`` or ``.proctor/runs.sqlite``)
        and how messages name it (relative to the workspace, never a host path). Opens nothing."""
        from proctor.runtime.records.store_file import run_store_path

        path = run_store_path(self.workspace.state_dir, self.environ)
        named = self.environ.get("PROCTOR_DATABASE_PATH")
        return path, "$PROCTOR_DATABASE_PATH" if named else self.workspace.relative_lexical(path)

    @property
    def audit(self) -> AuditLog:
        """The audit log (``PROCTOR_AUDIT_LOG`` or ``.proctor/audit.jsonl``)."""
        if self._audit is None:
            from proctor.runtime.records.audit import AuditLog, audit_path

            injected = None if self.clock is _utc_now else self.clock
            self._audit = AuditLog(audit_path(self.workspace.root, self.environ), clock=injected)
            from proctor.runtime.telemetry import open_observer

            self._observer = open_observer(self.environ)
            if self._observer is not None:
                self._audit.observers.append(self._observer)
        return self._audit

    @property
    def receipts(self) -> ReceiptStore:
        """The receipt store (``PROCTOR_RECEIPT_DIR`` or ``.proctor/receipts``)."""
        if self._receipts is None:
            from proctor.runtime.records.receipts import ReceiptStore, receipt_dir

            self._receipts = ReceiptStore(
                receipt_dir(self.workspace.state_dir, self.environ), durable=self.durable
            )
        return self._receipts

    def load_key(self) -> Signer:
        """The signing key, loaded (created in the home on first use) and checked.

        Raises:
            ConfigError: the key is exposed, invalid or uncreatable, or missing from the home
                where receipts here were signed by a home key not kept trusted
                (``signing_key_missing``), or there is no home.
        """
        if self._signer is None:
            from proctor.runtime.home.keys import load_signer

            key = load_signer(
                self.environ, held_key_ids=lambda: self.receipts.key_ids(source="home")
            )
            self._signer = key.signer
            self._key_source = "named" if key.shown_path == "$PROCTOR_SIGNING_KEY" else "home"
        return self._signer

    @property
    def signer(self) -> Signer:
        """The signing key (see :meth:`load_key`), its id noted in the receipt store before it
        signs there."""
        signer = self.load_key()
        if not self._key_noted:
            self.receipts.note_key(signer.key_id, source=self._key_source)
            self._key_noted = True
        return signer

    @property
    def tools(self) -> ToolTable:
        """Every native tool by name (each tool's module imported when it is first read), and
        the workspace's pinned upstream MCP tools (``mcp:<server>/<tool>``) when it has a
        ``proctor-mcp.lock``."""
        if self._tools is None:
            from proctor.runtime.tools.registry import native_tools

            self._tools = native_tools()
            from proctor.runtime.gateway.standing import has_upstreams

            if has_upstreams(self.workspace.root):
                # the workspace pinned upstream MCP tools: they are tools of its runs (a
                # configuration that does not load refuses those tools' calls, nothing else)
                from proctor.runtime.gateway.upstreams import workspace_tools

                self._tools.update(workspace_tools(self.workspace, self.environ))
        return self._tools

    def policy(self, real_root: str | None = "") -> RunPolicies:
        """The loaded policy set (or UNRESTRICTED under the audited opt-out), the guard
        registry, and whether the run goes unguarded, as the workspace's files are now
        (loaded once per process for each distinct set of files: :mod:`proctor.policy.cache`;
        not read again while none of them changed: :mod:`.held_policy`; ``real_root`` as there).

        The workspace's guard modules run only when a person trusted their bytes (the home's
        record, :mod:`proctor.runtime.home.trust`) or ``PROCTOR_TRUST_WORKSPACE=1`` says so
        (audited, ``guards_trusted_by_environment``, once per session and digest).

        Raises:
            PolicyLoadError: a policy file or rule is invalid.
            ConfigError: ``guards_untrusted`` (no guard module ran); bad profile, drift from
                the shipped rules, or zero enforceable rules.
        """
        root = str(self.workspace.root)
        held = self._held_policy.get(root, self.environ, real_root)  # nothing of it changed
        if held is not None:
            return held  # type: ignore[no-any-return]
        stamped = self._held_policy.stamp(root, self.environ)  # before anything is read
        trust = HomeTrust(self.environ, on_environment=self._audit_env_trust)
        loaded = run_policies(self.workspace.root, self.environ, self.tools, trust=trust)
        modules = bool(guard_modules(self.workspace.root))  # kept only when it names none
        self._held_policy.put(stamped, loaded, guard_modules=modules)
        return loaded

    def _audit_env_trust(self, files: GuardFiles) -> None:
        if files.digest in self._trusted_by_env:
            return
        self.audit.emit(
            "guards_trusted_by_environment",
            run_id=None,
            step_index=None,
            fsync=True,
            variable=TRUST_ENV,
            digest=files.digest,
            files=[[f.path, f.sha256] for f in files.files],
        )
        self._trusted_by_env.add(files.digest)

    settle_on_close = True
    """Whether :meth:`close` settles what is due; ``proctor worker`` clears it on the sessions
    its slots drive (its upkeep thread settles every few seconds)."""

    def close(self) -> None:
        """Settle what is due on waiting requests (notifications, deadlines: see
        :mod:`.upkeep`; unless :attr:`settle_on_close` is cleared), then release the run store
        and the audit log. A failure to settle is audited, never raised: the outbox keeps
        what is due for the next command."""
        if self._store is not None:
            if self.settle_on_close:
                self.settle_due()
            self._store.close()
        if self._audit is not None:
            self._audit.close()
        if self._observer is not None:
            self._observer.close()  # exports what finished; the exporter is the process's
            self._observer = None

    def settle_due(self) -> None:
        """Send due notifications and settle passed deadlines (see :mod:`.upkeep`); a
        refusal is audited (``upkeep_failed``) and left for the next attempt."""
        from proctor.runtime.engine.upkeep import settle

        try:
            settle(self)
        except ProctorError as exc:
            # a broken audit log is refused by the next command that writes it
            with contextlib.suppress(ProctorError):
                self.audit.emit("upkeep_failed", run_id=None, step_index=None, code=exc.code)

    def request_stop(self) -> None:
        """Ask every run this session drives to stop before its next step (SIGTERM)."""
        self.stop_event.set()

    # -- leases ----------------------------------------------------------------------------

    def _acquire(self, run_id: str, *, fresh: bool = False) -> None:
        at = time.monotonic()
        if not acquire_lease(self.store, run_id, self._holder):
            raise ResumeRefused(
                f"run {run_id} is being driven by another process; try again when it stops",
                code="run_busy",
            )
        self._renewed[run_id] = at
        # a run its start made in this transaction took its lease from nobody
        lease = None if fresh else self.store.taken_lease(run_id)
        if lease is not None and lease.taken_from:
            # the run record names the holder whose lease lapsed (or who died) and the epoch
            # that took over from it; the retry question of its claims says which it was
            lapsed: dict[str, Any] = {
                "holder": lease.taken_from,
                "epoch": lease.epoch,
                "lapsed": not holder_dead(lease.taken_from),
            }
            self.store.update_run(run_id, data={"lapsed_holder": lapsed})
            self.store.append_event(run_id, "lease_taken_over", lapsed)
            self.audit.emit("lease_taken_over", run_id=run_id, step_index=None, **lapsed)

    def _release(self, run_id: str) -> None:
        self._renewed.pop(run_id, None)
        if run_id in self._released:  # given back with the seal (see _release_sealed)
            self._released.discard(run_id)
            return
        try:
            self.store.release_lease(run_id, self._holder)
        except StoreError as exc:  # a full disk refuses it too: a gone holder's lease is
            if exc.code != "store_full":  # taken over at once by a driver on this host
                raise

    def _renew(self, run_id: str, *, before_step: bool = False) -> None:
        """Renew the run's lease (:func:`renew_lease`), unless this session took or renewed it
        less than a tenth of its time ago: the lease then still runs for nine tenths of it,
        nobody may take a live holder's lease before it runs out, and every write is fenced by
        the lease's epoch all the same. Before a seal it is then checked (one read, no commit:
        a driver that lost its lease writes no receipt)."""
        at = time.monotonic()
        since = at - self._renewed.get(run_id, -1e18)
        # within a tenth of the shortest lease there is: so within a tenth of this one, which
        # is not read (an unset PROCTOR_LEASE_TTL is a KeyError raised and caught in os.environ)
        if since < LEASE_TTL_LEAST / 10 or since < lease_ttl() / 10:
            if not before_step:
                check_lease(self.store, run_id, self._holder)
            return
        renew_lease(self.store, run_id, self._holder)
        self._renewed[run_id] = at

    def _release_sealed(self, run_id: str) -> None:
        """Note that the seal's commit gave the lease back (one commit for both): the
        :meth:`_release` that ends the driving has nothing left to do."""
        self._released.add(run_id)

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        ref: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        cli_inputs: list[str] | None = None,
        authority: Authority | None = None,
        cwd: Path | None = None,
        stop: threading.Event | None = None,
        profile: str | None = None,
        request_secrets: Mapping[str, str] | None = None,
        act: Any = None,
    ) -> RunEnvelope:
        """Run one method of a skill to its seal or its first pause.

        Args:
            ref: ``PATH[#METHOD]``, a catalog name, a core skill ``proctor/<name>`` or an
                installed package ``<publisher>/<name>@<version>``
                (:mod:`proctor.runtime.packages.resolve`).
            inputs: inputs as one JSON object (``--inputs``).
            cli_inputs: ``name=value`` pairs typed by the method's schema (``-i``); they
                override keys of ``inputs``.
            authority: what the host grants; default ``effects: allow, reach: workspace``
                (``effects: ask`` for a managed session), recorded as set by no host.
            cwd: where relative references start (default: the process's current folder).
            stop: set it to stop the run before its next step (graceful stop).
            profile: the credential profile to prefer (``--profile``); only its name is kept.
            request_secrets: credential material for this run only, by requirement name
                (host handles); tainted, delivered, never stored.
            act: the act the host states for the run (one JSON value, at most 64 KiB), which
                its steps read as ``$run.act``; recorded with the run.

        Returns:
            the envelope: ``sealed``, or ``needs_approval``/``needs_agent`` with requests,
            or ``needs_credential`` (unsealed, no step run) with the setup commands.

        Raises:
            UsageError / ParseError: the reference or the package is invalid (no run exists).
            RegistryRefused: a core skill or installed package that does not verify
                (``package_modified``, ``package_not_installed``, ``registry_untrusted``...;
                no run exists).
            ConfigError: ``home_missing`` or a signing key that is exposed, invalid,
                unreadable, uncreatable or missing (no run exists; see :mod:`.start`).
            ReceiptInvalid: ``receipt_store_foreign`` (no run exists).
            RunInterrupted: a stop was requested; the run waits for ``resume``.
            StoreError: ``store_corrupt`` (no run exists), or the run store failed;
                ``seal_failed`` when the end of the run (a receipt, the ``run_sealed`` audit
                line, the seal) could not be written: the run stays unsealed, and ``resume``
                with ``{}`` seals it.
        """
        from proctor.runtime.engine.drive import RunDriver
        from proctor.runtime.engine.start import check_parts, no_config, run_egress, start_run

        real = real_folder(str(self.workspace.root))  # one answer for the run's checks
        skill = self._held_skills.resolve(  # a local package unchanged since: not read again
            ref, cwd=cwd or Path.cwd(), root=self.workspace.root, environ=self.environ,
            real_root=real,
        )  # fmt: skip
        if skill.package.profile is None:
            raise UsageError(
                f"skill {skill.package.name} has no run.yaml, so it has no method to run",
                code="no_methods",
            )
        if act is not None:
            check_act(act)
        method_name, method = select_method(skill.package.profile, skill.method)
        verify_named_refs(method, base=skill.folder, workspace_root=self.workspace.root,
                          environ=self.environ)  # fmt: skip
        bare = no_config(self.workspace.root)  # proctor.toml looked at once for the start
        journals = check_parts(self, bare=bare)  # whether a bundle journal was open
        kill_point("start.checked")
        if authority is None:
            authority = default_authority(managed=self.managed)
        elif authority.set_by == "default":
            authority = replace(authority, set_by="host")
        record = RunRecord(
            run_id=self._run_ids(),
            skill=skill.package.name,
            method=method_name,
            data={
                "package": skill.label,
                "package_folder": str(skill.folder),
                "package_digest": skill.package_digest,
                "authority": record_authority(authority, run_egress(self.workspace.root, bare)),
                "credential_profile": profile,
                "started_at": iso_text(self.clock()),
            },
        )
        if skill.origin is not None:
            record.data["origin"] = skill.origin
        if act is not None:
            record.data["act"] = act
        if skill.identity:  # the column history lists, and the data the receipt binds
            record.identity = record.data["identity"] = skill.identity
        directive = is_directive_run(record.data, self.workspace.state_dir)  # resolved once
        if self.confine_writes or directive:
            record.data["writable_dirs"] = list(WRITABLE_DIRS)
        driver = RunDriver(self, record, skill, method, stop)
        driver.directive, driver.bare, driver.real_root = directive, bare, real
        driver.request_secrets = request_secrets
        start_run(self, driver, inputs, cli_inputs, self._acquire, journals=journals)
        try:
            try:
                return driver.drive()
            except NeedsCredential as needed:
                return park_needs_credential(
                    needed, run_id=record.run_id, skill=record.skill, method=record.method,
                    store=self.store, audit=self.audit, sanitizer=driver.sanitizer,
                )  # fmt: skip
        except StoreError as exc:  # a full disk: the run is named, with the way on
            raise _named(exc, record.run_id) from exc
        finally:
            self._release(record.run_id)

    def resume(
        self,
        run_id: str,
        document: ResumeDocument | Mapping[str, Any] | bytes | str,
        *,
        stop: threading.Event | None = None,
        request_secrets: Mapping[str, str] | None = None,
        decided_by: str | None = None,
    ) -> RunEnvelope:
        """Admit a ``proctor.resume.v1`` document and drive the run to its next pause or seal.

        ``decided_by`` names who decided (``os:NAME``, ``console:NAME``, ``client-relayed:NAME``);
        it is recorded with each decision (run store, audit log, receipt).

        Credentials are resolved again from a new snapshot (the recorded profile name first,
        then ``request_secrets`` as host handles for this command only).

        Every entry is checked first (:func:`proctor.core.resume.admit_resume`); a refused
        document changes nothing. Admitted decisions are recorded in the store before the run
        moves on. ``{"close": {...}}`` seals the run from its record alone. A sealed run with
        nothing new returns its sealed envelope.

        Raises:
            UsageError: ``run_not_found``.
            ConfigError, ReceiptInvalid, StoreError: the checks of :func:`.start.check_parts`
                (nothing is recorded; the run waits as it was).
            ResumeRefused: the document (codes in :mod:`proctor.core.resume`), ``run_busy``
                (another process drives it), ``package_changed`` (the package's files differ
                from the ones the run started with), ``needs_credential`` (a credential the
                run needs is gone; the run waits as it was).
            RunInterrupted: a stop was requested.
        """
        from proctor.runtime.engine.drive import RunDriver

        record = self._record(run_id)
        doc = (
            document
            if isinstance(document, ResumeDocument)
            else parse_resume_document(
                dict(document) if isinstance(document, Mapping) else document
            )
        )
        views = self._request_views(run_id, doc)
        plan = admit_resume(doc, sealed=record.status == "sealed", requests=views)
        if record.status == "sealed":
            return self.envelope(run_id)
        from proctor.runtime.engine.start import check_parts

        check_parts(self)  # a key or store that would fail at seal is refused before any step
        self._acquire(run_id)
        try:
            record = self._record(run_id)
            if record.status == "sealed":
                raise ResumeRefused(f"run {run_id} has sealed", code="run_sealed")
            if plan.close is not None:
                return self._close(record, plan.close)
            skill, method = self._reload(record)
            record = record_plan(self, record, plan, decided_by, views=views)
            self.store.update_run(run_id, status="running")
            driver = RunDriver(self, record, skill, method, stop)
            driver.request_secrets = request_secrets
            try:
                return driver.drive()
            except NeedsCredential as needed:
                # the run waits as it was; resume again after setup
                self.store.update_run(run_id, status=record.status)
                raise ResumeRefused(
                    needed.message, code="needs_credential", details=needed.details
                ) from needed
        except StoreError as exc:  # a full disk: the run is named, with the way on
            raise _named(exc, run_id) from exc
        finally:
            self._release(run_id)

    def turn_call(
        self,
        run_id: str,
        address: str,
        tool: str,
        args: Mapping[str, Any],
        call_id: str,
        *,
        reason: str = "",
        stop: threading.Event | None = None,
    ) -> CallOutcome:
        """Make one call of the agent turn a paused run waits on at ``address``.

        The call is admitted with that turn's allowance (scope, schema, containment, policy,
        floor, budget) and recorded under ``call_id``: a repeat of the same ``call_id``
        returns the recorded outcome and sends nothing.

        A change under ``effects: ask`` with no approval of its own pauses the run (needs_approval)
        on a request at ``<address>/turn/<call_id>`` carrying exactly what executes; the outcome
        is ``refused`` with code ``approval_pending`` and nothing is sent. After a person approves
        it with ``resume``, the same call (same ``call_id``) executes once.

        A ``skill.*`` call whose child run pauses waits the same way: the child's requests
        surface at ``<address>/turn/<call_id>#<child address>``, the outcome is ``refused``
        with code ``child_pending``, and once they are answered the same call goes on with the
        child and returns its result (see :mod:`.skill_calls`).

        ``stop`` cancels the call: a read in flight stops (``call_cancelled``); an effect in flight
        runs to its end and settles as it ended, with ``cancel_requested`` recorded beside it.

        Raises:
            UsageError: ``run_not_found``.
            ResumeRefused: ``run_sealed``; ``unknown_address`` when the run does not wait on
                an agent turn at ``address``; ``run_busy``; ``package_changed``.
            ConfigError, ReceiptInvalid, StoreError: the checks of :func:`.start.check_parts`
                (a key or store the seal would fail on), before the call is admitted.
        """
        from proctor.runtime.engine.drive import RunDriver
        from proctor.runtime.engine.start import check_parts

        check_parts(self)  # as resume does: no effect under a key the seal would refuse
        record = self._record(run_id)
        if record.status == "sealed":
            raise ResumeRefused(f"run {run_id} has sealed", code="run_sealed")
        turn = self.store.request(run_id, address)  # one row, however long the run
        if turn is None or turn.kind != "agent_turn" or turn.state == "used":
            raise ResumeRefused(
                f"run {run_id} waits on no agent turn at {address!r}", code="unknown_address"
            )
        self._acquire(run_id)
        try:
            skill, method = self._turn_skill(record)
            driver = RunDriver(self, record, skill, method, None)
            return driver.turn_call(turn.body, tool, dict(args), call_id, reason, stop)
        finally:
            self._release(run_id)

    def drive_child(self, call: ChildCall) -> RunEnvelope:
        """Start or go on with a child run (see :mod:`.children`)."""
        from proctor.runtime.engine.children import drive_child

        return drive_child(self, call)

    def envelope(self, run_id: str) -> RunEnvelope:
        """The run's current envelope: sealed, paused with its requests, or running.

        Raises:
            UsageError: ``run_not_found``.
        """
        from proctor.runtime.engine.stored_envelope import envelope_doc

        record = self._record(run_id)
        doc = envelope_doc(self.store, record)
        if doc is not None:
            return RunEnvelope.model_validate(doc)
        return RunEnvelope(
            status="needs_agent",
            run_id=run_id,
            skill=record.skill,
            method=record.method,
            resume_command=f"proctor resume {run_id} -",
            notes=[f"the run is {record.status}; resume it with {{}} to continue"],
        )

    # -- helpers ---------------------------------------------------------------------------

    def _record(self, run_id: str) -> RunRecord:
        record = self.store.get_run(run_id)
        if record is None:
            raise UsageError(f"no run with id {run_id!r} in this workspace", code="run_not_found")
        return record

    def _request_views(self, run_id: str, doc: ResumeDocument) -> list[RequestView]:
        """The requests ``doc`` names (each read by its key: a resume reads what it answers,
        not every request the run asked)."""
        named = (
            self.store.request(run_id, a) for a in dict.fromkeys([*doc.answers, *doc.approvals])
        )
        return [
            RequestView(r.address, r.kind, r.request_digest, r.state, r.decision, r.body)
            for r in named
            if r is not None
        ]

    def _turn_skill(self, record: RunRecord) -> tuple[Any, Any]:
        """:meth:`_reload`, or the package this session loaded for an earlier call of the run
        when nothing under its folder changed since (:mod:`.held_skills`); a package named by
        an ``origin`` is verified again on every call."""
        from proctor.runtime.engine.held_skills import stamp_package

        folder, recorded = record.data.get("package_folder"), record.data.get("package_digest")
        if "origin" in record.data or not isinstance(folder, str) or not isinstance(recorded, str):
            return self._reload(record)
        key, root = (folder, recorded, record.method), str(self.workspace.root)
        held = self._held_skills.get(key, root)
        if held is not None:
            return held  # type: ignore[no-any-return]
        stamped = stamp_package(folder, root)  # before the package is read
        loaded = self._reload(record)  # refused package_changed unless the digest is recorded
        self._held_skills.put(key, stamped, loaded)
        return loaded

    def _reload(self, record: RunRecord) -> tuple[Any, Any]:
        if not isinstance(record.data.get("package_folder"), str):
            raise ResumeRefused("the run's record names no package", code="package_changed")
        try:
            skill = reload_skill(
                record.data, workspace_root=self.workspace.root, environ=self.environ
            )
        except ProctorError as exc:
            raise ResumeRefused(
                f"the run's package cannot be read any more ({exc.code})", code="package_changed"
            ) from exc
        if (
            skill.package_digest != record.data.get("package_digest")
            or skill.package.profile is None
        ):
            raise ResumeRefused(
                "the run's package changed since the run started; close the run with"
                ' {"close": {"outcome": "superseded"}} and start it again',
                code="package_changed",
            )
        _, method = select_method(skill.package.profile, record.method)
        return skill, method

    def _close(self, record: RunRecord, outcome: str) -> RunEnvelope:
        from proctor.contracts.envelope import Refusal
        from proctor.runtime.engine.sealing import seal_run

        self.store.append_event(record.run_id, "closed", {"outcome": outcome})
        self.audit.emit("run_closed", run_id=record.run_id, step_index=None, outcome=outcome)
        refusal = Refusal(code="host_closed", message=f"the host closed the run ({outcome})")
        return seal_run(
            self,
            record,
            outcome=outcome,
            seal_reason="host_closed",
            result=None,
            refusal=refusal,
        )


ACT_MAX_BYTES = 64 * 1024
"""The most bytes (canonical JSON) the act a host states for a run takes."""


def check_act(act: Any) -> None:
    """Refuse an act that is not one JSON value of at most :data:`ACT_MAX_BYTES`.

    Raises:
        UsageError: ``act_invalid``; the value is never echoed.
    """
    from proctor.contracts.json_strict import check_value
    from proctor.receipts.canonical import canonical

    try:
        check_value(act, source="act")
        size = len(canonical(act))
    except ProctorError as exc:
        raise UsageError(
            f"the act is not one JSON value ({exc.code})", code="act_invalid"
        ) from None
    if size > ACT_MAX_BYTES:
        raise UsageError(
            f"the act takes {size} bytes as JSON; at most {ACT_MAX_BYTES}", code="act_invalid"
        )
